package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

// The liveness harness's faults that belong to a process: the daemons run
// as `reconciled serve` subprocesses and NATS as an external nats-server,
// so a SIGKILL, a server restarted with another token, or a server down
// for a minute is exactly what an operator's would be.

var (
	natsBuildOnce sync.Once
	natsBuildPath string
	natsBuildErr  error
)

// natsServerBinary builds nats-server from the module go.mod names, once
// per test run.
func natsServerBinary(t testing.TB) string {
	t.Helper()
	natsBuildOnce.Do(func() {
		out := filepath.Join(binDir, "nats-server")
		b, err := exec.Command("go", "build", "-o", out, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			natsBuildErr = fmt.Errorf("go build nats-server: %v\n%s", err, b)
			return
		}
		natsBuildPath = out
	})
	if natsBuildErr != nil {
		t.Fatal(natsBuildErr)
	}
	return natsBuildPath
}

// natsProc is an external nats-server with JetStream on a loopback port
// and a store dir that outlive its restarts.
type natsProc struct {
	t       testing.TB
	name    string
	port    int
	dir     string
	logPath string
	token   string
	// clusterPort and routes (every member's cluster port) make it a
	// member of cluster "lv".
	clusterPort int
	routes      []int

	mu   sync.Mutex
	proc *child // nil while it is down
}

func startNATSProc(t testing.TB, token string) *natsProc {
	t.Helper()
	n := &natsProc{t: t, name: "lv-nats", port: freePorts(t, 1)[0], dir: t.TempDir(), logPath: daemonLogPath(t, "nats-server"), token: token}
	n.start()
	t.Cleanup(n.kill)
	return n
}

// startNATSProcCluster starts n nats-server processes as one JetStream
// cluster on loopback.
func startNATSProcCluster(t testing.TB, n int) []*natsProc {
	t.Helper()
	ports := freePorts(t, 2*n)
	var nodes []*natsProc
	for i := range n {
		nodes = append(nodes, &natsProc{t: t, name: fmt.Sprintf("lv-nats-%d", i), port: ports[i], dir: t.TempDir(),
			logPath: daemonLogPath(t, fmt.Sprintf("nats-server-%d", i)), clusterPort: ports[n+i], routes: ports[n:]})
	}
	for _, nd := range nodes {
		nd.start()
		t.Cleanup(nd.kill)
	}
	return nodes
}

func (n *natsProc) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// start runs the server and waits until it accepts connections.
func (n *natsProc) start() {
	n.t.Helper()
	bin := natsServerBinary(n.t)
	// A configuration file: server tags (which name the server, for
	// stream placement) exist only there. Every write is fsynced, as the
	// daemon's embedded server does: a SIGKILL then loses nothing the
	// server acknowledged, and what goes missing is the daemon's doing.
	conf := fmt.Sprintf("server_name: %q\nlisten: \"127.0.0.1:%d\"\nserver_tags: [%q]\njetstream { store_dir: %q, sync_interval: always }\n",
		n.name, n.port, "node:"+n.name, n.dir)
	if n.token != "" {
		conf += fmt.Sprintf("authorization { token: %q }\n", n.token)
	}
	if n.clusterPort != 0 {
		var routes []string
		for _, r := range n.routes {
			if r != n.clusterPort {
				routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats://127.0.0.1:%d", r)))
			}
		}
		conf += fmt.Sprintf("cluster { name: lv, listen: \"127.0.0.1:%d\", routes: [%s] }\n", n.clusterPort, strings.Join(routes, ", "))
	}
	confPath := filepath.Join(filepath.Dir(n.logPath), n.name+".conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		n.t.Fatal(err)
	}
	args := []string{"-c", confPath}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		n.t.Fatal(err)
	}
	proc := startChild(n.t, bin, args, nil, logf, func() { logf.Close() })
	n.mu.Lock()
	n.proc = proc
	n.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", n.port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-proc.done:
			n.t.Fatalf("nats-server exited at start\n%s", logTail(n.logPath, 20))
		default:
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("nats-server not listening after 20 s\n%s", logTail(n.logPath, 20))
		}
		pause(50 * time.Millisecond)
	}
}

