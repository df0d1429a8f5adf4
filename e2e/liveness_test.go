package e2e_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// The liveness harness: generated fleets (1–3 instances over one
// JetStream, each with its SQLite store) driven through transient faults.
// For every intent it asserts exactly one final verdict, the truth, no
// later than livenessBound after the intent was ready and the fault
// lifted; seqs 1..n without a gap on the stream; and every store's rows
// equal to the stream's. The tool layer publishes each intent once and
// never again: whatever the daemon fails at must not need its help.

var livenessLong = flag.Bool("liveness.long", false,
	"run the liveness harness at scale (more than 10,000 intents over every fault kind)")

// livenessBound is how long after an intent became ready (published,
// executed, or its window closed) and its fault lifted its final verdict
// may take. It is the sum of what a sound daemon may still have to wait
// out: one capped redelivery backoff of the intake (10–15 s once
// redelivery is unbounded), a lease TTL for a follow-up hand-off (2 s
// here), a couple of follow-up periods (250 ms here) and the decision
// itself on two busy cores under the race detector (a few seconds).
const livenessBound = 25 * time.Second

// livenessGrace is how much longer than allowed a world waits before it
// calls an intent without a final verdict stuck (or lost) rather than late.
const livenessGrace = 10 * time.Second

// storeBound is how long after the finals a store may take to hold the
// stream's verdicts: livenessBound, plus the verdict follower's ack wait
// (30 s), after which a delivery whose ack was lost with its connection (a
// server or the instance killed) comes again; the follower takes one
// verdict at a time, so nothing passes it meanwhile.
const storeBound = livenessBound + 30*time.Second

// droppedCallWait is what a call answered 202 and then dropped may cost on
// top: it can run until its envelope's ingress expiry (the daemon signs
// envelopes for 4 minutes), and only then is it known never to execute.
const droppedCallWait = 4 * time.Minute

const (
	lvPoll     = 250 * time.Millisecond
	lvLeaseTTL = 2 * time.Second
)

// lvKind is one kind of fault the harness drives fleets through.
type lvKind struct {
	name string
	// dur is the fault's length in the CI-sized run.
	dur time.Duration
	// minInst is the smallest fleet the fault needs.
	minInst int
	// maxInst, when set, caps the fleet.
	maxInst int
	// longOnly kinds run with -liveness.long only (another test covers
	// them in the CI-sized run).
	longOnly bool
	// drive runs the world through the fault and returns when every
	// intent should have its final verdict.
	drive func(w *lvWorld)
	// proc, instead of drive, runs a world of processes (daemon binaries,
	// an external nats-server) and returns its judged result.
	proc func(t *testing.T, k *lvKind, seed int64, perLedger int) *lvResult
}

func livenessKinds() []*lvKind {
	// 22 s outlasts ten deliveries of an intent two seconds apart (the
	// intake's MaxDeliver and the service's retry delay by default).
	return []*lvKind{
		{name: "verdict_outage", dur: 22 * time.Second, minInst: 1, drive: func(w *lvWorld) {
			w.burst(func() { w.stream.set(true) }, func() { w.stream.set(false) })
		}},
		{name: "store_outage", dur: 22 * time.Second, minInst: 1, drive: func(w *lvWorld) {
			w.burst(func() { w.store.set(true) }, func() { w.store.set(false) })
		}},
		{name: "outbox_two_rounds", dur: 0, minInst: 2, drive: (*lvWorld).outboxRounds},
		{name: "full_disk", dur: 22 * time.Second, minInst: 1, drive: (*lvWorld).fullDisk},
		{name: "conflict_race", dur: 0, minInst: 2, drive: (*lvWorld).conflictRace},
		{name: "call_dropped", dur: 10 * time.Second, minInst: 1, maxInst: 1, drive: (*lvWorld).callDropped},
		{name: "slow_replies", dur: 8 * time.Second, minInst: 1, drive: func(w *lvWorld) {
			w.burst(func() { w.ledgerFaults(0, ledgertest.Faults{Latency: 1500 * time.Millisecond}) }, func() { w.ledgerFaults(0, ledgertest.Faults{}) })
		}},
		{name: "transient_rejects", dur: 8 * time.Second, minInst: 1, drive: func(w *lvWorld) {
			// Reject code 2 is SYS_TRANSIENT: the IC says "try again".
			w.burst(func() { w.ledgerFaults(0, ledgertest.Faults{QueryReject: 2}) }, func() { w.ledgerFaults(0, ledgertest.Faults{}) })
		}},
		{name: "lease_flap", dur: 8 * time.Second, minInst: 2, drive: (*lvWorld).leaseFlap},
		{name: "history_change", dur: 0, minInst: 1, drive: (*lvWorld).historyChange},
		{name: "sigkill", dur: 15 * time.Second, minInst: 2, proc: runSIGKILL},
		// TestLivenessNATSDownMinute is this fault for 60 s.
		{name: "verdict_server_down", dur: 15 * time.Second, minInst: 2, longOnly: true, proc: func(t *testing.T, k *lvKind, seed int64, perLedger int) *lvResult {
			return runServerDown(t, k, seed, perLedger, queue.VerdictsStream)
		}},
		{name: "intent_server_down", dur: 15 * time.Second, minInst: 2, proc: func(t *testing.T, k *lvKind, seed int64, perLedger int) *lvResult {
			return runServerDown(t, k, seed, perLedger, queue.IntentsStream)
		}},
		{name: "token_rotation", dur: 10 * time.Second, minInst: 2, proc: runTokenRotation},
	}
}

