package e2e_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// The follow-up lease and poll interval of the hand-off test: short by
// default, so a hand-off is quick; -e2e.lease-ttl 15s -e2e.poll 5s measures
// the daemon's defaults.
var (
	handOffTTL  = flag.Duration("e2e.lease-ttl", 2*time.Second, "--lease-ttl of the hand-off test's daemons")
	handOffPoll = flag.Duration("e2e.poll", 100*time.Millisecond, "--poll-interval of the hand-off test's daemons")
)

// fleetLeaseTTL is the follow-up lease of the rolling deploy.
const fleetLeaseTTL = 2 * time.Second

// leaseHolder polls the leases bucket until want holds the ledger's lease.
func leaseHolder(t *testing.T, ctx context.Context, js jetstream.JetStream, ledger, want string) {
	t.Helper()
	kv, err := js.KeyValue(ctx, queue.LeasesBucket)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "lease of "+ledger+" held by "+want, func() (bool, string) {
		e, err := kv.Get(ctx, ledger)
		if err != nil {
			return false, err.Error()
		}
		return string(e.Value()) == want, "held by " + string(e.Value())
	})
}

// Instance A decides not_yet and holds the ledger's follow-up lease; it is
// killed with SIGKILL and its data dir deleted. Once the window closes in
// certified time, instance B, which never decided the intent and is told
// nothing, publishes the final absent within the lease TTL and one poll
// interval of the kill: the fleet, not A, owned the open intent. Nobody
// re-publishes the intent.
func TestFleetHandOffAfterSIGKILL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newLedgerEnv(t, int64(*seedFlag)+5, 1)
	nn := startNATSNode(t, natsNodeConfig{Name: "handoff-nats", StoreDir: t.TempDir()})
	tool := connectTool(t, ctx, nn.URL(), 1)
	js := tool.JetStream()
	feed := followVerdicts(t, ctx, js)
	dirA, dirB := daemonDataDir(t, "a"), daemonDataDir(t, "b")
	logA, logB := daemonLogPath(t, "a"), daemonLogPath(t, "b")
	diag := func() string { return logTail(logA, 20) + "\n" + logTail(logB, 30) }
	args := func(name, dir string) daemonArgs {
		return daemonArgs{NATSURL: nn.URL(), ICURL: env.srv.URL(), DataDir: dir, Instance: name,
			AckWait: testAckWait, LeaseTTL: *handOffTTL, Poll: *handOffPoll}
	}

	a := startDaemonProc(t, args("a", dirA), logA)
	p := env.plan("handoff-0", classAbsent, 0)
	publishAll(t, ctx, tool, []*plannedIntent{p})
	select {
	case <-feed.atLeast(1):
	case <-ctx.Done():
		t.Fatalf("no first verdict\n%s", diag())
	}
	leaseHolder(t, ctx, js, p.Canister, "a")

	// B learns the intent from the verdict stream only, and watches it.
	b := startDaemonProc(t, args("b", dirB), logB)
	testutil.Eventually(t, 30*time.Second, "b's store watches the intent", func() (bool, string) {
		n, err := storeCount(ctx, dirB, "watch")
		return err == nil && n == 1, fmt.Sprintf("%d watched (%v)", n, err)
	})
	leaseHolder(t, ctx, js, p.Canister, "a") // B waits: A's lease is alive

	a.kill()
	killed := time.Now()
	if err := os.RemoveAll(dirA); err != nil {
		t.Fatal(err)
	}
	env.closeWindows()
	final := feed.when(func(byID map[string][]reconciled.Verdict, _ int) bool {
		vs := byID[p.ID]
		return len(vs) > 0 && vs[len(vs)-1].Final
	})
	bound := *handOffTTL + *handOffPoll
	select {
	case <-final:
	case <-time.After(bound + 30*time.Second):
		t.Fatalf("no final verdict %s after the kill\n%s", bound+30*time.Second, diag())
	}
	took := time.Since(killed)
	// The decision itself (one certified tip, one page) and scheduling on
	// a busy machine come on top of the bound.
	if took > bound+time.Second {
		t.Errorf("the final verdict came %s after the kill; the lease TTL and one poll interval are %s", took, bound)
	}
	b.terminate(15 * time.Second)
	// B held the lease for the final verdict, and gave it up once nothing
	// of the ledger was open any more.
	if n := logLines(logB, "follow-up lease taken", p.Canister); n != 1 {
		t.Errorf("b took the lease %d times, want once", n)
	}
	checkAllPlaces(t, ctx, js, feed, []*plannedIntent{p}, dirB)
	if n := logLines(logB, `"msg":"verdict"`, p.ID); n != 1 {
		t.Errorf("b decided %s %d times, want once (the final absent)", p.ID, n)
	}
	t.Logf("hand-off: lease TTL %s, poll %s: final verdict %s after SIGKILL", *handOffTTL, *handOffPoll, took.Round(time.Millisecond))
}