// kill is kill -9 of the server.
func (n *natsProc) kill() {
	n.mu.Lock()
	c := n.proc
	n.proc = nil
	n.mu.Unlock()
	if c != nil {
		c.kill()
	}
}

// pause waits d (a span of a fault's schedule, not a synchronisation).
func pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

// lvProcWorld is a fleet of daemon processes on an external nats-server
// and the in-process test replica with two ledgers.
type lvProcWorld struct {
	t       *testing.T
	ctx     context.Context
	rng     *rand.Rand
	env     *ledgerEnv
	ledgers []*ledgerEnv
	nats    *natsProc
	// cluster, when set, is the servers of a cluster (nats is then nil);
	// natsURLs names every server the daemons and the tool layer use.
	cluster  []*natsProc
	natsURLs string
	tool     *queue.Conn
	feed     *lvFeed
	daemons  []*lvProc
	plan     []*lvIntent
	res      *lvResult
	allowed  time.Duration
	// published counts the tool layer's acknowledged publications.
	published int
}

type lvProc struct {
	args daemonArgs
	// token, when set, is written to tokenFile, which the daemon reads.
	token, tokenFile string
	log              string
	p                *daemonProc
}

func newLvProcWorld(t *testing.T, name string, seed int64, n, perLedger int, token string) *lvProcWorld {
	return newLvProcWorldOn(t, name, seed, n, perLedger, token, 0)
}

// newLvProcWorldOn is newLvProcWorld on a cluster of clusterSize servers
// (one server when 0).
func newLvProcWorldOn(t *testing.T, name string, seed int64, n, perLedger int, token string, clusterSize int) *lvProcWorld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	w := &lvProcWorld{t: t, ctx: ctx, rng: rand.New(rand.NewSource(seed)), res: &lvResult{kind: name, worlds: 1, instances: n}}
	w.env = newLedgerEnv(t, seed, 4)
	w.ledgers = []*ledgerEnv{w.env, ledgerOn(t, w.env.srv, 9, 4)}
	if clusterSize > 0 {
		w.cluster = startNATSProcCluster(t, clusterSize)
		var urls []string
		for _, nd := range w.cluster {
			urls = append(urls, nd.URL())
		}
		w.natsURLs = strings.Join(urls, ",")
	} else {
		w.nats = startNATSProc(t, token)
		w.natsURLs = w.nats.URL()
	}
	w.tool = w.connectTool(token)
	if clusterSize > 0 {
		w.separateStreams()
	}
	w.feed = &lvFeed{seen: map[uint64]bool{}, byID: map[string][]reconciled.Verdict{}, finalAt: map[string]time.Time{},
		changed: make(chan struct{}, 1)}
	w.feed.follow(t, ctx, w.tool.JetStream())
	for i := range n {
		a := daemonArgs{NATSURL: w.natsURLs, ICURL: w.env.srv.URL(), DataDir: daemonDataDir(t, fmt.Sprintf("d%d", i)),
			Instance: fmt.Sprintf("d%d", i), Poll: lvPoll, AckWait: 5 * time.Second, LeaseTTL: lvLeaseTTL}
		d := &lvProc{args: a, token: token, log: daemonLogPath(t, a.Instance)}
		d.p = w.startDaemon(d)
		w.daemons = append(w.daemons, d)
	}
	for i := range perLedger {
		for li, e := range w.ledgers {
			id := fmt.Sprintf("%s-%d-l%d-%04d", strings.ReplaceAll(name, "_", ""), seed, li, i)
			w.plan = append(w.plan, &lvIntent{plannedIntent: e.plan(id, intentClass(w.rng.Intn(int(numClasses))), i), ledger: li})
		}
	}
	return w
}

