package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/nats-io/nats.go"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

// ManyResult is many intents of one ledger through the daemon's path:
// JetStream intake, the service, the SQLite store and block cache, verdicts
// on the verdict stream.
type ManyResult struct {
	Intents     int            `json:"intents"`
	Statuses    map[string]int `json:"statuses"`
	Seconds     float64        `json:"seconds"` // first publish to last verdict
	IntentsPerS float64        `json:"intents_per_second"`
	LatencyMS   latencyMS      `json:"latency_ms"` // publish → first verdict received
	// Where the burst's time goes: every intent published, the first
	// verdict received (the cold scan ends), milliseconds from the first
	// publish.
	PublishedMS    float64 `json:"published_ms"`
	FirstVerdictMS float64 `json:"first_verdict_ms"`
	// Queued: the intents were published before the daemon started; the
	// times (latency too) count from its start.
	Queued  bool   `json:"queued,omitempty"`
	Queries uint64 `json:"queries"`
	// QueriesByMethod: where the queries went ("ledger:<method>",
	// "archive:<method>"); certified tips are ledger:icrc3_get_tip_certificate.
	QueriesByMethod map[string]uint64 `json:"queries_by_method"`
	BlocksClient    uint64            `json:"blocks_fetched"`
	OneScan         uint64            `json:"one_scan_blocks"` // a single cold scan of the earliest window
	ScanRatio       float64           `json:"blocks_vs_one_scan"`
	CPUSeconds      float64           `json:"cpu_seconds_process"`
	// LedgerCPUSeconds is the test ledger's CPU over the same span, when
	// it runs in a child process: on this machine it shares the cores
	// that a real ledger, across the network, would not.
	LedgerCPUSeconds float64 `json:"cpu_seconds_ledger,omitempty"`
	// CoresBusy is the process's and the test ledger's CPU over the
	// burst's span, as a share of the machine's cores: near 1, the burst
	// waits for CPU, not for a disk or a round trip.
	CoresBusy   float64 `json:"cores_busy"`
	PeakRSS     uint64  `json:"peak_rss_bytes"`
	PeakRSSRise uint64  `json:"peak_rss_rise_bytes"`
}

// publishers is how many callers publish a burst's intents side by side.
const publishers = 16