// TestLiveness drives a world per fault kind (a few per kind with
// -liveness.long) and prints a table per fault kind. Each kind is its own
// subtest, so a failure names the fault.
func TestLiveness(t *testing.T) {
	var mu sync.Mutex
	rows := map[string]*lvResult{}
	start := time.Now()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		var rs []*lvResult
		total := 0
		for _, r := range rows {
			rs = append(rs, r)
			total += r.intents
		}
		tbl := lvTable(rs)
		t.Logf("liveness: seed %d, %d intents in %s\n%s", *seedFlag, total, time.Since(start).Round(time.Second), tbl)
		fmt.Printf("liveness: seed %d, %d intents in %s\n%s", *seedFlag, total, time.Since(start).Round(time.Second), tbl)
		if *livenessLong && total < 10_000 && !t.Failed() {
			t.Errorf("the long run checked only %d intents", total)
		}
	})
	perLedger, worlds := 20, 1
	if *livenessLong {
		perLedger, worlds = 300, 2
	}
	for ki, k := range livenessKinds() {
		if k.longOnly && !*livenessLong {
			continue
		}
		t.Run("fault="+k.name, func(t *testing.T) {
			t.Parallel()
			res := &lvResult{kind: k.name}
			defer func() {
				mu.Lock()
				rows[k.name] = res
				mu.Unlock()
			}()
			for wi := range worlds {
				seed := int64(*seedFlag)*1000 + int64(ki)*10 + int64(wi)
				if k.proc != nil {
					res.add(k.proc(t, k, seed, perLedger))
					continue
				}
				w := newLvWorld(t, k, seed, perLedger)
				k.drive(w)
				w.finish()
				res.add(w.res)
			}
			report(t, k, res)
		})
	}
}

// report fails the subtest with a summary line and the first problems of
// each category.
func report(t *testing.T, k *lvKind, res *lvResult) {
	t.Helper()
	if !res.failed() {
		t.Logf("%s: %d intents, %d final, worst delay %s (allowed %s)", k.name, res.intents, res.finals,
			res.worst.Round(time.Millisecond), res.allowed)
		return
	}
	byLedger := ""
	for l := range 2 {
		if n := res.openBy[l]; n > 0 {
			byLedger += fmt.Sprintf(" ledger %d: %d lost or stuck;", l, n)
		}
	}
	t.Errorf("%s: %d intents, %d final: lost %d, stuck %d, late %d, wrong %d, gaps %d, store diffs %d, not-ready %d;%s worst delay %s (allowed %s)",
		k.name, res.intents, res.finals, res.lost, res.stuck, res.late, res.wrong, res.gaps, res.storeDiffs, res.notReady,
		byLedger, res.worst.Round(time.Millisecond), res.allowed)
	shown := map[string]int{}
	for _, p := range res.problems {
		cat, _, _ := strings.Cut(p, ":")
		if shown[cat]++; shown[cat] <= 4 {
			t.Error(p)
		}
	}
	for cat, n := range shown {
		if n > 4 {
			t.Errorf("... and %d more %s", n-4, cat)
		}
	}
}