func (w *lvProcWorld) connectTool(token string) *queue.Conn {
	c, err := queue.Connect(w.ctx, queue.ConnConfig{URL: w.natsURLs, Token: token, Name: "lv-tool-layer",
		ReconnectMin: 50 * time.Millisecond, ReconnectMax: 500 * time.Millisecond})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(c.Close)
	w.ensureStreams(c)
	return c
}

// ensureStreams creates the streams, each attempt bounded: a cluster that
// has not yet elected its meta leader leaves a request unanswered.
func (w *lvProcWorld) ensureStreams(c *queue.Conn) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
		err := c.EnsureStreams(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("ensure streams: %v", err)
		}
		pause(200 * time.Millisecond)
	}
}

// separateStreams moves the verdict stream (one replica) to another
// server of the cluster than the intent stream's, so a server that goes
// down takes one of them only. The daemons' later updates name no
// placement, which the server takes as "stay where you are".
func (w *lvProcWorld) separateStreams() {
	js := w.tool.JetStream()
	in := streamInfo(w.t, w.ctx, js, queue.IntentsStream)
	v := streamInfo(w.t, w.ctx, js, queue.VerdictsStream)
	if v.Cluster.Leader != in.Cluster.Leader {
		return
	}
	target := w.cluster[0].name
	if target == in.Cluster.Leader {
		target = w.cluster[1].name
	}
	cfg := v.Config
	cfg.Placement = &jetstream.Placement{Cluster: "lv", Tags: []string{"node:" + target}}
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	_, err := js.UpdateStream(ctx, cfg)
	cancel()
	if err != nil {
		w.t.Fatalf("move the verdict stream to %s: %v", target, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
		st, err := js.Stream(ctx, queue.VerdictsStream)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = st.Info(ctx)
		}
		cancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader == target && len(info.Cluster.Replicas) == 0 {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the verdict stream did not move to %s: %v %+v", target, err, info)
		}
		pause(200 * time.Millisecond)
	}
}

// nodeOf returns the cluster's server named name.
func (w *lvProcWorld) nodeOf(name string) *natsProc {
	for _, nd := range w.cluster {
		if nd.name == name {
			return nd
		}
	}
	w.t.Fatalf("no server %q in the cluster", name)
	return nil
}

// startDaemon starts d's process; its token is read from a file, as an
// operator's secret would be.
func (w *lvProcWorld) startDaemon(d *lvProc) *daemonProc {
	a := d.args
	if d.token != "" {
		if d.tokenFile == "" {
			d.tokenFile = filepath.Join(w.t.TempDir(), "nats-token")
			if err := os.WriteFile(d.tokenFile, []byte(d.token), 0o600); err != nil {
				w.t.Fatal(err)
			}
		}
		a.Extra = append(a.Extra[:len(a.Extra):len(a.Extra)], "--nats-token-file", d.tokenFile)
	}
	return startDaemonProc(w.t, a, d.log)
}

func (w *lvProcWorld) publishAll() {
	for _, p := range w.plan {
		if p.Class == classFound {
			w.ledgers[p.ledger].execute(w.t, p.plannedIntent)
		}
	}
	for _, p := range w.plan {
		for {
			ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
			_, err := w.tool.PublishIntent(ctx, p.Canister, p.ID, p.Body, matcher.IntentHash(p.Body))
			cancel()
			if err == nil {
				break
			}
			if w.ctx.Err() != nil {
				w.t.Fatalf("publish %s: %v", p.ID, err)
			}
		}
		w.published++
		if p.Class == classFound || p.Class == classInvalid {
			p.readyAt = time.Now()
		}
	}
}

func (w *lvProcWorld) executeLate() {
	for _, p := range w.plan {
		if p.Class == classLate {
			w.ledgers[p.ledger].execute(w.t, p.plannedIntent)
			p.readyAt = time.Now()
		}
	}
}

