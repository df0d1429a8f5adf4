package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// settleTimeout bounds the wait for the last verdicts. A delivery that was
// in flight when its daemon died comes back only after the intake
// consumer's ack wait (testAckWait), and the follow-up backs off on
// unreadable history; this is far above both.
const settleTimeout = 60 * time.Second

// testAckWait shortens the redelivery of intents a killed daemon held, so
// a test does not wait the default 30 s for each.
const testAckWait = 2 * time.Second

// The daemon is killed with SIGKILL at random points (seeded) while a
// stream of intents of every kind arrives, and restarted each time on the
// same data dir. After a last run to completion, every intent has exactly
// one final verdict and it is the truth, seqs run 1..n without gaps or
// repeats, and the SQLite store and the verdict stream agree.
func TestCrashLoopLosesNothing(t *testing.T) {
	kills, perKill := 10, 4
	if *longRuns {
		kills = 50
	}
	started := time.Now()
	rng := rand.New(rand.NewPCG(*seedFlag, 0xc7a5))
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(kills)*3*time.Second+3*time.Minute)
	defer cancel()

	env := newLedgerEnv(t, int64(*seedFlag), 5)
	nn := startNATSNode(t, natsNodeConfig{Name: "crash-nats", StoreDir: t.TempDir()})
	tool := connectTool(t, ctx, nn.URL(), 1)
	feed := followVerdicts(t, ctx, tool.JetStream())

	plan := env.planMix("crash", kills*perKill, rng.Shuffle)
	// A late intent is executed at a random later iteration, or in the
	// last run when that iteration does not exist.
	lateAt := map[int][]*plannedIntent{}
	dir := daemonDataDir(t, "daemon")
	logPath := daemonLogPath(t, "daemon")
	args := daemonArgs{NATSURL: nn.URL(), ICURL: env.srv.URL(), DataDir: dir, Instance: "crash", AckWait: testAckWait}

	var early, byTime, byCount int
	for i := range kills {
		batch := plan[i*perKill : (i+1)*perKill]
		for _, p := range batch {
			switch p.Class {
			case classFound:
				env.execute(t, p)
			case classLate:
				at := i + rng.IntN(3)
				lateAt[at] = append(lateAt[at], p)
			}
		}
		publishAll(t, ctx, tool, batch)
		for _, p := range lateAt[i] {
			env.execute(t, p)
		}
		delete(lateAt, i)

		// Half the runs are killed after a random time up to 1 s (during
		// start, a decision or a follow-up round), the other half right
		// after a random number (1..4) of new verdicts appeared, when the
		// next store-then-publish is likely under way.
		before := feed.count()
		d := startDaemonProc(t, args, logPath)
		timer := time.NewTimer(time.Duration(rng.Int64N(int64(time.Second))))
		var enough <-chan struct{}
		if rng.IntN(2) == 0 {
			enough = feed.atLeast(before + 1 + rng.IntN(4))
		}
		select {
		case <-timer.C:
			byTime++
		case <-enough:
			byCount++
		case <-d.exited():
			t.Fatalf("iteration %d: daemon exited by itself: %v\n%s", i, d.waitErr, logTail(logPath, 40))
		}
		timer.Stop()
		if feed.count() == before {
			early++
		}
		d.kill()
	}

	loopDone := time.Since(started)
	d := startDaemonProc(t, args, logPath)
	for _, at := range slices.Sorted(maps.Keys(lateAt)) {
		for _, p := range lateAt[at] {
			env.execute(t, p)
		}
	}
	// When an executed intent is not found, the windows are closed anyway:
	// whether it then turns absent (a person would pay twice) is the
	// question that matters most.
	closeWait := settleTimeout
	if !feed.settledWithin(t, plan, func(p *plannedIntent) bool { return p.Class != classAbsent }, settleTimeout,
		func() string { return logTail(logPath, 30) }) {
		t.Errorf("closing the windows anyway")
		closeWait = 15 * time.Second // the store comparison below says more than a longer wait
	}
	settled := time.Since(started)
	env.closeWindows()
	// Whatever is still open, the store and the stream are compared below:
	// an intent the stream leaves open may be final in the store.
	feed.settledWithin(t, plan, func(*plannedIntent) bool { return true }, closeWait, func() string { return logTail(logPath, 30) })
	waitQueueDrained(t, ctx, tool.JetStream(), 10*testAckWait)
	d.terminate(15 * time.Second)
	t.Logf("kill loop %s, non-absent settled at %s, all at %s", loopDone.Round(time.Millisecond), settled.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))

	checkAllPlaces(t, ctx, tool.JetStream(), feed, plan, dir)
	// --ack-wait reached the shared intake consumer: it is what bounds how
	// long a killed daemon's intents wait.
	if cons, err := tool.JetStream().Consumer(ctx, queue.IntentsStream, "reconciled"); err != nil {
		t.Error(err)
	} else if got := cons.CachedInfo().Config.AckWait; got != testAckWait {
		t.Errorf("intake consumer ack wait %s, want %s", got, testAckWait)
	}
	t.Logf("crash loop: seed %d, %d SIGKILLs (%d by timer, %d after new verdicts, %d before any new verdict), %d intents (%s), %d verdicts, %d re-published after a crash, %s",
		*seedFlag, kills, byTime, byCount, early, len(plan), classCounts(plan), feed.count(),
		logLines(logPath, "stored verdict re-published"), time.Since(started).Round(time.Millisecond))
	if t.Failed() {
		t.Log(logTail(logPath, 60))
	}
}

