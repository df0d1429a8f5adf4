package e2e_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/store"
)

// ---------------------------------------------------------------- NATS

// natsNode is a nats-server in the test process, listening on loopback,
// that can be shut down and started again on the same ports and store.
type natsNode struct {
	t    testing.TB
	name string
	opts *server.Options

	mu  sync.Mutex
	srv *server.Server
}

type natsNodeConfig struct {
	Name     string
	StoreDir string
	// ClusterName, ClusterPort and Routes (loopback host:port of every
	// node's cluster listener) make the node a cluster member.
	ClusterName string
	ClusterPort int
	Routes      []string
}

func startNATSNode(t testing.TB, cfg natsNodeConfig) *natsNode {
	t.Helper()
	opts := &server.Options{
		ServerName: cfg.Name,
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoLog:      true,
		NoSigs:     true,
		// No HTTP monitoring, no leafnodes: nothing but loopback client and
		// route listeners.
	}
	if cfg.ClusterName != "" {
		opts.Cluster = server.ClusterOpts{Name: cfg.ClusterName, Host: "127.0.0.1", Port: cfg.ClusterPort}
		var urls []string
		for _, r := range cfg.Routes {
			urls = append(urls, "nats-route://"+r)
		}
		opts.Routes = server.RoutesFromStr(strings.Join(urls, ","))
	}
	n := &natsNode{t: t, name: cfg.Name, opts: opts}
	n.start()
	t.Cleanup(n.shutdown)
	return n
}

// start starts the server; after the first start it reuses the client port
// the first one was given, so clients reconnect to the same URL.
func (n *natsNode) start() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		n.t.Fatalf("nats %s: already running", n.name)
	}
	srv, err := server.NewServer(n.opts.Clone())
	if err != nil {
		n.t.Fatalf("nats %s: %v", n.name, err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(15 * time.Second) {
		srv.Shutdown()
		n.t.Fatalf("nats %s: not ready", n.name)
	}
	if n.opts.Port == server.RANDOM_PORT {
		n.opts.Port = srv.Addr().(*net.TCPAddr).Port
	}
	n.srv = srv
}

// shutdown stops the server and waits until its store is closed.
func (n *natsNode) shutdown() {
	n.mu.Lock()
	srv := n.srv
	n.srv = nil
	n.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

func (n *natsNode) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port) }

func (n *natsNode) server() *server.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

// freePorts reserves n distinct loopback ports for listeners that must be
// known before any of them starts (cluster routes name each other).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return ports
}