func (w *lvProcWorld) closeWindows() {
	w.env.closeWindows()
	now := time.Now()
	for _, p := range w.plan {
		if p.Class == classAbsent {
			p.readyAt = now
		}
	}
}

// finish waits for every final verdict, stops the fleet with SIGTERM and
// judges the stream and every store.
func (w *lvProcWorld) finish() {
	var deadline time.Time
	for _, p := range w.plan {
		deadline = maxTime(deadline, p.readyAt.Add(w.allowed+livenessGrace))
	}
	w.feed.waitFor(w.ctx, deadline, func(byID map[string][]reconciled.Verdict) bool {
		for _, p := range w.plan {
			vs := byID[p.ID]
			if len(vs) == 0 || !vs[len(vs)-1].Final {
				return false
			}
		}
		return true
	})
	// Stores converge on the stream while the fleet runs (the followers);
	// then the fleet stops and each store is read from its file.
	streamDeadline := time.Now().Add(livenessBound)
	var stream map[string][]reconciled.Verdict
	for {
		var err error
		stream, _, err = readVerdictStream(w.ctx, w.tool.JetStream())
		if err == nil {
			break
		}
		if time.Now().After(streamDeadline) {
			w.t.Fatal(err)
		}
		pause(200 * time.Millisecond)
	}
	w.feed.mu.Lock()
	finalAt := make(map[string]time.Time, len(w.feed.finalAt))
	for id, at := range w.feed.finalAt {
		finalAt[id] = at
	}
	w.feed.mu.Unlock()
	judge(w.res, w.plan, stream, finalAt, w.allowed)
	if w.published != len(w.plan) {
		w.res.problem("wrong: the tool layer published %d times for %d intents", w.published, len(w.plan))
		w.res.wrong++
	}
	ps := make([]*plannedIntent, len(w.plan))
	for i, p := range w.plan {
		ps[i] = p.plannedIntent
	}
	storeDeadline := time.Now().Add(storeBound)
	for _, d := range w.daemons {
		for {
			n, err := storeVerdictCount(w.ctx, d.args.DataDir)
			want := 0
			for _, vs := range stream {
				want += len(vs)
			}
			if (err == nil && n >= want) || time.Now().After(storeDeadline) {
				break
			}
			pause(200 * time.Millisecond)
		}
	}
	for _, d := range w.daemons {
		d.p.terminate(30 * time.Second)
	}
	for _, d := range w.daemons {
		got, _, report := storeSnapshot(w.t, w.ctx, d.args.DataDir, ps)
		if report != "ok" {
			w.res.storeDiffs++
			w.res.problem("store: %s: integrity check: %s", d.args.Instance, report)
		}
		for _, p := range w.plan {
			if !sameVerdicts(got[p.ID], stream[p.ID]) {
				w.res.storeDiffs++
				w.res.problem("store: instance %s: %s: store %s, stream %s", d.args.Instance, p.ID,
					describeHashed(got[p.ID]), describeHashed(stream[p.ID]))
			}
		}
	}
}

// httpAddrOf reads a daemon process's HTTP address from its log's last
// "reconciled serving" line ("" before it serves).
func httpAddrOf(logPath string) string {
	lines := logMatches(logPath, "reconciled serving")
	if len(lines) == 0 {
		return ""
	}
	var line struct {
		HTTP string `json:"http"`
	}
	if json.Unmarshal([]byte(lines[len(lines)-1]), &line) != nil {
		return ""
	}
	return line.HTTP
}

// probe GETs a daemon's probe path with a short deadline; ok is a 200.
func probe(addr, path string) (ok bool, body string) {
	if addr == "" {
		return false, "no address yet"
	}
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK, strings.TrimSpace(string(b))
}