// A rolling deploy on a 3-node JetStream cluster: three instances share
// 300 open intents (some executed before they were published, some after,
// some never); each instance in turn is stopped and replaced by a new one
// with an empty store, while the ledger moves on and the windows close.
// Every intent ends with exactly one final verdict, the truth, with seqs
// 1..n, and the three last stores agree with the stream.
func TestFleetRollingDeploy(t *testing.T) {
	started := time.Now()
	rng := rand.New(rand.NewPCG(*seedFlag, 0x7011))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env := newLedgerEnv(t, int64(*seedFlag)+6, 4)
	nodes := startNATSCluster(t, "roll", 3)
	var urls []string
	for _, nd := range nodes {
		urls = append(urls, nd.URL())
	}
	natsURL := strings.Join(urls, ",")
	tool := connectTool(t, ctx, natsURL, 3)
	js := tool.JetStream()
	feed := followVerdicts(t, ctx, js)

	classes := []intentClass{classFound, classAbsent, classLate}
	plan := make([]*plannedIntent, 300)
	for i := range plan {
		plan[i] = env.plan(fmt.Sprintf("roll-%03d", i), classes[i%len(classes)], i)
	}
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	var late []*plannedIntent
	for _, p := range plan {
		switch p.Class {
		case classFound:
			env.execute(t, p)
		case classLate:
			late = append(late, p)
		}
	}

	type instance struct {
		name, dir, log string
		proc           *daemonProc
	}
	start := func(name string) *instance {
		in := &instance{name: name, dir: daemonDataDir(t, name), log: daemonLogPath(t, name)}
		in.proc = startDaemonProc(t, daemonArgs{NATSURL: natsURL, ICURL: env.srv.URL(), DataDir: in.dir, Instance: name,
			Replicas: 3, AckWait: testAckWait, LeaseTTL: fleetLeaseTTL}, in.log)
		return in
	}
	fleet := []*instance{start("d1"), start("d2"), start("d3")}
	diag := func() string {
		var b strings.Builder
		for _, in := range fleet {
			b.WriteString(logTail(in.log, 15) + "\n")
		}
		return b.String()
	}
	publishAll(t, ctx, tool, plan)
	select {
	case <-feed.when(func(byID map[string][]reconciled.Verdict, _ int) bool { return len(byID) == len(plan) }):
	case <-ctx.Done():
		t.Fatalf("not every intent got a first verdict\n%s", diag())
	}
	firstVerdicts := time.Since(started)

	// Replace each instance in turn; between replacements the ledger
	// executes half the late transfers, then the rest, then every window
	// closes.
	half := len(late) / 2
	steps := []func(){
		func() {
			for _, p := range late[:half] {
				env.execute(t, p)
			}
		},
		func() {
			for _, p := range late[half:] {
				env.execute(t, p)
			}
		},
		env.closeWindows,
	}
	for i := range fleet {
		steps[i]()
		fleet[i].proc.terminate(15 * time.Second)
		fleet[i] = start(fleet[i].name + "-r")
	}
	feed.waitSettled(t, plan, func(*plannedIntent) bool { return true }, settleTimeout, diag)
	settled := time.Since(started)

	// Every new store imports the whole stream through its own follower.
	_, total, err := readVerdictStream(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range fleet {
		waitStoreCount(t, ctx, in.dir, total, settleTimeout, func() string { return logTail(in.log, 30) })
	}
	var dirs []string
	decided := map[string]int{}
	for _, in := range fleet {
		in.proc.terminate(15 * time.Second)
		dirs = append(dirs, in.dir)
	}
	checkAllPlaces(t, ctx, js, feed, plan, dirs...)
	for _, in := range fleet {
		decided[in.name] = logLines(in.log, `"msg":"verdict"`)
	}
	t.Logf("rolling deploy: 3 nodes, R3 streams, %d intents (%s), %d verdicts; first verdicts at %s, all final at %s, %s; decisions logged by the last instances %v",
		len(plan), classCounts(plan), total, firstVerdicts.Round(time.Millisecond), settled.Round(time.Millisecond),
		time.Since(started).Round(time.Millisecond), decided)
}

// Two instances share the intake consumer; each decides a share, and both
// stores end up with every verdict (and the intent bodies) through the
// verdict stream.
func TestFleetTwoInstancesShareWorkAndVerdicts(t *testing.T) {
	r := newRig(t, rigOpts{NoDaemon: true})
	l := r.ledger(ledgertest.LedgerConfig{InitialBalances: payerFunds()})
	a := r.instance("a", t.TempDir(), time.Hour, nil)
	defer daemontest.Stop(a, time.Second)
	b := r.instance("b", t.TempDir(), time.Hour, nil)
	defer daemontest.Stop(b, time.Second)

	const n = 16
	var docs []toollayer.Intent
	for i := range n {
		pay := payment{stamp: r.srv.Now(), amount: uint64(100 + i), memo: fmt.Sprint("pair-", i)}
		if i%2 == 0 {
			if _, err := l.Transfer(payer, pay.arg()); err != nil {
				t.Fatal(err)
			}
		}
		docs = append(docs, transferIntent(fmt.Sprint("pair-", i), l, pay))
	}
	for _, doc := range docs {
		if _, err := r.tool.PublishIntent(r.ctx, doc.Canister, doc.ID, doc.JSON(), matcher.IntentHash(doc.JSON())); err != nil {
			t.Fatal(err)
		}
	}
	for i, doc := range docs {
		v := r.wait(doc.ID, toollayer.AnyVerdict)
		want := reconciled.StatusNotYet
		if i%2 == 0 {
			want = reconciled.StatusFound
		}
		if v.Status != want {
			t.Fatalf("%s: %s, want %s", doc.ID, v.Status, want)
		}
	}
	decided := func(d *daemon.Daemon) uint64 {
		return d.Metrics().Get(reconcile.MetricVerdicts, "found") + d.Metrics().Get(reconcile.MetricVerdicts, "not_yet")
	}
	if da, db := decided(a), decided(b); da+db != n {
		t.Fatalf("decided %d + %d verdicts, want %d in all (each intent once)", da, db, n)
	} else {
		t.Logf("instance a decided %d, b decided %d", da, db)
	}
	for _, d := range []*daemon.Daemon{a, b} {
		testutil.Eventually(t, 30*time.Second, "every verdict in "+d.Config().Instance+"'s store", func() (bool, string) {
			missing := 0
			for _, doc := range docs {
				vs, err := d.Store().Verdicts(r.ctx, doc.ID)
				if err != nil || len(vs) != 1 {
					missing++
					continue
				}
				if _, err := d.Store().Intent(r.ctx, doc.ID); err != nil {
					missing++
				}
			}
			return missing == 0, fmt.Sprint(missing, " missing")
		})
	}
	// The metrics endpoint renders what happened.
	var buf bytes.Buffer
	if err := a.WriteMetrics(r.ctx, &buf); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"reconciled_intents_received_total", "reconciled_verdicts_imported_total",
		"reconciled_watch_list_size", "reconciled_intents_by_status", "reconciled_oldest_open_intent_age_seconds"} {
		if !strings.Contains(buf.String(), name) {
			t.Errorf("metrics lack %s:\n%s", name, buf.String())
		}
	}
}