// ---------------------------------------------------------------- world

// lvWorld is one fleet over one embedded JetStream and one test replica
// with two ledgers: ledger 0 takes the ledger faults, ledger 1 must keep
// its cadence meanwhile.
type lvWorld struct {
	t    *testing.T
	kind *lvKind
	// dur is this world's fault length: the kind's in the CI-sized run,
	// drawn from 1–90 s in the long one.
	dur     time.Duration
	rng     *rand.Rand
	rig     *daemontest.Rig
	ledgers []*ledgerEnv
	insts   []*lvInst
	feed    *lvFeed
	plan    []*lvIntent
	res     *lvResult

	stream, store outage
	// storeErr replaces errStoreOutage (an injected ENOSPC where no tmpfs
	// can be mounted).
	storeErr error

	// allowed is the delay each intent may take from readyAt to its final
	// verdict; allowedFor overrides it per intent.
	allowed    time.Duration
	allowedFor func(p *lvIntent) time.Duration

	// publishedAll: every intent has been published (once).
	publishedAll bool

	// intake, when set, sees every delivery of instance k before the
	// daemon does; it returns false when it settled the delivery itself.
	intake func(k int, dl *queue.Delivery) bool
}

type lvInst struct {
	name, dir string
	d         *daemon.Daemon
}

func newLvWorld(t *testing.T, k *lvKind, seed int64, perLedger int) *lvWorld {
	t.Helper()
	timeout := 10 * time.Minute
	if *livenessLong {
		timeout = 60 * time.Minute
	}
	w := &lvWorld{t: t, kind: k, dur: k.dur, rng: rand.New(rand.NewSource(seed)), res: &lvResult{kind: k.name, worlds: 1}}
	if *livenessLong && k.dur > 0 {
		w.dur = time.Second + time.Duration(w.rng.Int63n(int64(89*time.Second)))
	}
	w.allowed = w.dur + livenessBound
	w.rig = daemontest.New(t, daemontest.Options{Seed: seed, NoDaemon: true, Timeout: timeout})
	for i := range 2 {
		w.ledgers = append(w.ledgers, ledgerOn(t, w.rig.Replica, byte(i+1), 4))
	}
	n := max(k.minInst, 1+w.rng.Intn(3))
	if k.maxInst > 0 {
		n = min(n, k.maxInst)
	}
	w.res.instances = n
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	if k.name == "full_disk" {
		dirs = w.mountDisk(n)
	}
	for i := range n {
		w.insts = append(w.insts, w.startInst(i, dirs[i]))
	}
	w.feed = followLiveness(t, w.rig.Ctx, w.rig.Tool.JetStream())
	// Intents of both ledgers, interleaved, every class of each.
	for i := range perLedger {
		for li, e := range w.ledgers {
			id := fmt.Sprintf("%s-%d-l%d-%04d", strings.ReplaceAll(k.name, "_", ""), seed, li, i)
			w.plan = append(w.plan, &lvIntent{plannedIntent: e.plan(id, intentClass(w.rng.Intn(int(numClasses))), i), ledger: li})
		}
	}
	return w
}

func (w *lvWorld) startInst(k int, dir string) *lvInst {
	name := fmt.Sprintf("i%d", k)
	// The release's handler count: the liveness claims are the shipped
	// configuration's (see daemon.DefaultMaxInflight for what fewer cost).
	d := w.rig.Start(daemontest.Options{Instance: name, DataDir: dir, Poll: lvPoll, LeaseTTL: lvLeaseTTL, MaxInflight: daemon.DefaultMaxInflight,
		Tune: func(_ *daemon.Config, o *daemon.Options) {
			o.BackoffBase, o.BackoffMax = 100*time.Millisecond, 2*time.Second
			o.Sink = func(s reconcile.Sink) reconcile.Sink { return outageSink{Sink: s, o: &w.stream} }
			o.ServiceStore = func(s reconcile.Store) reconcile.Store { return outageStore{Store: s, o: &w.store, err: w.storeErr} }
			o.Intake = func(next queue.Handler) queue.Handler {
				return func(ctx context.Context, dl *queue.Delivery) {
					if w.intake != nil && !w.intake(k, dl) {
						return
					}
					next(ctx, dl)
				}
			}
		}})
	return &lvInst{name: name, dir: dir, d: d}
}