// checkAllPlaces checks the verdict stream (read afresh), the feed the test
// followed, and the stopped daemon's store against the plan and each other.
func checkAllPlaces(t *testing.T, ctx context.Context, js jetstream.JetStream, feed *verdictFeed, plan []*plannedIntent, dataDirs ...string) {
	t.Helper()
	if bad := feed.problems(); len(bad) > 0 {
		t.Errorf("verdict stream messages: %v", bad)
	}
	stream, n, err := readVerdictStream(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	checkHistories(t, "stream", stream, plan)
	for _, dir := range dataDirs {
		where := "store " + filepath.Base(dir)
		stored, watched, report := storeSnapshot(t, ctx, dir, plan)
		if report != "ok" {
			t.Errorf("%s: integrity_check: %s", where, report)
		}
		if watched != 0 {
			t.Errorf("%s: %d intents still watched after every final verdict", where, watched)
		}
		checkHistories(t, where, stored, plan)
		sameHistories(t, "stream", stream, where, stored)
		total, err := storeVerdictCount(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if total != n {
			t.Errorf("%s holds %d verdicts, the stream %d", where, total, n)
		}
	}
}

// A NATS server restart while intents are in flight loses nothing: the
// server is shut down and started again on the same port and store, the
// daemon reconnects, and every intent still settles exactly once.
func TestNATSRestartMidRun(t *testing.T) {
	started := time.Now()
	rng := rand.New(rand.NewPCG(*seedFlag, 0x7e57a7))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	env := newLedgerEnv(t, int64(*seedFlag)+1, 4)
	// Every reply takes a while, so several intents are mid-decision when
	// the server goes away: a cold decision is only a few round trips
	// (detection side by side, then pages), so each must be long enough
	// to outlast the invalid intents' verdicts and the shutdown.
	env.srv.SetFaults(env.ledger.ID(), ledgertest.Faults{Latency: 60 * time.Millisecond})
	nn := startNATSNode(t, natsNodeConfig{Name: "restart-nats", StoreDir: t.TempDir()})
	tool := connectTool(t, ctx, nn.URL(), 1)
	feed := followVerdicts(t, ctx, tool.JetStream())

	plan := env.planMix("restart", 32, rng.Shuffle)
	first, second := plan[:24], plan[24:]
	for _, p := range plan {
		if p.Class == classFound {
			env.execute(t, p)
		}
	}
	dir := daemonDataDir(t, "daemon")
	logPath := daemonLogPath(t, "daemon")
	d := startDaemonProc(t, daemonArgs{NATSURL: nn.URL(), ICURL: env.srv.URL(), DataDir: dir, Instance: "restart", AckWait: testAckWait}, logPath)
	publishAll(t, ctx, tool, first)

	select {
	case <-feed.atLeast(4):
	case <-d.exited():
		t.Fatalf("daemon exited: %v\n%s", d.waitErr, logTail(logPath, 40))
	case <-ctx.Done():
		t.Fatal("no verdicts before the restart")
	}
	nn.shutdown()
	atShutdown := feed.count()
	nn.start()

	publishAll(t, ctx, tool, second)
	for _, p := range plan {
		if p.Class == classLate {
			env.execute(t, p)
		}
	}
	diag := func() string { return logTail(logPath, 30) }
	feed.waitSettled(t, plan, func(p *plannedIntent) bool { return p.Class != classAbsent }, settleTimeout, diag)
	env.closeWindows()
	feed.waitSettled(t, plan, func(*plannedIntent) bool { return true }, settleTimeout, diag)
	select {
	case <-d.exited():
		t.Fatalf("daemon exited during the restart: %v\n%s", d.waitErr, logTail(logPath, 40))
	default:
	}
	waitQueueDrained(t, ctx, tool.JetStream(), 10*testAckWait)
	d.terminate(15 * time.Second)

	checkAllPlaces(t, ctx, tool.JetStream(), feed, plan, dir)
	if atShutdown >= len(first) {
		t.Errorf("every first-batch intent was decided before the restart (%d verdicts): nothing was in flight", atShutdown)
	}
	t.Logf("nats restart: %d intents (%s), %d verdicts before the shutdown, %d in all, %d reconnects and %d failed settles logged, %s",
		len(plan), classCounts(plan), atShutdown, feed.count(), logLines(logPath, "nats reconnected"),
		logLines(logPath, "settle intent delivery"), time.Since(started).Round(time.Millisecond))
	if t.Failed() {
		t.Log(logTail(logPath, 60))
	}
}

// A daemon that dies after storing a follow-up's final verdict and before
// publishing it must publish it after its restart: a tool layer that saw
// not_yet waits on the stream for the final verdict, and the intent has
// already been acknowledged, so no redelivery brings it back. The crash
// point is too narrow to hit reliably with SIGKILL, so the follow-up round
// that dies there runs in-process, on the daemon's own store, with a sink
// that stops at that point.
func TestFinalFollowUpVerdictSurvivesCrashBeforePublish(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newLedgerEnv(t, int64(*seedFlag)+3, 1)
	nn := startNATSNode(t, natsNodeConfig{Name: "gap-nats", StoreDir: t.TempDir()})
	tool := connectTool(t, ctx, nn.URL(), 1)
	feed := followVerdicts(t, ctx, tool.JetStream())
	dir := daemonDataDir(t, "daemon")
	logPath := daemonLogPath(t, "daemon")
	args := daemonArgs{NATSURL: nn.URL(), ICURL: env.srv.URL(), DataDir: dir, Instance: "gap", AckWait: testAckWait}
	diag := func() string { return logTail(logPath, 30) }

	p := env.plan("gap-0", classAbsent, 0)
	d := startDaemonProc(t, args, logPath)
	publishAll(t, ctx, tool, []*plannedIntent{p})
	select {
	case <-feed.atLeast(1):
	case <-ctx.Done():
		t.Fatalf("no first verdict\n%s", diag())
	}
	d.terminate(15 * time.Second)

	env.closeWindows()
	died := followUpThatDiesBeforePublishing(t, ctx, env, nn.URL(), dir)
	if !died.Final || died.Status != reconciled.StatusAbsent || died.Seq != 2 {
		t.Fatalf("the follow-up decided %s, want a final absent with seq 2", describeOne(died))
	}

	d = startDaemonProc(t, args, logPath)
	feed.waitSettled(t, []*plannedIntent{p}, func(*plannedIntent) bool { return true }, 15*time.Second, func() string {
		return "the final verdict is stored but was never published after the restart\n" + diag()
	})
	d.terminate(15 * time.Second)
	checkAllPlaces(t, ctx, tool.JetStream(), feed, []*plannedIntent{p}, dir)
}

// followUpThatDiesBeforePublishing runs a daemon wired as serve wires it,
// on the stopped daemon's data dir, whose process "dies" when it is about
// to publish a final verdict: it returns that verdict, already committed
// to the store.
func followUpThatDiesBeforePublishing(t *testing.T, ctx context.Context, env *ledgerEnv, natsURL, dir string) reconciled.Verdict {
	t.Helper()
	ag, err := env.srv.NewAgent(nil)
	if err != nil {
		t.Fatal(err)
	}
	died := make(chan reconciled.Verdict, 1)
	d, err := daemon.New(ctx, daemon.Config{NATSURL: natsURL, DataDir: dir, Instance: "gap", PollInterval: time.Hour,
		MaxInflight: 1, MaxMessageBytes: 32 << 10, Grace: time.Second},
		daemon.Options{Agent: ag, Sink: func(s reconcile.Sink) reconcile.Sink { return dyingSink{Sink: s, died: died} }})
	if err != nil {
		t.Fatal(err)
	}
	// Dead means no clean stop either: the process is gone before its
	// outbox is published. Shutdown below only closes the files.
	defer daemontest.Stop(d, time.Second)
	d.FollowUpNow()
	select {
	case v := <-died:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("the follow-up round published no final verdict")
		return reconciled.Verdict{}
	}
}

// dyingSink is a verdict sink whose process is killed the moment it is
// about to publish a final verdict.
type dyingSink struct {
	reconcile.Sink
	died chan<- reconciled.Verdict
}

func (s dyingSink) PublishVerdict(ctx context.Context, v reconciled.Verdict, in reconciled.IntentHeader) error {
	if !v.Final {
		return s.Sink.PublishVerdict(ctx, v, in)
	}
	select {
	case s.died <- v:
	default:
	}
	return errors.New("process killed before publishing")
}

// After a NATS server crash a consumer's ack state may be older than its
// acks, so an intent already acknowledged comes again, the very same
// stream message. The daemon answers it from its store: the same verdict,
// no second decision, no new verdict in the stream. The lost ack state is
// made here by deleting the intake consumer while the daemon is stopped;
// an operator's consumer that has read nothing keeps the intent from the
// purge.
func TestCrashAcknowledgedIntentDeliveredAgainKeepsItsVerdict(t *testing.T) {
	r := newRig(t, rigOpts{NoDaemon: true})
	l := r.ledger(ledgertest.LedgerConfig{InitialBalances: payerFunds()})
	js := r.tool.JetStream()
	if _, err := js.CreateOrUpdateConsumer(r.ctx, queue.IntentsStream, jetstream.ConsumerConfig{
		Durable: "audit", AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	pay := payment{stamp: r.srv.Now(), amount: 77, memo: "again"}
	if _, err := l.Transfer(payer, pay.arg()); err != nil {
		t.Fatal(err)
	}
	doc := transferIntent("again-1", l, pay)
	dir := t.TempDir()
	d1 := r.instance("again", dir, time.Hour, nil)
	first := r.ask(doc, toollayer.FinalVerdict)
	if first.Status != reconciled.StatusFound || first.Seq != 1 {
		t.Fatalf("first verdict %+v", first)
	}
	testutil.Eventually(t, 30*time.Second, "the intent acknowledged", func() (bool, string) {
		n := d1.Metrics().Get(reconcile.MetricIntentOutcomes, "ack")
		return n >= 1, fmt.Sprint(n, " acks")
	})
	daemontest.Stop(d1, time.Second)
	served := l.Counters().BlocksServed
	if err := js.DeleteConsumer(r.ctx, queue.IntentsStream, "reconciled"); err != nil {
		t.Fatal(err)
	}

	d2 := r.instance("again", dir, time.Hour, nil)
	defer daemontest.Stop(d2, time.Second)
	testutil.Eventually(t, 30*time.Second, "the intent delivered again and acknowledged", func() (bool, string) {
		n := d2.Metrics().Get(reconcile.MetricIntentOutcomes, "ack")
		return n >= 1, fmt.Sprint(n, " acks")
	})
	if vs := storedHistory(t, d2.Store(), doc.ID); len(vs) != 1 || vs[0].Status != reconciled.StatusFound || vs[0].Block == nil || first.Block == nil || vs[0].Block.Index != first.Block.Index {
		t.Fatalf("history after the second delivery: %s", describe(vs))
	}
	if n := r.streamCount(doc.ID); n != 1 {
		t.Fatalf("verdict stream holds %d verdicts of %s, want 1", n, doc.ID)
	}
	if got := l.Counters().BlocksServed; got != served {
		t.Fatalf("the acknowledged intent was decided again: %d blocks served, was %d", got, served)
	}
	ci, err := js.Consumer(r.ctx, queue.IntentsStream, "reconciled")
	if err != nil {
		t.Fatal(err)
	}
	if info := ci.CachedInfo(); info.Delivered.Stream != 1 || info.AckFloor.Stream != 1 {
		t.Fatalf("recreated intake consumer: delivered %d, ack floor %d", info.Delivered.Stream, info.AckFloor.Stream)
	}
}
