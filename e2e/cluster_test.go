package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/queue"
)

// startNATSCluster starts n JetStream servers on loopback that route to
// each other, and waits until JetStream has a meta leader every node knows.
func startNATSCluster(t *testing.T, name string, n int) []*natsNode {
	t.Helper()
	ports := freePorts(t, n)
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	nodes := make([]*natsNode, n)
	for i := range n {
		nodes[i] = startNATSNode(t, natsNodeConfig{Name: fmt.Sprintf("%s-%d", name, i+1), StoreDir: t.TempDir(),
			ClusterName: name, ClusterPort: ports[i], Routes: routes})
	}
	waitHealthy(t, nodes, 30*time.Second)
	return nodes
}

// waitHealthy polls the nodes' health (JetStream included) until all report
// ok: no event announces that the meta group has formed.
func waitHealthy(t *testing.T, nodes []*natsNode, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var bad []string
		for _, nd := range nodes {
			srv := nd.server()
			if srv == nil {
				continue
			}
			if h := srv.Healthz(&server.HealthzOptions{}); h.Status != "ok" {
				bad = append(bad, fmt.Sprintf("%s: %s %s", nd.name, h.Status, h.Error))
			}
		}
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats cluster not healthy after %s: %s", timeout, strings.Join(bad, "; "))
		}
		<-tick.C
	}
}

// Scale-out on a 3-node NATS cluster: two daemons on different nodes share
// the intake consumer of streams with 3 replicas. The node of one daemon is
// shut down mid-run; the run still ends with every intent settled exactly
// once, and both daemons' stores hold every verdict.
func TestClusterScaleOutSurvivesNodeLoss(t *testing.T) {
	started := time.Now()
	rng := rand.New(rand.NewPCG(*seedFlag, 0xc105))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	env := newLedgerEnv(t, int64(*seedFlag)+2, 4)
	// Slow replies keep several intents in flight when the node goes.
	env.srv.SetFaults(env.ledger.ID(), ledgertest.Faults{Latency: 20 * time.Millisecond})
	nodes := startNATSCluster(t, "e2e", 3)
	// The tool layer is connected to the nodes that stay.
	tool := connectTool(t, ctx, nodes[0].URL()+","+nodes[2].URL(), 3)
	js := tool.JetStream()
	feed := followVerdicts(t, ctx, js)

	dirs := []string{daemonDataDir(t, "d1"), daemonDataDir(t, "d2")}
	logs := []string{daemonLogPath(t, "d1"), daemonLogPath(t, "d2")}
	var ds []*daemonProc
	for i, nd := range nodes[:2] {
		ds = append(ds, startDaemonProc(t, daemonArgs{NATSURL: nd.URL(), ICURL: env.srv.URL(), DataDir: dirs[i],
			Instance: fmt.Sprintf("d%d", i+1), Replicas: 3, AckWait: testAckWait}, logs[i]))
	}
	diag := func() string { return logTail(logs[0], 20) + "\n" + logTail(logs[1], 20) }

	plan := env.planMix("cluster", 40, rng.Shuffle)
	first, second := plan[:28], plan[28:]
	for _, p := range plan {
		if p.Class == classFound {
			env.execute(t, p)
		}
	}
	publishAll(t, ctx, tool, first)
	// The loss hits work in flight.
	select {
	case <-feed.atLeast(4):
	case <-ctx.Done():
		t.Fatalf("no verdicts before the node loss\n%s", diag())
	}
	// The daemons applied --stream-replicas at start: a stream with fewer
	// replicas would not survive the node loss below.
	for _, name := range []string{queue.IntentsStream, queue.VerdictsStream} {
		info := streamInfo(t, ctx, js, name)
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Fatalf("%s: replicas %d, cluster %+v", name, info.Config.Replicas, info.Cluster)
		}
	}
	nodes[1].shutdown()
	atLoss := feed.count()

	publishAll(t, ctx, tool, second)
	for _, p := range plan {
		if p.Class == classLate {
			env.execute(t, p)
		}
	}
	feed.waitSettled(t, plan, func(p *plannedIntent) bool { return p.Class != classAbsent }, settleTimeout, diag)
	env.closeWindows()
	feed.waitSettled(t, plan, func(*plannedIntent) bool { return true }, settleTimeout, diag)

	// Each daemon alone still takes work from the shared queue (the one
	// whose node died included), and one restarted catches up on the
	// verdicts it missed through its durable verdict follower.
	all := plan
	for round, i := range []int{1, 0} {
		other := 1 - i
		ds[other].terminate(15 * time.Second)
		var extra []*plannedIntent
		for k := range 2 {
			p := env.plan(fmt.Sprintf("cluster-solo%d-%d", i+1, k), classFound, 100+2*round+k)
			env.execute(t, p)
			extra = append(extra, p)
		}
		publishAll(t, ctx, tool, extra)
		feed.waitSettled(t, extra, func(*plannedIntent) bool { return true }, settleTimeout, diag)
		all = append(all, extra...)
		// A not_yet first is allowed (a tip reused from a moment before
		// the transfer), a seq decided twice or a second final is not.
		checkDecidedOnce(t, logs[i], extra[0].ID, fmt.Sprintf("d%d, the only daemon running", i+1))
		ds[other] = startDaemonProc(t, daemonArgs{NATSURL: nodes[0].URL() + "," + nodes[2].URL(), ICURL: env.srv.URL(),
			DataDir: dirs[other], Instance: fmt.Sprintf("d%d", other+1), Replicas: 3, AckWait: testAckWait}, logs[other])
	}

	// Each store gets the other daemon's verdicts through its own verdict
	// follower; wait for both to have them all before stopping.
	_, total, err := readVerdictStream(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	for i, dir := range dirs {
		waitStoreCount(t, ctx, dir, total, settleTimeout, func() string { return logTail(logs[i], 30) })
	}
	waitQueueDrained(t, ctx, js, 10*testAckWait)
	for i, d := range ds {
		select {
		case <-d.exited():
			t.Fatalf("daemon d%d exited during the run: %v\n%s", i+1, d.waitErr, logTail(logs[i], 40))
		default:
		}
		d.terminate(15 * time.Second)
	}

	checkAllPlaces(t, ctx, js, feed, all, dirs...)
	t.Logf("cluster: 3 nodes, R3 streams, node %s shut down after %d verdicts; %d intents (%s), %d verdicts, decisions logged by d1/d2: %d/%d, reconnects of d2: %d, %s",
		nodes[1].name, atLoss, len(all), classCounts(all), total,
		logLines(logs[0], `"msg":"verdict"`), logLines(logs[1], `"msg":"verdict"`),
		logLines(logs[1], "nats reconnected"), time.Since(started).Round(time.Millisecond))
}