// publish publishes p once, as a tool layer does; a publish that gets no
// acknowledgement is sent again (that is not a re-publication: the stream
// never confirmed it).
func (w *lvWorld) publish(canister, id string, body []byte) {
	for {
		ctx, cancel := context.WithTimeout(w.rig.Ctx, 5*time.Second)
		_, err := w.rig.Tool.PublishIntent(ctx, canister, id, body, matcher.IntentHash(body))
		cancel()
		if err == nil {
			return
		}
		if w.rig.Ctx.Err() != nil {
			w.t.Fatalf("publish %s: %v", id, err)
		}
	}
}

func (w *lvWorld) ledgerFaults(li int, f ledgertest.Faults) {
	w.rig.Replica.SetFaults(w.ledgers[li].ledger.ID(), f)
}

// pause waits out a span of the fault's schedule (the fault's length is
// what is being tested; nothing is synchronised by it).
func (w *lvWorld) pause(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.rig.Ctx.Done():
	}
}

// burst is the common schedule: found intents execute first; the fault
// starts; every intent is published at once; late ones execute a quarter
// into the fault, every window closes halfway; the fault lifts after its
// length.
func (w *lvWorld) burst(arm, lift func()) {
	d := w.dur
	w.executeFound()
	arm()
	start := time.Now()
	w.publishAll()
	w.pause(time.Until(start.Add(d / 4)))
	w.executeLate()
	w.pause(time.Until(start.Add(d / 2)))
	w.closeWindows()
	w.pause(time.Until(start.Add(d)))
	lift()
}

func (w *lvWorld) executeFound() {
	for _, p := range w.plan {
		if p.Class == classFound {
			w.ledgers[p.ledger].execute(w.t, p.plannedIntent)
		}
	}
}

func (w *lvWorld) publishAll() {
	if w.publishedAll {
		return
	}
	w.publishedAll = true
	for _, p := range w.plan {
		w.publish(p.Canister, p.ID, p.Body)
		if p.Class == classFound || p.Class == classInvalid {
			p.readyAt = time.Now()
		}
		if p.other != nil {
			w.publish(p.Canister, p.ID, p.other)
		}
	}
}

func (w *lvWorld) executeLate() {
	for _, p := range w.plan {
		if p.Class == classLate {
			w.ledgers[p.ledger].execute(w.t, p.plannedIntent)
			p.readyAt = time.Now()
		}
	}
}

// closeWindows moves the ledgers' clock past every window (one replica
// clock for both ledgers).
func (w *lvWorld) closeWindows() {
	w.ledgers[0].closeWindows()
	now := time.Now()
	for _, p := range w.plan {
		if p.Class == classAbsent {
			p.readyAt = now
		}
	}
}

func (w *lvWorld) allowedOf(p *lvIntent) time.Duration {
	if w.allowedFor != nil {
		return w.allowedFor(p)
	}
	return w.allowed
}