// connectTool connects the tool layer's side (publishing intents, reading
// verdicts) and makes sure both streams exist with the given replicas, so
// daemons started later find them as they would configure them.
func connectTool(t testing.TB, ctx context.Context, urls string, replicas int) *queue.Conn {
	t.Helper()
	c, err := queue.Connect(ctx, queue.ConnConfig{URL: urls, Name: "e2e-tool-layer",
		Streams: queue.StreamsConfig{Replicas: replicas}, ReconnectMin: 50 * time.Millisecond, ReconnectMax: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// publishAll publishes the intents, retrying each while the connection is
// re-established (the dedup window makes a retried publish harmless).
func publishAll(t testing.TB, ctx context.Context, c *queue.Conn, ps []*plannedIntent) {
	t.Helper()
	for _, p := range ps {
		for {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.PublishIntent(pctx, p.Canister, p.ID, p.Body, matcher.IntentHash(p.Body))
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("publish %s: %v", p.ID, err)
			}
			t.Logf("publish %s: %v (retrying)", p.ID, err)
		}
	}
}

// ---------------------------------------------------------------- ledger

// ledgerEnv is the test replica with one ledger and funded callers.
type ledgerEnv struct {
	srv     *ledgertest.Server
	ledger  *ledgertest.Ledger
	callers []principal.Principal
	to      principal.Principal
}

func newLedgerEnv(t testing.TB, seed int64, callers int) *ledgerEnv {
	t.Helper()
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	e := &ledgerEnv{srv: srv, to: principal.Principal{Raw: []byte{0xE2, 0xE0, 0x01}}}
	var bal []ledgertest.Balance
	for i := range callers {
		p := principal.Principal{Raw: []byte{0xE2, byte(i + 1), 0x01}}
		e.callers = append(e.callers, p)
		bal = append(bal, ledgertest.Balance{Account: icrc3.Account{Owner: p}, Amount: icrc3.NatFromUint64(1_000_000_000_000)})
	}
	if e.ledger, err = srv.NewLedger(ledgertest.LedgerConfig{InitialBalances: bal}); err != nil {
		t.Fatal(err)
	}
	return e
}

// closeWindows advances the ledger clock past every window opened so far
// (the daemon's default TW + drift are 24 h + 2 min).
func (e *ledgerEnv) closeWindows() { e.srv.Advance(24*time.Hour + 5*time.Minute) }

// intentClass is what should become of an intent.
type intentClass int

const (
	// classFound: executed before the intent is published.
	classFound intentClass = iota
	// classAbsent: never executed; absent once the window closes.
	classAbsent
	// classLate: executed after the intent was published (a same-bytes
	// retry inside the window): not_yet, then found.
	classLate
	// classInvalid: no created_at_time (E_NO_STAMP).
	classInvalid
	numClasses
)

func (c intentClass) String() string {
	return [...]string{"found", "absent", "late", "invalid"}[c]
}

// plannedIntent is an intent and what the ledger did with it.
type plannedIntent struct {
	ID       string
	Class    intentClass
	Canister string
	Caller   principal.Principal
	Arg      icrc1.TransferArg
	Body     []byte

	executed bool
	block    uint64
}

// plan makes an icrc1_transfer intent of class c; n makes it unique.
func (e *ledgerEnv) plan(id string, c intentClass, n int) *plannedIntent {
	caller := e.callers[n%len(e.callers)]
	memo := []byte(id)
	amount := uint64(1000 + n)
	var stamp any
	arg := icrc1.TransferArg{To: icrc3.Account{Owner: e.to}.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(amount)), Memo: &memo}
	if c != classInvalid {
		s := e.srv.Now()
		arg.CreatedAtTime = &s
		stamp = strconv.FormatUint(s, 10)
	}
	body, err := json.Marshal(map[string]any{
		"intent_id": id, "canister_id": e.ledger.ID().Encode(), "method": "icrc1_transfer",
		"caller": caller.Encode(), "after": "Err.TooOld",
		"args": map[string]any{
			"from_subaccount": nil, "to": icrc3.Account{Owner: e.to}.String(),
			"amount": strconv.FormatUint(amount, 10), "fee": nil,
			"memo": hex.EncodeToString(memo), "created_at_time": stamp,
		},
	})
	if err != nil {
		panic(err) // strings and maps only
	}
	return &plannedIntent{ID: id, Class: c, Canister: e.ledger.ID().Encode(), Caller: caller, Arg: arg, Body: body}
}

// execute runs the planned transfer on the ledger (as the tool layer's call
// whose reply was lost) and records its block.
func (e *ledgerEnv) execute(t testing.TB, p *plannedIntent) {
	t.Helper()
	if p.executed {
		return
	}
	idx, err := e.ledger.Transfer(p.Caller, p.Arg)
	if err != nil {
		t.Fatalf("execute %s: %v", p.ID, err)
	}
	p.executed, p.block = true, idx
}

// planMix plans n intents whose classes cycle through all four, in the
// order shuffle (a seeded source's) gives them.
func (e *ledgerEnv) planMix(prefix string, n int, shuffle func(n int, swap func(i, j int))) []*plannedIntent {
	ps := make([]*plannedIntent, n)
	for i := range n {
		ps[i] = e.plan(fmt.Sprintf("%s-%03d", prefix, i), intentClass(i%int(numClasses)), i)
	}
	shuffle(n, func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	return ps
}

// ---------------------------------------------------------------- verdicts

// verdictFeed follows the verdict stream from its start, as a tool layer
// would, and lets a test wait for a condition on everything seen so far.
type verdictFeed struct {
	mu      sync.Mutex
	seen    map[uint64]bool // stream sequences: a consumer reset may repeat some
	byID    map[string][]reconciled.Verdict
	n       int
	bad     []string
	waiters []*feedWaiter
}

type feedWaiter struct {
	cond func(byID map[string][]reconciled.Verdict, n int) bool
	ch   chan struct{}
}

func followVerdicts(t testing.TB, ctx context.Context, js jetstream.JetStream) *verdictFeed {
	t.Helper()
	f := &verdictFeed{seen: map[uint64]bool{}, byID: map[string][]reconciled.Verdict{}}
	cons, err := js.OrderedConsumer(ctx, queue.VerdictsStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(f.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return f
}

func (f *verdictFeed) add(msg jetstream.Msg) {
	md, err := msg.Metadata()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.bad = append(f.bad, fmt.Sprintf("message on %s without metadata: %v", msg.Subject(), err))
		return
	}
	if f.seen[md.Sequence.Stream] {
		return
	}
	f.seen[md.Sequence.Stream] = true
	var v reconciled.Verdict
	if err := json.Unmarshal(msg.Data(), &v); err != nil {
		f.bad = append(f.bad, fmt.Sprintf("stream seq %d: %v", md.Sequence.Stream, err))
		return
	}
	f.byID[v.IntentID] = append(f.byID[v.IntentID], v)
	f.n++
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.cond(f.byID, f.n) {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}

// when returns a channel closed once cond holds (cond runs under the feed's
// lock and must not block).
func (f *verdictFeed) when(cond func(byID map[string][]reconciled.Verdict, n int) bool) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &feedWaiter{cond: cond, ch: make(chan struct{})}
	if cond(f.byID, f.n) {
		close(w.ch)
	} else {
		f.waiters = append(f.waiters, w)
	}
	return w.ch
}

func (f *verdictFeed) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// atLeast is closed once n verdicts have been seen.
func (f *verdictFeed) atLeast(n int) <-chan struct{} {
	return f.when(func(_ map[string][]reconciled.Verdict, got int) bool { return got >= n })
}

// waitSettled waits until every intent of ps that want selects has a final
// verdict; after timeout it fails the test with the ones still open.
func (f *verdictFeed) waitSettled(t testing.TB, ps []*plannedIntent, want func(*plannedIntent) bool, timeout time.Duration, diag func() string) {
	t.Helper()
	if !f.settledWithin(t, ps, want, timeout, diag) {
		t.FailNow()
	}
}

// settledWithin is waitSettled that reports a timeout as an error and
// returns false, so the caller can go on and show what follows.
func (f *verdictFeed) settledWithin(t testing.TB, ps []*plannedIntent, want func(*plannedIntent) bool, timeout time.Duration, diag func() string) bool {
	t.Helper()
	open := func(byID map[string][]reconciled.Verdict) []string {
		var ids []string
		for _, p := range ps {
			if !want(p) {
				continue
			}
			vs := byID[p.ID]
			if len(vs) == 0 || !vs[len(vs)-1].Final {
				last := "none"
				if len(vs) > 0 {
					last = describeOne(vs[len(vs)-1])
				}
				ids = append(ids, fmt.Sprintf("%s(%s,last=%s)", p.ID, p.Class, last))
			}
		}
		return ids
	}
	done := f.when(func(byID map[string][]reconciled.Verdict, _ int) bool { return len(open(byID)) == 0 })
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
	}
	f.mu.Lock()
	ids := open(f.byID)
	f.mu.Unlock()
	extra := ""
	if diag != nil {
		extra = "\n" + diag()
	}
	t.Errorf("after %s, %d intents have no final verdict on the stream: %v%s", timeout, len(ids), ids, extra)
	return false
}

func (f *verdictFeed) problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bad...)
}