type latencyMS struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// runMany starts an embedded NATS server, a store and the service in dir,
// publishes n intents as a tool layer would and waits for each one's
// verdict (final, or not_yet while its window is open).
//
// queued publishes the intents before the daemon starts instead, as a
// backlog (a fleet back from an outage): the figures are then the daemon's
// alone, from its start to the last verdict, without the tool layer's
// publishes competing for the intent stream.
func (sc *scenario) runMany(ctx context.Context, ag *agent.Agent, dir string, n int, inflight int, queued bool, profile string) (ManyResult, error) {
	res := ManyResult{Intents: n, Statuses: map[string]int{}, Queued: queued}
	// Every goroutine of the burst (the daemon's, NATS's, the publisher's)
	// carries this label, so a CPU profile of the run (-cpuprofile) can be
	// narrowed to the burst with -tagfocus phase=burst. Within it, "run"
	// tells the live burst from the backlog, and "side" what pays: the
	// reference scan of the earliest window (onescan), the daemon with its
	// embedded server (daemon), or the tool layer's publishers and verdict
	// subscriber (client). A goroutine inherits its creator's labels, so
	// the server's end of the tool layer's in-process connection carries
	// side=client: split the NATS server's frames by stack, not by side.
	run := "live"
	if queued {
		run = "queued"
	}
	label := func(side string) {
		pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("phase", "burst", "run", run, "side", side)))
	}
	defer pprof.SetGoroutineLabels(ctx)
	label("onescan")
	ids, bodies := sc.manyIntents(n)
	ins := make([]*matcher.Intent, len(bodies))
	for i, b := range bodies {
		in, err := matcher.ParseIntent(b)
		if err != nil {
			return res, err
		}
		ins[i] = in
	}
	one, err := sc.oneScan(ctx, ag, ins)
	if err != nil {
		return res, fmt.Errorf("many: one scan: %w", err)
	}
	res.OneScan = one
	label("daemon")

	// The daemon exactly as serve wires it, with its own embedded server;
	// for a backlog, one started first, which the daemon is given (and
	// which is shut down after it).
	var emb *queue.Embedded
	if queued {
		var err error
		if emb, err = queue.StartEmbedded(queue.EmbeddedConfig{DataDir: filepath.Join(dir, "backlog-nats")}); err != nil {
			return res, err
		}
		defer emb.Shutdown()
	}
	var d *daemon.Daemon
	startDaemon := func(emb *queue.Embedded) error {
		label("daemon")
		defer label("client")
		var err error
		d, err = daemon.New(ctx, daemon.Config{DataDir: dir, Instance: "reconbench", RootKey: sc.RootKey,
			PollInterval: time.Hour, MaxInflight: inflight, MaxMessageBytes: 32 << 10, Grace: 10 * time.Second},
			daemon.Options{Agent: ag, Embedded: emb})
		return err
	}
	defer func() {
		if d == nil {
			return
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		d.Shutdown(sctx)
	}()
	if !queued {
		if err := startDaemon(nil); err != nil {
			return res, err
		}
		emb = d.Embedded()
	}
	label("client")
	tool, err := queue.Connect(ctx, queue.ConnConfig{Embedded: emb, Name: "reconbench-tool"})
	if err != nil {
		return res, err
	}
	defer tool.Close()
	if queued {
		if err := tool.EnsureStreams(ctx); err != nil {
			return res, err
		}
	}

	// The tool layer's side: one subscription on every verdict subject,
	// open before the first intent is published.
	var mu sync.Mutex
	sent := make(map[string]time.Time, n)
	got := make(map[string]time.Duration, n)
	foundAt := make(map[string]uint64, n)
	var first, last time.Time
	done := make(chan struct{})
	sub, err := tool.NATS().Subscribe(tool.Subjects().VerdictsFilter(), func(m *nats.Msg) {
		// Only what the checks below read: the subscriber shares the
		// daemon's CPUs, and decoding whole verdicts would bill it for
		// the tool layer's work.
		var v struct {
			IntentID string               `json:"intent_id"`
			Status   reconciled.Status    `json:"status"`
			Block    *reconciled.BlockRef `json:"block"`
		}
		if err := json.Unmarshal(m.Data, &v); err != nil {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		t0, ok := sent[v.IntentID]
		if _, seen := got[v.IntentID]; !ok || seen {
			return
		}
		got[v.IntentID] = now.Sub(t0)
		res.Statuses[string(v.Status)]++
		if v.Status == reconciled.StatusFound && v.Block != nil {
			foundAt[v.IntentID] = uint64(v.Block.Index)
		}
		last = now
		if len(got) == 1 {
			first = now
		}
		if len(got) == n {
			close(done)
		}
	})
	if err != nil {
		return res, fmt.Errorf("many: subscribe verdicts: %w", err)
	}
	defer sub.Unsubscribe()
	if err := tool.NATS().Flush(); err != nil {
		return res, err
	}

	// The profile covers the whole burst, a backlog's publishes too (their
	// samples carry side=client); CPUSeconds, like the other figures of a
	// backlog, counts from the daemon's start.
	stopProfile, err := startProfile(profile)
	if err != nil {
		return res, err
	}
	defer stopProfile()
	phase := startMemPhase()
	cpu0 := cpuTime()
	ledgerCPU := func() time.Duration { return -1 }
	if sc.child != nil {
		ledgerCPU = sc.child.cpu
	}
	ledger0 := ledgerCPU()

	// A burst comes from many callers at once: publishers run side by side,
	// so the figures measure the daemon rather than one client's serial
	// publish round trips.
	start := time.Now()
	var pub sync.WaitGroup
	pubErr := make(chan error, publishers)
	for p := range publishers {
		pub.Go(func() {
			for i := p; i < len(ids); i += publishers {
				mu.Lock()
				sent[ids[i]] = time.Now()
				mu.Unlock()
				if _, err := tool.PublishIntent(ctx, sc.Ledger, ids[i], bodies[i], matcher.IntentHash(bodies[i])); err != nil {
					pubErr <- fmt.Errorf("many: publish %s: %w", ids[i], err)
					return
				}
			}
		})
	}
	pub.Wait()
	res.PublishedMS = ms(time.Since(start))
	close(pubErr)
	if err := <-pubErr; err != nil {
		return res, err
	}
	if queued {
		// The backlog is in the stream: the clock starts with the daemon.
		mu.Lock()
		start = time.Now()
		for id := range sent {
			sent[id] = start
		}
		mu.Unlock()
		cpu0, ledger0 = cpuTime(), ledgerCPU()
		if err := startDaemon(emb); err != nil {
			return res, err
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		k := len(got)
		mu.Unlock()
		return res, fmt.Errorf("many: %d of %d verdicts received: %w", k, n, ctx.Err())
	}
	res.CPUSeconds = (cpuTime() - cpu0).Seconds()
	if l := ledgerCPU(); l >= 0 && ledger0 >= 0 {
		res.LedgerCPUSeconds = (l - ledger0).Seconds()
	}
	stopProfile()
	res.PeakRSS, res.PeakRSSRise = phase.peak()

	mu.Lock()
	defer mu.Unlock()
	res.Seconds = last.Sub(start).Seconds()
	if res.Seconds > 0 {
		res.CoresBusy = (res.CPUSeconds + res.LedgerCPUSeconds) / (res.Seconds * float64(runtime.NumCPU()))
	}
	res.FirstVerdictMS = ms(first.Sub(start))
	res.IntentsPerS = float64(n) / res.Seconds
	lat := make([]time.Duration, 0, n)
	for _, d := range got {
		lat = append(lat, d)
	}
	p50, p99, mx := percentiles(lat)
	res.LatencyMS = latencyMS{ms(p50), ms(p99), ms(mx)}
	cs := d.ClientStats()[sc.Ledger]
	res.Queries, res.BlocksClient, res.QueriesByMethod = cs.Total, cs.Blocks, cs.Queries
	if res.OneScan > 0 {
		res.ScanRatio = float64(res.BlocksClient) / float64(res.OneScan)
	}
	// Every intent matching a planted payment must be found at its block,
	// and no intent of another amount may be: a wrong verdict voids the
	// figures.
	if want := min(n, len(sc.Planted)); len(foundAt) != want {
		return res, fmt.Errorf("many: %d found, want %d (statuses %v)", len(foundAt), want, res.Statuses)
	}
	for k := 0; k < min(n, len(sc.Planted)); k++ {
		if at, ok := foundAt[ids[k]]; !ok || at != sc.Planted[k].Index {
			return res, fmt.Errorf("many: %s found at %d (%t), planted at %d", ids[k], at, ok, sc.Planted[k].Index)
		}
	}
	if k := res.Statuses[string(reconciled.StatusFound)] + res.Statuses[string(reconciled.StatusAbsent)] + res.Statuses[string(reconciled.StatusNotYet)]; k != n {
		return res, fmt.Errorf("many: statuses %v, want only found, absent and not_yet", res.Statuses)
	}
	return res, nil
}

// startProfile starts a CPU profile into path (none when empty); the
// returned stop may be called more than once. Heap profiles are written to
// path+".heap0" at the start and path+".heap1" at the stop: the burst's
// own allocations are the second less the first (pprof -base).
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	if err := writeHeapProfile(path + ".heap0"); err != nil {
		return nil, err
	}
	stopCPU, err := startCPUProfile(path)
	if err != nil {
		return nil, err
	}
	return sync.OnceFunc(func() {
		stopCPU()
		// A profile is a measurement aid: one that cannot be written is
		// reported, and the figures stand.
		if err := writeHeapProfile(path + ".heap1"); err != nil {
			fmt.Fprintln(os.Stderr, "reconbench:", err)
		}
	}), nil
}

// startCPUProfile starts a CPU profile into path (none when empty) and
// returns what stops it.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("heap profile %s: %w", path, err)
	}
	return f.Close()
}

// medianRun is the run whose rate is the median of runs (the lower of the
// middle two for an even count); nil for none.
func medianRun(runs []ManyResult) *ManyResult {
	if len(runs) == 0 {
		return nil
	}
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b ManyResult) int { return cmp.Compare(a.IntentsPerS, b.IntentsPerS) })
	m := sorted[(len(sorted)-1)/2]
	return &m
}

// spread is the least, median and greatest of f over runs.
func spread(runs []ManyResult, f func(ManyResult) float64) (lo, med, hi float64) {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = f(r)
	}
	slices.Sort(vs)
	return vs[0], vs[(len(vs)-1)/2], vs[len(vs)-1]
}