// finish waits for every final verdict (up to each intent's allowed delay
// and livenessGrace more), then judges the stream and every store.
func (w *lvWorld) finish() {
	t := w.t
	var deadline time.Time
	for _, p := range w.plan {
		if p.readyAt.IsZero() {
			t.Fatalf("%s: intent %s was never made ready by the schedule", w.kind.name, p.ID)
		}
		deadline = maxTime(deadline, p.readyAt.Add(w.allowedOf(p)+livenessGrace))
	}
	ctx := w.rig.Ctx
	w.feed.waitFor(ctx, deadline, func(byID map[string][]reconciled.Verdict) bool {
		for _, p := range w.plan {
			vs := byID[p.ID]
			if len(vs) == 0 || !vs[len(vs)-1].Final {
				return false
			}
		}
		return true
	})
	stream, _, err := readVerdictStream(ctx, w.rig.Tool.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	w.feed.mu.Lock()
	finalAt := make(map[string]time.Time, len(w.feed.finalAt))
	for id, at := range w.feed.finalAt {
		finalAt[id] = at
	}
	for _, b := range w.feed.bad {
		w.res.problem("wrong: %s", b)
		w.res.wrong++
	}
	w.feed.mu.Unlock()
	for _, p := range w.plan {
		sub := []*lvIntent{p}
		judge(w.res, sub, stream, finalAt, w.allowedOf(p))
	}
	w.checkStores(stream)
}

// checkStores waits (up to storeBound) until every running instance's
// store holds exactly the stream's verdicts of every intent, and counts
// the intents of each store that still differ.
func (w *lvWorld) checkStores(stream map[string][]reconciled.Verdict) {
	ctx := w.rig.Ctx
	deadline := time.Now().Add(storeBound)
	for _, in := range w.insts {
		if in.d == nil {
			continue
		}
		var diff []string
		for {
			diff = diff[:0]
			for _, p := range w.plan {
				got, err := in.d.Store().Verdicts(ctx, p.ID)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					diff = append(diff, fmt.Sprintf("%s: %v", p.ID, err))
					continue
				}
				if !sameVerdicts(got, stream[p.ID]) {
					diff = append(diff, fmt.Sprintf("%s: store %s, stream %s", p.ID, describeHashed(got), describeHashed(stream[p.ID])))
				}
			}
			if len(diff) == 0 || time.Now().After(deadline) {
				break
			}
			w.pause(100 * time.Millisecond)
		}
		for _, d := range diff {
			w.res.storeDiffs++
			w.res.problem("store: instance %s: %s", in.name, d)
		}
	}
}