// readVerdictStream reads the whole verdict stream afresh (not through
// the feed), in stream order, one message at a time by sequence: a get is
// retried on its own when a cluster is still electing a stream leader.
func readVerdictStream(ctx context.Context, js jetstream.JetStream) (map[string][]reconciled.Verdict, int, error) {
	out := map[string][]reconciled.Verdict{}
	var info *jetstream.StreamInfo
	err := retryTransient(ctx, func() error {
		st, err := js.Stream(ctx, queue.VerdictsStream)
		if err != nil {
			return err
		}
		info, err = st.Info(ctx)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("verdict stream info: %w", err)
	}
	n := 0
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		var raw *jetstream.RawStreamMsg
		err := retryTransient(ctx, func() error {
			st, err := js.Stream(ctx, queue.VerdictsStream)
			if err != nil {
				return err
			}
			raw, err = st.GetMsg(ctx, seq)
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, n, fmt.Errorf("verdict stream seq %d: %w", seq, err)
		}
		var v reconciled.Verdict
		if err := json.Unmarshal(raw.Data, &v); err != nil {
			return nil, n, fmt.Errorf("verdict stream seq %d: %w", seq, err)
		}
		if want := "reconcile.verdicts." + v.IntentID; raw.Subject != want {
			return nil, n, fmt.Errorf("verdict of %s on subject %s", v.IntentID, raw.Subject)
		}
		out[v.IntentID] = append(out[v.IntentID], v)
		n++
	}
	return out, n, nil
}

// retryTransient retries op for up to 20 s while it fails with anything
// but "not found" (a JetStream request can time out or find no responder
// while a cluster moves a leader).
func retryTransient(ctx context.Context, op func() error) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := op()
		if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
			time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// waitQueueDrained waits until the intent stream holds no intent: each was
// acknowledged (or terminated, or given up after MaxDeliver) and the
// daemons purged it (they purge below every consumer's ack floor at most a
// second after an ack, and at start and stop). An ack lost in a crash or a server restart
// brings its intent back after the ack wait, to be answered from the
// store; one that stays means an intent nobody will settle.
func waitQueueDrained(t testing.TB, ctx context.Context, js jetstream.JetStream, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var info *jetstream.StreamInfo
		err := retryTransient(ctx, func() error {
			st, err := js.Stream(ctx, queue.IntentsStream)
			if err != nil {
				return err
			}
			info, err = st.Info(ctx)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d intents still in the intent stream after %s (stream seqs %d..%d)", info.State.Msgs, timeout,
				info.State.FirstSeq, info.State.LastSeq)
			return
		}
		<-tick.C
	}
}