// checkDecidedOnce fails unless the log shows each seq of the intent
// decided once and exactly one final verdict.
func checkDecidedOnce(t *testing.T, log, id, who string) {
	t.Helper()
	lines := logMatches(log, `"intent_id":"`+id+`"`, `"msg":"verdict"`)
	seqs := map[uint64]int{}
	finals := 0
	for _, l := range lines {
		var v struct {
			Seq   uint64 `json:"seq"`
			Final bool   `json:"final"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("log line of %s: %v: %s", id, err, l)
		}
		seqs[v.Seq]++
		if v.Final {
			finals++
		}
	}
	dup := false
	for _, n := range seqs {
		dup = dup || n > 1
	}
	if dup || finals != 1 {
		t.Errorf("%s: %d final verdicts and seqs %v decided by %s; its verdict lines:\n%s", id, finals, seqs, who, strings.Join(lines, "\n"))
	}
}

func streamInfo(t *testing.T, ctx context.Context, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// waitStoreCount polls a running daemon's store until it holds want
// verdicts: the store announces nothing to wait on.
func waitStoreCount(t *testing.T, ctx context.Context, dir string, want int, timeout time.Duration, diag func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := storeVerdictCount(ctx, dir)
		if err == nil && n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("store %s holds %d verdicts (err %v), want %d, after %s\n%s", dir, n, err, want, timeout, diag())
		}
		<-tick.C
	}
}
