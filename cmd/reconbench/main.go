// Command reconbench measures reconciled's verdicts side by side with a
// full-sync baseline, all over loopback against the test replica of
// ledgertest with signed-query verification as in production.
//
//	go run ./cmd/reconbench [-blocks 1000000] [-span 240h] [-runs 5] [-intents 1000] [-rtt 0] [-endpoint legacy2000] [-json FILE]
//
// It builds one archived ledger whose 24 h intent window holds
// blocks·24h/span blocks, then reports: cold verdict latency and reads for
// matches at the window's start, middle and end and for an absent intent,
// on both endpoint families; the baselines' full syncs into SQLite (pages
// fetched concurrently, and one page at a time from the tip down as ICRC
// Rosetta fetches; for the ICP-style ledger one 2000-block window at a time,
// as ICP Rosetta does) and their time to first answer; many intents through
// NATS, the service and the store; peak RSS and CPU; and
// decode+hash+match throughput per core. With -rtt every request to the
// ledger and its archives waits that long at the replica, as a mainnet
// round trip does, and each case is set against its round-trip floor. One
// table on stdout, the same figures as JSON with -json.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/reconciled/reconciled/icrc3"
)

type config struct {
	Blocks   int           `json:"blocks"`
	Span     time.Duration `json:"span_ns"`
	Runs     int           `json:"runs"`
	Intents  int           `json:"intents"`
	Inflight int           `json:"inflight"`
	// Bursts is how many times the burst of Intents (and its queued
	// twin) runs, each with a new daemon and store: on a shared machine
	// one burst's rate moves by a fifth from run to run, so the figures
	// reported are the median run's.
	Bursts int `json:"bursts"`
	// RTT is injected at the test replica into every request concerning
	// the ledger or an archive, for reconciled and the baselines alike.
	RTT time.Duration `json:"rtt_ns"`
	// Concurrency bounds the page requests in flight of every client but
	// the sequential baseline's (icrc3history.ClientConfig.Concurrency); 0 takes
	// the client's default of each endpoint family.
	Concurrency int           `json:"concurrency"`
	Seed        int64         `json:"seed"`
	DecodeTime  time.Duration `json:"decode_time_ns"`
	Timeout     time.Duration `json:"-"`
	// SkipBaseline leaves the full sync out (for quick runs of our side).
	SkipBaseline bool `json:"skip_baseline"`
	// Ledger is where the test ledger runs: "child" (a child process, so
	// RSS and CPU figures are ours alone) or "inproc".
	Ledger string `json:"ledger_host"`
	// ICP adds the single-intent cases on an ICP-style ledger of the same
	// shape (built in this process), read as the ICP ledger's family.
	ICP bool `json:"icp"`
	// Endpoint names the one endpoint family measured (legacy2000 or
	// icrc3_100); empty measures both.
	Endpoint string `json:"endpoint,omitempty"`
	// BurstProfile, when set, receives a CPU profile of the live burst
	// alone (its first publish to its last verdict), and
	// BurstProfile+".queued" one of the backlog's: every sample in them,
	// the runtime's unlabelled GC workers' too, falls within a burst.
	BurstProfile string `json:"-"`
}

func defaultConfig() config {
	return config{Blocks: 1_000_000, Span: 240 * time.Hour, Runs: 5, Intents: 1000, Inflight: 256, Bursts: 1, Seed: 1,
		DecodeTime: 2 * time.Second, Timeout: 60 * time.Minute, Ledger: "child", ICP: true}
}

// options are the flags besides the measured configuration.
type options struct {
	serve                bool
	jsonPath, cpuProfile string
}