// An instance stopped in the middle of a slow scan gives the intent back;
// a new instance on the same store and NATS finishes it exactly once, and
// resumes the watch list.
func TestFleetRestartMidScan(t *testing.T) {
	r := newRig(t, rigOpts{NoDaemon: true})
	// No initial balance: its block would carry the creation time, and the
	// generated history must spread over the past hour.
	l := r.ledger(ledgertest.LedgerConfig{})
	if err := l.GenerateHistory(3000, 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Small pages, so the scan takes many slow requests.
	small := func(c *icrc3history.ClientConfig) { c.Endpoint = icrc3.EndpointICRC3 }
	d1 := r.instance("one", dir, time.Hour, small)

	// Watched before the restart: a not_yet intent.
	watched := transferIntent("watched", l, payment{stamp: r.srv.Now(), amount: 7, memo: "w"})
	if v := r.ask(watched, toollayer.AnyVerdict); v.Status != reconciled.StatusNotYet {
		t.Fatalf("watched: %+v", v)
	}
	// An intent stamped an hour back, behind 3000 blocks read slowly.
	slow := transferIntent("slow", l, payment{stamp: r.srv.Now() - uint64(time.Hour), amount: 9, memo: "s"})
	r.srv.SetFaults(l.ID(), ledgertest.Faults{Latency: 20 * time.Millisecond})
	before := l.Counters().BlocksServed
	if _, err := r.tool.PublishIntent(r.ctx, slow.Canister, slow.ID, slow.JSON(), matcher.IntentHash(slow.JSON())); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the slow scan under way", func() (bool, string) {
		got := l.Counters().BlocksServed - before
		return got > 0, fmt.Sprint(got, " blocks")
	})
	t0 := time.Now()
	daemontest.Stop(d1, 0) // no grace: the in-flight intent is given back mid-scan
	t.Logf("stopped in %s", time.Since(t0))
	if n := r.streamCount("slow"); n != 0 {
		t.Fatalf("%d verdicts published before the restart; the scan was not interrupted", n)
	}
	r.srv.SetFaults(l.ID(), ledgertest.Faults{})

	d2 := r.instance("one", dir, time.Hour, small)
	defer daemontest.Stop(d2, time.Second)
	v := r.wait(slow.ID, toollayer.AnyVerdict)
	t.Logf("decided after restart in %s", time.Since(t0))
	if v.Status != reconciled.StatusNotYet || v.Seq != 1 {
		t.Fatalf("slow after restart: %+v", v)
	}
	ws, err := d2.Store().Watches(r.ctx)
	if err != nil || len(ws) != 2 {
		t.Fatalf("watch list after restart: %+v %v", ws, err)
	}
	r.srv.Advance(24*time.Hour + 3*time.Minute)
	d2.FollowUpNow()
	for _, id := range []string{watched.ID, slow.ID} {
		v := r.wait(id, toollayer.FinalVerdict)
		if v.Status != reconciled.StatusAbsent || v.Seq != 2 {
			t.Fatalf("%s: %+v, want absent seq 2", id, v)
		}
		if vs := storedHistory(t, d2.Store(), id); len(vs) != 2 {
			t.Fatalf("%s: %s", id, describe(vs))
		}
		if n := r.streamCount(id); n != 2 {
			t.Fatalf("%s: %d verdicts in the stream, want 2", id, n)
		}
	}
}