// checkHistories checks one place's verdict histories against the plan:
// every intent has seqs 1..n without gaps or repeats, exactly one final
// verdict and it is the last, nothing final before it, and the final
// verdict is the truth (a wrong absent makes a person pay twice).
func checkHistories(t testing.TB, where string, hist map[string][]reconciled.Verdict, ps []*plannedIntent) {
	t.Helper()
	known := map[string]bool{}
	for _, p := range ps {
		known[p.ID] = true
		vs := hist[p.ID]
		if len(vs) == 0 {
			t.Errorf("%s: %s (%s): no verdict", where, p.ID, p.Class)
			continue
		}
		for i, v := range vs {
			if v.Seq != uint64(i+1) {
				t.Errorf("%s: %s: verdict #%d has seq %d: %s", where, p.ID, i+1, v.Seq, describe(vs))
				break
			}
			if v.IntentID != p.ID {
				t.Errorf("%s: %s: verdict #%d names intent %s", where, p.ID, i+1, v.IntentID)
			}
			if v.Final != v.Status.Final() {
				t.Errorf("%s: %s: seq %d status %s with final=%v", where, p.ID, v.Seq, v.Status, v.Final)
			}
			if i < len(vs)-1 && v.Final {
				t.Errorf("%s: %s: final verdict seq %d is followed by more: %s", where, p.ID, v.Seq, describe(vs))
			}
		}
		last := vs[len(vs)-1]
		if !last.Final {
			t.Errorf("%s: %s (%s): no final verdict: %s", where, p.ID, p.Class, describe(vs))
			continue
		}
		switch p.Class {
		case classFound, classLate:
			if last.Status != reconciled.StatusFound || last.Block == nil || uint64(last.Block.Index) != p.block {
				t.Errorf("%s: %s (%s, executed at block %d): final verdict %s", where, p.ID, p.Class, p.block, describeOne(last))
			}
		case classAbsent:
			if last.Status != reconciled.StatusAbsent {
				t.Errorf("%s: %s (never executed): final verdict %s", where, p.ID, describeOne(last))
			}
		case classInvalid:
			if last.Status != reconciled.StatusInvalid || last.Reason == nil || last.Reason.Code != "E_NO_STAMP" {
				t.Errorf("%s: %s (no stamp): final verdict %s", where, p.ID, describeOne(last))
			}
		}
	}
	for id := range hist {
		if !known[id] {
			t.Errorf("%s: verdicts of an intent nobody published: %s %s", where, id, describe(hist[id]))
		}
	}
}

// sameHistories checks that two places hold the same verdicts, seq by seq.
func sameHistories(t testing.TB, whereA string, a map[string][]reconciled.Verdict, whereB string, b map[string][]reconciled.Verdict) {
	t.Helper()
	ids := map[string]bool{}
	for id := range a {
		ids[id] = true
	}
	for id := range b {
		ids[id] = true
	}
	for id := range ids {
		da, db := describe(a[id]), describe(b[id])
		if da != db {
			t.Errorf("%s: %s in %s but %s in %s", id, da, whereA, db, whereB)
		}
	}
}

func describeOne(v reconciled.Verdict) string {
	s := fmt.Sprintf("[%d %s", v.Seq, v.Status)
	if v.Block != nil {
		s += fmt.Sprintf(" @%d", uint64(v.Block.Index))
	}
	if v.Reason != nil {
		s += " " + v.Reason.Code
	}
	return s + "]"
}

func describe(vs []reconciled.Verdict) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString(describeOne(v))
	}
	return b.String()
}

// ---------------------------------------------------------------- store