func parseFlags(args []string) (config, options, error) {
	cfg := defaultConfig()
	var o options
	fs := flag.NewFlagSet("reconbench", flag.ContinueOnError)
	fs.IntVar(&cfg.Blocks, "blocks", cfg.Blocks, "blocks on the ledger")
	fs.DurationVar(&cfg.Span, "span", cfg.Span, "time span of the history; the 24 h window holds blocks·24h/span blocks")
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "cold repetitions of each single-intent case")
	fs.IntVar(&cfg.Intents, "intents", cfg.Intents, "intents published through NATS (0: skip)")
	fs.IntVar(&cfg.Inflight, "inflight", cfg.Inflight, "intents the service handles at once")
	fs.IntVar(&cfg.Bursts, "bursts", cfg.Bursts, "times the burst of -intents runs, live and queued in turn, each with a new daemon; the median run is reported")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the generated history")
	fs.DurationVar(&cfg.RTT, "rtt", cfg.RTT, "round trip injected at the replica into every ledger and archive request")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "page requests in flight per client (the RTT floor's C); 0: the client's default per endpoint family")
	fs.DurationVar(&cfg.DecodeTime, "decode-time", cfg.DecodeTime, "wall time of each decode+hash+match measurement")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "give up after this long")
	fs.BoolVar(&cfg.SkipBaseline, "skip-baseline", false, "leave out the full-sync baseline")
	fs.StringVar(&cfg.Ledger, "ledger", cfg.Ledger, "where the test ledger runs: child (a child process) or inproc")
	fs.BoolVar(&cfg.ICP, "icp", cfg.ICP, "also measure the cases on an ICP-style ledger (in process)")
	fs.StringVar(&cfg.Endpoint, "endpoint", "", "measure only this endpoint family (legacy2000 or icrc3_100); empty: both")
	fs.BoolVar(&o.serve, "serve-ledger", false, "internal: build the ledger, print its facts, serve until stdin closes")
	fs.StringVar(&o.jsonPath, "json", "", "also write the figures as JSON to this file")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&cfg.BurstProfile, "burst-cpuprofile", "", "write a CPU profile of the live burst alone to this file, and of the queued one to this file + .queued")
	if err := fs.Parse(args); err != nil {
		return cfg, o, err
	}
	if cfg.Bursts < 1 {
		return cfg, o, fmt.Errorf("-bursts %d: want at least 1", cfg.Bursts)
	}
	if o.cpuProfile != "" && cfg.BurstProfile != "" {
		// The runtime holds one CPU profile at a time.
		return cfg, o, fmt.Errorf("-cpuprofile and -burst-cpuprofile: want at most one")
	}
	return cfg, o, nil
}