// describeHashed is describe with each verdict's body named by the first
// bytes of its intent_hash.
func describeHashed(vs []reconciled.Verdict) string {
	var b strings.Builder
	for _, v := range vs {
		h := v.IntentHash
		if len(h) > 6 {
			h = h[:6]
		}
		s := describeOne(v)
		b.WriteString(s[:len(s)-1] + " #" + h + "]")
	}
	if b.Len() == 0 {
		return "[]"
	}
	return b.String()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// waitStores polls the fleet's stores until cond holds for every intent
// of ps in at least one store, or within livenessBound; it reports whether
// it held.
func (w *lvWorld) waitStores(what string, ps []*lvIntent, cond func(vs []reconciled.Verdict) bool) bool {
	deadline := time.Now().Add(livenessBound)
	for {
		missing := 0
		for _, p := range ps {
			ok := false
			for _, in := range w.insts {
				vs, _ := in.d.Store().Verdicts(w.rig.Ctx, p.ID)
				if cond(vs) {
					ok = true
					break
				}
			}
			if !ok {
				missing++
			}
		}
		if missing == 0 {
			return true
		}
		if time.Now().After(deadline) {
			w.t.Logf("%s: %d intents never got there within %s", what, missing, livenessBound)
			return false
		}
		w.pause(50 * time.Millisecond)
	}
}

// ---------------------------------------------------------------- kinds

// outboxRounds: the verdict stream is out across two follow-up rounds, so
// an instance's outbox holds two verdicts of each intent (seq 2
// unreadable while the ledger fails, seq 3 final once it answers again
// and the window has closed) when the stream comes back. Both must reach
// the stream, in order, and every other store must learn them.
func (w *lvWorld) outboxRounds() {
	open := w.plan[:0:0]
	for _, p := range w.plan {
		if p.Class == classAbsent || p.Class == classLate {
			open = append(open, p)
		}
	}
	w.executeFound()
	w.publishAll()
	// Seq 1 of every open intent (not_yet) on the stream first.
	w.feed.waitFor(w.rig.Ctx, time.Now().Add(livenessBound), func(byID map[string][]reconciled.Verdict) bool {
		for _, p := range open {
			if len(byID[p.ID]) == 0 {
				return false
			}
		}
		return true
	})
	w.stream.set(true)
	start := time.Now()
	for li := range w.ledgers {
		w.ledgerFaults(li, ledgertest.Faults{HTTPStatus: 500})
	}
	w.waitStores("outbox round 1 (unreadable)", open, func(vs []reconciled.Verdict) bool {
		return len(vs) >= 2
	})
	for li := range w.ledgers {
		w.ledgerFaults(li, ledgertest.Faults{})
	}
	w.executeLate()
	w.closeWindows()
	w.waitStores("outbox round 2 (final)", open, func(vs []reconciled.Verdict) bool {
		return len(vs) >= 3 && vs[len(vs)-1].Final
	})
	w.stream.set(false)
	w.allowed = time.Since(start) + livenessBound
}

// conflictRace: two bodies under one id reach two instances at once. A
// gate in front of each instance's intake hands body 1 of an id to one
// instance and body 2 to another and lets both go only once both have
// theirs. The stream answers the body that took the id first; that body
// must reach its final verdict, and every store must hold that body's
// verdicts only.
func (w *lvWorld) conflictRace() {
	type owner struct {
		id    string
		inst  int
		ready chan struct{}
		n     *atomic.Int32
	}
	owners := map[string]owner{}
	var race []*lvIntent
	for li, e := range w.ledgers {
		for j := range 6 {
			id := fmt.Sprintf("conflict-%d-l%d-%02d", w.rng.Int63()%1_000_000, li, j)
			p := &lvIntent{plannedIntent: e.plan(id, classAbsent, 5000+j), ledger: li}
			p.other = e.plan(id, classAbsent, 6000+j).Body
			a, b := j%2, 1-j%2
			ready, n := make(chan struct{}), &atomic.Int32{}
			owners[queue.IntentMsgID(id, matcher.IntentHash(p.Body))] = owner{id, a, ready, n}
			owners[queue.IntentMsgID(id, matcher.IntentHash(p.other))] = owner{id, b, ready, n}
			race = append(race, p)
		}
	}
	w.plan = append(w.plan, race...)
	w.intake = func(k int, dl *queue.Delivery) bool {
		o, ok := owners[dl.MsgID]
		if !ok {
			return true
		}
		if o.inst != k {
			_ = dl.Nak(20 * time.Millisecond)
			return false
		}
		if o.n.Add(1) == 2 {
			close(o.ready)
		}
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select {
		case <-o.ready:
		case <-t.C:
		}
		return true
	}
	w.executeFound()
	w.publishAll()
	w.executeLate()
	w.feed.waitFor(w.rig.Ctx, time.Now().Add(livenessBound), func(byID map[string][]reconciled.Verdict) bool {
		for _, p := range race {
			if len(byID[p.ID]) == 0 {
				return false
			}
		}
		return true
	})
	w.closeWindows()
}

// fullDisk: every instance's data dir is on a small tmpfs that a filler
// file fills for the fault's length. Intents must survive it, and each
// instance must say it is not ready while its store cannot write, and
// ready again after.
func (w *lvWorld) fullDisk() {
	sawNotReady := make([]atomic.Bool, len(w.insts))
	var probes, readyAnswers atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	filler := filepath.Join(filepath.Dir(w.insts[0].dir), "filler")
	arm := func() {
		if w.storeErr != nil {
			w.store.set(true)
		} else {
			fillDisk(w.t, filler)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				for i, in := range w.insts {
					probes.Add(1)
					if ok, _ := readyz(in.d); !ok {
						sawNotReady[i].Store(true)
					} else {
						readyAnswers.Add(1)
					}
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
	}
	lift := func() {
		close(stop)
		wg.Wait()
		if w.storeErr != nil {
			w.store.set(false)
		} else if err := os.Remove(filler); err != nil {
			w.t.Fatal(err)
		}
	}
	w.burst(arm, lift)
	w.t.Logf("full disk: /readyz answered ready to %d of %d probes while the disk was full", readyAnswers.Load(), probes.Load())
	for i, in := range w.insts {
		if !sawNotReady[i].Load() {
			w.res.notReady++
			w.res.problem("zombie: instance %s answered /readyz ready throughout %s of a full disk", in.name, w.dur)
		}
		deadline := time.Now().Add(livenessBound)
		for {
			ok, body := readyz(in.d)
			if ok {
				break
			}
			if time.Now().After(deadline) {
				w.res.notReady++
				w.res.problem("zombie: instance %s not ready %s after the disk has room again: %s", in.name, livenessBound, body)
				break
			}
			w.pause(100 * time.Millisecond)
		}
	}
}

// mountDisk mounts a 16 MiB tmpfs and makes a data dir for each of n
// instances on it; without the privilege to mount, the store's writes fail
// with an injected ENOSPC instead.
func (w *lvWorld) mountDisk(n int) []string {
	t := w.t
	root := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", root).CombinedOutput()
	if err != nil {
		t.Logf("no tmpfs (%v: %s): store writes fail with an injected ENOSPC instead", err, strings.TrimSpace(string(out)))
		w.storeErr = fmt.Errorf("write reconciled.db-wal: %w", syscall.ENOSPC)
	} else {
		// Registered before the daemons start, so it runs after they stop.
		t.Cleanup(func() {
			if out, err := exec.Command("umount", root).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v: %s", root, err, out)
			}
		})
	}
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = filepath.Join(root, fmt.Sprintf("i%d", i))
	}
	return dirs
}

// fillDisk writes path until its filesystem has no room left.
func fillDisk(t *testing.T, path string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// callDropped: ledger 0's update calls are answered 202 and dropped for
// the fault's length, on a fleet of one (so one instance follows up both
// ledgers). First, while its replies to update calls are lost,
// ledger 0's intents get their first verdicts with the minting account
// only one node's word, so every later decision of ledger 0 asks the
// subnet again by an update call; then the drop starts. A follow-up round
// that waits on ledger 0 must not hold up ledger 1, whose late payments
// and closing windows need rounds meanwhile. Ledger 0's intents may also
// wait out a dropped call's envelope.
func (w *lvWorld) callDropped() {
	id := w.ledgers[0].ledger.ID()
	w.allowedFor = func(p *lvIntent) time.Duration {
		if p.ledger == 0 {
			return w.dur + droppedCallWait + livenessBound
		}
		return w.dur + livenessBound
	}
	w.ledgerFaults(0, ledgertest.Faults{LoseReplies: true})
	var first []*lvIntent
	for _, p := range w.plan {
		if p.ledger == 0 {
			first = append(first, p)
		}
	}
	arm := func() {
		w.feed.waitFor(w.rig.Ctx, time.Now().Add(livenessBound), func(byID map[string][]reconciled.Verdict) bool {
			for _, p := range first {
				if len(byID[p.ID]) == 0 {
					return false
				}
			}
			return true
		})
		w.ledgerFaults(0, ledgertest.Faults{})
		w.rig.Replica.DropAcceptedCalls(id, true)
	}
	w.executeFound()
	w.publishAll()
	w.burst(arm, func() { w.rig.Replica.DropAcceptedCalls(id, false) })
}

// leaseFlap: an intruder keeps taking the follow-up leases of both ledgers
// for the fault's length (each take is lease loss for the holder), then
// stops; the fleet must take them back and finish.
func (w *lvWorld) leaseFlap() {
	kv, err := w.rig.Tool.JetStream().KeyValue(w.rig.Ctx, queue.LeasesBucket)
	if err != nil {
		w.t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	arm := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(300 * time.Millisecond)
			defer tick.Stop()
			for {
				for _, e := range w.ledgers {
					_, _ = kv.Put(w.rig.Ctx, e.ledger.ID().Encode(), []byte("intruder"))
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
	}
	lift := func() {
		close(stop)
		wg.Wait()
	}
	w.burst(arm, lift)
}

// historyChange: once every intent has its first verdict, ledger 0 is
// reinstalled under its id twice, a second apart, while the follow-up
// rounds run every 250 ms (so a round reads a history that changes under
// it); late payments then execute on the new history. Verdicts already
// final stay; the rest must settle on the history now there.
func (w *lvWorld) historyChange() {
	w.executeFound()
	w.publishAll()
	w.feed.waitFor(w.rig.Ctx, time.Now().Add(livenessBound), func(byID map[string][]reconciled.Verdict) bool {
		for _, p := range w.plan {
			if len(byID[p.ID]) == 0 {
				return false
			}
		}
		return true
	})
	e := w.ledgers[0]
	for range 2 {
		var bal []ledgertest.Balance
		for _, c := range e.callers {
			bal = append(bal, ledgertest.Balance{Account: icrc3.Account{Owner: c}, Amount: icrc3.NatFromUint64(1_000_000_000_000)})
		}
		l, err := w.rig.Replica.NewLedger(ledgertest.LedgerConfig{ID: e.ledger.ID(), InitialBalances: bal})
		if err != nil {
			w.t.Fatal(err)
		}
		e.ledger = l
		w.pause(time.Second)
	}
	w.executeLate()
	w.closeWindows()
}