// storeSnapshot opens a stopped daemon's store and returns every intent's
// verdict history, the number of watched intents, and the integrity report.
func storeSnapshot(t testing.TB, ctx context.Context, dataDir string, ps []*plannedIntent) (map[string][]reconciled.Verdict, int, string) {
	t.Helper()
	st, err := store.Open(ctx, filepath.Join(dataDir, "reconciled.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	report, err := st.IntegrityCheck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]reconciled.Verdict{}
	for _, p := range ps {
		vs, err := st.Verdicts(ctx, p.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("store %s: verdicts of %s: %v", dataDir, p.ID, err)
		}
		if len(vs) > 0 {
			out[p.ID] = vs
		}
	}
	ws, err := st.Watches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return out, len(ws), report
}

// storeVerdictCount counts the verdicts in a running daemon's store
// through a read-only connection of its own.
func storeVerdictCount(ctx context.Context, dataDir string) (int, error) {
	return storeCount(ctx, dataDir, "verdicts")
}

// storeCount counts the rows of a table of a running daemon's store.
func storeCount(ctx context.Context, dataDir, table string) (int, error) {
	u := url.URL{Scheme: "file", Path: filepath.Join(dataDir, "reconciled.db"),
		RawQuery: "mode=ro&_pragma=busy_timeout(5000)"}
	db, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(u.String(), "file://"))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n)
	return n, err
}

// ---------------------------------------------------------------- daemon

// daemonArgs are the flags of one `reconciled serve` process.
type daemonArgs struct {
	NATSURL  string
	ICURL    string
	DataDir  string
	Instance string
	Poll     time.Duration
	Replicas int
	// AckWait is how soon an intent held by a killed daemon is redelivered
	// (the daemon's default is 30 s).
	AckWait time.Duration
	// LeaseTTL is how soon another instance follows up the ledgers of a
	// killed daemon (the daemon's default is 15 s).
	LeaseTTL time.Duration
	// Extra flags, last.
	Extra []string
}

func (a daemonArgs) flags() []string {
	poll := a.Poll
	if poll == 0 {
		poll = 100 * time.Millisecond
	}
	f := []string{"serve", "--nats-url", a.NATSURL, "--ic-url", a.ICURL, "--fetch-root-key",
		"--data", a.DataDir, "--http", "127.0.0.1:0", "--instance", a.Instance,
		"--poll-interval", poll.String(), "--grace", "5s", "--log-level", "info"}
	if a.AckWait > 0 {
		f = append(f, "--ack-wait", a.AckWait.String())
	}
	if a.LeaseTTL > 0 {
		f = append(f, "--lease-ttl", a.LeaseTTL.String())
	}
	if a.Replicas > 0 {
		f = append(f, "--stream-replicas", strconv.Itoa(a.Replicas))
	}
	return append(f, a.Extra...)
}

// daemonProc is one `reconciled serve` subprocess.
type daemonProc struct {
	*child
	t       testing.TB
	logPath string
}

// startDaemonProc starts the daemon binary; its output is appended to
// logPath, so one file tells the story of every restart on a data dir.
func startDaemonProc(t testing.TB, a daemonArgs, logPath string) *daemonProc {
	t.Helper()
	bin := daemonBinary(t)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(logf, "---- start %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(a.flags(), " "))
	c := startChild(t, bin, a.flags(), nil, logf, func() { logf.Close() })
	return &daemonProc{child: c, t: t, logPath: logPath}
}

// terminate sends SIGTERM and expects a clean exit within timeout.
func (p *daemonProc) terminate(timeout time.Duration) {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.dumpStacks()
		p.t.Fatalf("daemon did not stop within %s of SIGTERM; its stacks are in %s\n%s", timeout, p.logPath, logTail(p.logPath, 40))
	}
	if p.waitErr != nil {
		p.t.Fatalf("daemon exit after SIGTERM: %v\n%s", p.waitErr, logTail(p.logPath, 40))
	}
}

// dumpStacks makes a stuck daemon write every goroutine's stack to its log
// (SIGQUIT) and exit, for the failure report.
func (p *daemonProc) dumpStacks() {
	p.signal(syscall.SIGQUIT)
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.kill()
	}
}

// exited reports an exit nobody asked for.
func (p *daemonProc) exited() <-chan struct{} { return p.done }

// logTail returns the last n lines of a log file, for failure messages.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log %s: %v)", path, err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return "log tail " + path + ":\n" + strings.Join(lines, "\n")
}

// logLines counts the lines of a log file that contain every one of words.
func logLines(path string, words ...string) int { return len(logMatches(path, words...)) }

// logMatches returns the lines of a log file that contain every one of words.
func logMatches(path string, words ...string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, w := range words {
			if !strings.Contains(line, w) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// classCounts summarises a plan for logs.
func classCounts(ps []*plannedIntent) string {
	m := map[string]int{}
	for _, p := range ps {
		m[p.Class.String()]++
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