func main() {
	cfg, o, err := parseFlags(os.Args[1:])
	if err != nil {
		if err != flag.ErrHelp {
			fmt.Fprintln(os.Stderr, "reconbench:", err)
		}
		os.Exit(2)
	}
	if o.serve {
		if err := serveLedger(cfg, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "reconbench ledger:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := mainErr(ctx, cfg, o.jsonPath, o.cpuProfile); err != nil {
		fmt.Fprintln(os.Stderr, "reconbench:", err)
		stop()
		os.Exit(1)
	}
}

func mainErr(ctx context.Context, cfg config, jsonPath, cpuProfile string) error {
	stop, err := startCPUProfile(cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	rep, err := run(ctx, cfg, os.Stderr)
	if err != nil {
		return err
	}
	if err := rep.writeTable(os.Stdout); err != nil {
		return err
	}
	if jsonPath != "" {
		return rep.writeJSON(jsonPath)
	}
	return nil
}

// run builds the scenario and runs every measurement; progress goes to
// logw.
func run(ctx context.Context, cfg config, logw io.Writer) (*Report, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if cfg.Runs < 1 {
		return nil, fmt.Errorf("-runs %d: want at least 1", cfg.Runs)
	}
	if cfg.Concurrency < 0 || cfg.RTT < 0 {
		return nil, fmt.Errorf("-concurrency %d, -rtt %s: want neither negative", cfg.Concurrency, cfg.RTT)
	}
	eps, err := selectEndpoints(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	// The ledger child's stderr is copied into logw from another goroutine.
	logw = &lockedWriter{w: logw}
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	dir, err := os.MkdirTemp("", "reconbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	rep := &Report{Config: cfg, GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		LoadStart: loadAvg()}
	rss0, _, _ := memStatus()
	logf("building a ledger of %d blocks over %s (%s)", cfg.Blocks, cfg.Span, cfg.Ledger)
	var sc *scenario
	switch cfg.Ledger {
	case "child":
		sc, err = startLedgerChild(cfg, logw)
	case "inproc":
		if sc, err = buildScenario(cfg.Blocks, cfg.Span, cfg.Seed); err == nil {
			sc.injectRTT(cfg.RTT)
		}
	default:
		err = fmt.Errorf("-ledger %q: want child or inproc", cfg.Ledger)
	}
	if err != nil {
		return nil, fmt.Errorf("build ledger: %w", err)
	}
	defer sc.close()
	sc.conc, sc.rtt = cfg.Concurrency, cfg.RTT
	ledgerPhase := startMemPhase()
	rep.Ledger = LedgerInfo{
		Host: cfg.Ledger, Blocks: sc.Blocks, Archives: sc.Archives,
		WindowFirst: sc.Window[0], WindowLast: sc.Window[1], WindowBlocks: sc.Window[1] - sc.Window[0] + 1,
		Found: sc.Found, BuildSeconds: sc.BuildSeconds,
	}
	if sc.child != nil {
		rep.Ledger.RSSBytes = sc.child.rss()
	} else {
		rep.Ledger.RSSBytes = ledgerPhase.start - min(ledgerPhase.start, rss0)
	}
	logf("ledger built in %.1f s: %d blocks, %d archives, window [%d, %d]; ledger resident %d MiB; rtt %s",
		sc.BuildSeconds, sc.Blocks, sc.Archives, sc.Window[0], sc.Window[1], rep.Ledger.RSSBytes>>20, cfg.RTT)

	ag, err := sc.newAgent()
	if err != nil {
		return nil, err
	}

	for _, ep := range eps {
		raw, err := sc.capturePage(ctx, ag, ep.ep, ep.page)
		if err != nil {
			return nil, err
		}
		d, err := measureDecode(ep.ep, ep.name, raw, sc.cases["absent"], cfg.DecodeTime)
		if err != nil {
			return nil, err
		}
		rep.Decode = append(rep.Decode, d)
		logf("decode+hash+match %s: %.0f blocks/s per core", ep.name, d.BlocksPerSec)
	}

	ours := startMemPhase()
	for _, ep := range eps {
		for _, name := range caseNames {
			r, err := sc.runCase(ctx, ag, ep.ep, ep.name, ep.page, name, cfg.Runs)
			if err != nil {
				return nil, err
			}
			rep.Cases = append(rep.Cases, r)
			logf("reconciled %s %s: p50 %.1f ms, %.0f queries, %.0f blocks", ep.name, name, r.LatencyMS.P50, r.Queries, r.BlocksClient)
		}
	}
	rep.OursPeakRSS, rep.OursPeakRSSRise = ours.peak()

	var icpBase *BaselineResult
	if cfg.ICP {
		logf("building an ICP-style ledger of %d blocks over %s (in process)", cfg.Blocks, cfg.Span)
		cases, base, err := runICPCases(ctx, cfg, dir)
		if err != nil {
			return nil, fmt.Errorf("icp ledger: %w", err)
		}
		for _, r := range cases {
			logf("reconciled icp %s: p50 %.1f ms, %.0f queries, %.0f blocks", r.Case, r.LatencyMS.P50, r.Queries, r.BlocksClient)
		}
		rep.Cases = append(rep.Cases, cases...)
		if base != nil {
			logf("baseline icp sequential: first answer after %.1f s", base.FirstAnswerS)
			icpBase = base
		}
	}

	if cfg.Intents > 0 {
		// Live and queued bursts alternate, so a slow spell of the
		// machine weighs on both alike. Only the first of each is profiled.
		for k := range cfg.Bursts {
			profile := ""
			if k == 0 {
				profile = cfg.BurstProfile
			}
			burstDir := filepath.Join(dir, fmt.Sprintf("burst-%d", k))
			logf("burst %d of %d: publishing %d intents through NATS", k+1, cfg.Bursts, cfg.Intents)
			m, err := sc.runMany(ctx, ag, burstDir, cfg.Intents, cfg.Inflight, false, profile)
			if err != nil {
				return nil, err
			}
			rep.ManyRuns = append(rep.ManyRuns, m)
			logf("many intents: %.0f intents/s, p99 %.1f ms, %d blocks fetched, one scan %d; all published at %.0f ms, first verdict at %.0f ms, last at %.0f ms; cores %.0f%% busy",
				m.IntentsPerS, m.LatencyMS.P99, m.BlocksClient, m.OneScan, m.PublishedMS, m.FirstVerdictMS, m.Seconds*1000, 100*m.CoresBusy)
			logf("the same %d intents queued before a new daemon starts", cfg.Intents)
			q, err := sc.runMany(ctx, ag, filepath.Join(burstDir, "queued"), cfg.Intents, cfg.Inflight, true, queuedProfile(profile))
			if err != nil {
				return nil, err
			}
			rep.QueuedRuns = append(rep.QueuedRuns, q)
			// The backlog's publishes go to the same embedded server (every
			// write fsynced) with no daemon at work: beside the live
			// burst's, they tell the stream's fsyncs from the CPU's share.
			logf("queued intents: %.0f intents/s from the daemon's start, first verdict at %.0f ms, last at %.0f ms; cores %.0f%% busy; the backlog's publishes took %.0f ms",
				q.IntentsPerS, q.FirstVerdictMS, q.Seconds*1000, 100*q.CoresBusy, q.PublishedMS)
		}
		rep.Many, rep.Queued = medianRun(rep.ManyRuns), medianRun(rep.QueuedRuns)
	}

	if !cfg.SkipBaseline {
		for _, ep := range eps {
			styles := []string{styleConcurrent}
			if ep.ep == icrc3.EndpointLegacy {
				// One page at a time, the ICRC-3 family would take twenty
				// times as many serial round trips (100-block replies) as
				// its legacy comparison needs.
				styles = append(styles, styleSequential)
			}
			for _, style := range styles {
				c, err := sc.newBaselineClient(ag, ep.ep, style)
				if err != nil {
					return nil, err
				}
				logf("baseline %s %s: full sync of %d blocks", ep.name, style, sc.Blocks)
				phase := startMemPhase()
				b, err := sc.runBaseline(ctx, c, dir, ep.name, style)
				if err != nil {
					return nil, err
				}
				b.PeakRSS, b.PeakRSSRise = phase.peak()
				rep.Baseline = append(rep.Baseline, b)
				logf("baseline %s %s: first answer after %.1f s", ep.name, style, b.FirstAnswerS)
				removeBaselineFile(dir, ep.name, style)
			}
		}
	}
	if icpBase != nil {
		// Listed after the ICRC families' so that theirs stays first.
		rep.Baseline = append(rep.Baseline, *icpBase)
	}
	rep.LoadEnd = loadAvg()
	rep.evaluate()
	return rep, nil
}

func (r *Report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// queuedProfile is where the backlog's CPU profile goes.
func queuedProfile(live string) string {
	if live == "" {
		return ""
	}
	return live + ".queued"
}

// removeBaselineFile frees a baseline's mirror: at a million blocks it is
// hundreds of MiB.
func removeBaselineFile(dir, epName, style string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(filepath.Join(dir, baselineFile(epName, style)+suffix))
	}
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