// runSIGKILL: a fleet of 2–3 daemon processes while one of them, chosen
// at random, is killed with SIGKILL every 3 s and started again on its
// store half a second later, for the fault's length.
func runSIGKILL(t *testing.T, k *lvKind, seed int64, perLedger int) *lvResult {
	w := newLvProcWorld(t, k.name, seed, 2+int(seed%2), perLedger, "")
	w.allowed = k.dur + livenessBound
	start := time.Now()
	w.publishAll()
	lateDone, closed := false, false
	for time.Since(start) < k.dur {
		pause(3 * time.Second)
		d := w.daemons[w.rng.Intn(len(w.daemons))]
		d.p.kill()
		pause(500 * time.Millisecond)
		d.p = w.startDaemon(d)
		if !lateDone && time.Since(start) > k.dur/4 {
			w.executeLate()
			lateDone = true
		}
		if !closed && time.Since(start) > k.dur/2 {
			w.closeWindows()
			closed = true
		}
	}
	if !lateDone {
		w.executeLate()
	}
	if !closed {
		w.closeWindows()
	}
	w.finish()
	return w.res
}

// runTokenRotation: the nats-server is restarted with another token and
// the operator writes the new token into every daemon's token file, then
// restarts (SIGTERM, start again) each daemon that says in /readyz that it
// is not ready, as a rolling restart after a secret rotation does. The
// supervisor restarts a daemon that exits or fails /healthz three times in
// a row. A daemon that does none of these while the intents do not settle
// is a zombie. Whatever a daemon stored and could not publish before the
// rotation must reach the stream after it.
func runTokenRotation(t *testing.T, k *lvKind, seed int64, perLedger int) *lvResult {
	w := newLvProcWorld(t, k.name, seed, 2, perLedger, "token-one")
	w.allowed = k.dur + livenessBound
	w.publishAll()
	w.feed.waitFor(w.ctx, time.Now().Add(livenessBound), func(byID map[string][]reconciled.Verdict) bool { return len(byID) >= len(w.plan)/4 })
	// Rotation: the server comes back with the new token, the secret is
	// updated where the daemons read it.
	w.nats.kill()
	w.nats.token = "token-two"
	w.nats.start()
	for _, d := range w.daemons {
		if err := os.WriteFile(d.tokenFile, []byte("token-two"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w.tool = w.connectTool("token-two")
	w.feed.follow(t, w.ctx, w.tool.JetStream())
	w.executeLate()
	w.closeWindows()
	// Supervise until every intent is final or the world's deadline.
	honest := make([]bool, len(w.daemons))
	failsInRow := make([]int, len(w.daemons))
	notReadyInRow := make([]int, len(w.daemons))
	deadline := time.Now().Add(w.allowed + livenessGrace)
	for time.Now().Before(deadline) {
		if w.feed.waitFor(w.ctx, time.Now().Add(500*time.Millisecond), func(byID map[string][]reconciled.Verdict) bool {
			for _, p := range w.plan {
				vs := byID[p.ID]
				if len(vs) == 0 || !vs[len(vs)-1].Final {
					return false
				}
			}
			return true
		}) {
			break
		}
		for i, d := range w.daemons {
			select {
			case <-d.p.exited():
				honest[i] = true
				d.p = w.startDaemon(d)
				failsInRow[i] = 0
				continue
			default:
			}
			addr := httpAddrOf(d.log)
			if ok, _ := probe(addr, "/healthz"); !ok && addr != "" {
				if failsInRow[i]++; failsInRow[i] >= 3 {
					honest[i] = true
					d.p.kill()
					d.p = w.startDaemon(d)
					failsInRow[i] = 0
				}
			} else {
				failsInRow[i] = 0
			}
			if ok, _ := probe(addr, "/readyz"); !ok && addr != "" {
				honest[i] = true
				if notReadyInRow[i]++; notReadyInRow[i] >= 3 {
					stopDaemon(d.p, 30*time.Second)
					d.p = w.startDaemon(d)
					notReadyInRow[i] = 0
				}
			} else {
				notReadyInRow[i] = 0
			}
		}
	}
	w.finish()
	for i, d := range w.daemons {
		if !honest[i] && w.res.finals < w.res.intents {
			w.res.notReady++
			w.res.problem("zombie: %s kept answering /healthz and /readyz OK after the token rotation and settled nothing", d.args.Instance)
		}
	}
	return w.res
}

// runServerDown: in a cluster of three nats-server processes with the
// two streams on different servers, the server of one stream is killed
// for the fault's length (drawn from 1–90 s in the long run) while two
// daemon processes settle a burst.
func runServerDown(t *testing.T, k *lvKind, seed int64, perLedger int, stream string) *lvResult {
	w := newLvProcWorldOn(t, k.name, seed, 2, perLedger, "", 3)
	dur := k.dur
	if *livenessLong {
		dur = time.Second + time.Duration(w.rng.Int63n(int64(89*time.Second)))
	}
	w.allowed = dur + livenessBound
	srv := w.nodeOf(streamInfo(t, w.ctx, w.tool.JetStream(), stream).Cluster.Leader)
	w.publishAll()
	w.feed.waitFor(w.ctx, time.Now().Add(livenessBound), func(byID map[string][]reconciled.Verdict) bool {
		return len(byID) >= len(w.plan)/10
	})
	srv.kill()
	down := time.Now()
	w.executeLate()
	pause(dur / 2)
	w.closeWindows()
	pause(time.Until(down.Add(dur)))
	srv.start()
	w.feed.follow(t, w.ctx, w.tool.JetStream())
	w.finish()
	return w.res
}

// stopDaemon sends SIGTERM and waits up to grace for the exit, whatever
// its status, then kills.
func stopDaemon(p *daemonProc, grace time.Duration) {
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.kill()
	}
}

// natsDownFor is how long TestLivenessNATSDownMinute keeps the server down.
const natsDownFor = 60 * time.Second

// TestLivenessNATSDownMinute is the acceptance test: in a
// cluster of three nats-server processes, the server holding the verdict
// stream (not the intent stream's) is killed for a minute during a burst
// of 200 intents settled by two daemon processes. Every intent must reach its final verdict within the outage
// and livenessBound, with no gap on the stream and every store equal to
// it, while the tool layer publishes each intent once and never again.
func TestLivenessNATSDownMinute(t *testing.T) {
	w := newLvProcWorldOn(t, "nats_down_minute", int64(*seedFlag), 2, 100, "", 3)
	w.allowed = natsDownFor + livenessBound
	verdictServer := w.nodeOf(streamInfo(t, w.ctx, w.tool.JetStream(), queue.VerdictsStream).Cluster.Leader)
	w.publishAll()
	// Mid-burst: a tenth of the verdicts are out.
	w.feed.waitFor(w.ctx, time.Now().Add(livenessBound), func(byID map[string][]reconciled.Verdict) bool {
		return len(byID) >= len(w.plan)/10
	})
	verdictServer.kill()
	down := time.Now()
	w.executeLate()
	pause(natsDownFor / 2)
	w.closeWindows()
	pause(time.Until(down.Add(natsDownFor)))
	verdictServer.start()
	// The tool layer's consumer is set up again, as a tool layer whose
	// server restarted would; what it had seen is kept.
	w.feed.follow(t, w.ctx, w.tool.JetStream())
	w.finish()
	res := w.res
	t.Logf("verdict stream's server down %s: %d intents, %d final, lost %d, stuck %d, late %d, wrong %d, gaps %d, store diffs %d; worst delay %s",
		natsDownFor, res.intents, res.finals, res.lost, res.stuck, res.late, res.wrong, res.gaps, res.storeDiffs,
		res.worst.Round(time.Millisecond))
	if res.failed() {
		report(t, &lvKind{name: "nats_down_minute"}, res)
	}
}
