package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3/ledgertest"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// rig is one daemon wired in-process the way `reconciled serve` wires it
// (store, NATS connection and streams, engine, service, follow-up loop,
// verdict importer, intake), in front of one test replica and one embedded
// NATS server, plus the tool layer's own NATS connection. It differs from
// serve only where a test needs a handle: a query timeout on the agent's
// HTTP client, short unreadable backoff, and a gauge around each ledger's
// history that records how many reads of one ledger overlap.
type rig struct {
	t       *testing.T
	ctx     context.Context
	srv     *ledgertest.Server
	emb     *queue.Embedded
	tool    *queue.Conn
	st      *store.Store
	conn    *queue.Conn
	svc     *reconcile.Service
	metrics *reconcile.Metrics
	intake  *queue.Intake
	trigger chan struct{}
	logs    *lockedBuffer

	// handlers records how many intake handlers ran at once.
	handlers readGauge

	mu      sync.Mutex
	clients map[string]*icrc3.Client
	gauges  map[string]*readGauge

	stopBG context.CancelFunc
	bg     sync.WaitGroup
}

type rigOpts struct {
	// QueryTimeout bounds each HTTP request of the agent (0: 3 s).
	QueryTimeout time.Duration
	// Poll is the follow-up period (0: one hour, so rounds run only when a
	// test triggers them).
	Poll time.Duration
	// MaxMsgBytes is the intake's size limit (0: serve's default, 32 KiB).
	MaxMsgBytes int
	// MaxInflight is the intake's handler count (0: serve's default, 4).
	MaxInflight int
}

// payer pays from a funded account; payee receives. Fixed keys keep every
// run's principals the same.
var (
	payer = principal.NewSelfAuthenticating(bytes.Repeat([]byte{0xa1}, 44))
	payee = principal.NewSelfAuthenticating(bytes.Repeat([]byte{0xb0}, 44))
)

func newRig(t *testing.T, o rigOpts) *rig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(21))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	emb, err := queue.StartEmbedded(queue.EmbeddedConfig{DataDir: filepath.Join(t.TempDir(), "nats")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	tool, err := queue.Connect(ctx, queue.ConnConfig{Embedded: emb, Name: "tool-layer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tool.Close)
	if err := tool.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, ctx: ctx, srv: srv, emb: emb, tool: tool, trigger: make(chan struct{}, 1),
		logs: &lockedBuffer{}, clients: map[string]*icrc3.Client{}, gauges: map[string]*readGauge{}}
	r.start(o)
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			t.Logf("daemon log:\n%s", r.logs.String())
		}
	})
	return r
}

func (r *rig) start(o rigOpts) {
	t := r.t
	if o.QueryTimeout == 0 {
		o.QueryTimeout = 3 * time.Second
	}
	if o.Poll == 0 {
		o.Poll = time.Hour
	}
	if o.MaxMsgBytes == 0 {
		o.MaxMsgBytes = 32 << 10
	}
	if o.MaxInflight == 0 {
		o.MaxInflight = 4
	}
	hc := &http.Client{Timeout: o.QueryTimeout, Transport: &http.Transport{Proxy: nil,
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext, MaxIdleConnsPerHost: 16}}
	ag, err := r.srv.NewAgentWithConfig(agent.Config{ClientConfig: []agent.ClientOption{agent.WithHttpClient(hc)}})
	if err != nil {
		t.Fatal(err)
	}
	enc := zap.NewProductionEncoderConfig()
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(r.logs), zap.DebugLevel))

	dir := t.TempDir()
	if r.st, err = store.Open(r.ctx, filepath.Join(dir, "reconciled.db")); err != nil {
		t.Fatal(err)
	}
	if r.conn, err = queue.Connect(r.ctx, queue.ConnConfig{Embedded: r.emb, Name: "reconciled-e2e", Logger: log}); err != nil {
		t.Fatal(err)
	}
	if err := r.conn.EnsureStreams(r.ctx); err != nil {
		t.Fatal(err)
	}
	sources := func(ledger string) (reconcile.History, reconcile.LedgerConfig, error) {
		id, err := principal.Decode(ledger)
		if err != nil {
			return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
		}
		c, err := icrc3.NewClient(icrc3.ClientConfig{Agent: ag, Ledger: id, Verify: icrc3.VerifyChain})
		if err != nil {
			return nil, reconcile.LedgerConfig{}, err
		}
		g := &readGauge{}
		r.mu.Lock()
		r.clients[ledger], r.gauges[ledger] = c, g
		r.mu.Unlock()
		return gaugedHistory{Client: c, g: g}, reconcile.LedgerConfig{}, nil
	}
	engine := reconcile.NewEngine(sources, r.st, log.Named("engine"))
	r.metrics = reconcile.NewMetrics()
	r.svc, err = reconcile.NewService(reconcile.ServiceConfig{
		Decider: engine, Store: store.ServiceStore{S: r.st}, Sink: queue.Sink{C: r.conn},
		Log: log.Named("service"), Metrics: r.metrics,
		// serve keeps the defaults (2 s doubling to 5 min); a fault lifted
		// in a test should be noticed on the next triggered round.
		BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Resume(r.ctx); err != nil {
		t.Fatal(err)
	}
	bg, stop := context.WithCancel(context.WithoutCancel(r.ctx))
	r.stopBG = stop
	r.bg.Add(2)
	go func() {
		defer r.bg.Done()
		r.svc.RunFollowUp(bg, o.Poll, r.trigger)
	}()
	go func() {
		defer r.bg.Done()
		err := r.conn.FollowVerdictMsgs(bg, queue.FollowConfig{Durable: "verdicts-e2e"},
			func(v reconcile.Verdict, h nats.Header) error {
				hdr, _ := queue.DecodeIntentHeaders(h)
				return r.svc.ImportVerdict(bg, v, hdr)
			})
		if err != nil && bg.Err() == nil {
			log.Error("verdict follower stopped", zap.Error(err))
		}
	}()
	r.intake, err = r.conn.ConsumeIntents(r.ctx, queue.IntakeConfig{MaxInFlight: o.MaxInflight, MaxMsgBytes: o.MaxMsgBytes},
		func(ctx context.Context, dl *queue.Delivery) {
			defer r.handlers.enter()()
			out := r.svc.HandleIntent(ctx, dl.Data)
			var err error
			switch out.Kind {
			case reconcile.Ack:
				err = dl.Ack(context.WithoutCancel(ctx))
			case reconcile.Term:
				err = dl.Term(out.Reason)
			default:
				err = dl.Nak(out.Delay)
			}
			if err != nil {
				log.Warn("settle intent delivery", zap.Error(err))
			}
		})
	if err != nil {
		t.Fatal(err)
	}
}

func (r *rig) stop() {
	if r.intake != nil {
		r.intake.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = r.intake.Wait(ctx)
		cancel()
		r.intake = nil
	}
	if r.stopBG != nil {
		r.stopBG()
		r.bg.Wait()
		r.stopBG = nil
	}
	if r.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = r.conn.Drain(ctx)
		cancel()
		r.conn = nil
	}
	if r.st != nil {
		_ = r.st.Close()
		r.st = nil
	}
}

// followUp asks for a follow-up round now.
func (r *rig) followUp() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

func (r *rig) client(ledger principal.Principal) *icrc3.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clients[ledger.Encode()]
}

func (r *rig) gaugeOf(ledger principal.Principal) *readGauge {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gauges[ledger.Encode()]
}

// publish puts the body of intent id on the intents subject of canister
// with the message id a tool layer gives it (<intent_id>:<intent_hash>).
func (r *rig) publish(canister, id string, body []byte) {
	r.t.Helper()
	if _, err := r.tool.JetStream().Publish(r.ctx, "reconcile.intents."+canister, body, jetstream.WithMsgID(queue.IntentMsgID(id, body))); err != nil {
		r.t.Fatalf("publish %s: %v", id, err)
	}
}

// wait returns the first verdict of id that satisfies until, reading the
// verdict stream from the intent's latest verdict on.
func (r *rig) wait(id string, until func(reconcile.Verdict) bool) reconcile.Verdict {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, 45*time.Second)
	defer cancel()
	var got reconcile.Verdict
	err := r.tool.WatchIntent(ctx, id, func(v reconcile.Verdict) error {
		if until(v) {
			got = v
			return queue.ErrStop
		}
		return nil
	})
	if err != nil {
		r.t.Fatalf("waiting for a verdict of %s: %v", id, err)
	}
	return got
}

// settle waits for a verdict of id satisfying until while asking for a
// follow-up round every few milliseconds: a watch becomes due only after
// its backoff, so one trigger may come too early.
func (r *rig) settle(id string, until func(reconcile.Verdict) bool) reconcile.Verdict {
	r.t.Helper()
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				r.followUp()
			}
		}
	}()
	return r.wait(id, until)
}

func verdictAny(reconcile.Verdict) bool     { return true }
func verdictFinal(v reconcile.Verdict) bool { return v.Final }

// archivedLedger makes a ledger that funds the payer and archives early
// (300 blocks on the ledger, archives of 400), so a history of a few
// hundred blocks already spans several archives.
func (r *rig) archivedLedger(cfg ledgertest.LedgerConfig) *ledgertest.Ledger {
	r.t.Helper()
	cfg.InitialBalances = append(cfg.InitialBalances,
		ledgertest.Balance{Account: icrc3.Account{Owner: payer}, Amount: icrc3.NatFromUint64(1_000_000_000_000)})
	if cfg.ArchiveThreshold == 0 {
		cfg.ArchiveThreshold, cfg.ArchiveBatch, cfg.ArchiveCapacity = 300, 200, 400
	}
	l, err := r.srv.NewLedger(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return l
}

// payment is one transfer by payer and its intent.
type payment struct {
	stamp  uint64
	amount uint64
	memo   string
}

func (p payment) arg() ledgertest.TransferArg {
	m := []byte(p.memo)
	s := p.stamp
	return ledgertest.TransferArg{To: icrc3.Account{Owner: payee}.ToCandid(), Amount: icrc3.IDLNat(icrc3.NatFromUint64(p.amount)),
		Memo: &m, CreatedAtTime: &s}
}

// intent is the tool layer's JSON for p on ledger.
func (p payment) intent(id string, ledger principal.Principal) map[string]any {
	return map[string]any{
		"intent_id": id, "canister_id": ledger.Encode(), "method": "icrc1_transfer", "caller": payer.Encode(),
		"args": map[string]any{"from_subaccount": nil, "to": payee.Encode(), "amount": strconv.FormatUint(p.amount, 10),
			"fee": nil, "memo": fmt.Sprintf("%x", p.memo), "created_at_time": strconv.FormatUint(p.stamp, 10)},
		"after": "Err.TooOld",
	}
}

func jsonOf(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// readGauge records how many reads of one ledger's history overlap.
type readGauge struct {
	mu       sync.Mutex
	cur, max int
	calls    int
}

func (g *readGauge) enter() func() {
	g.mu.Lock()
	g.cur++
	g.calls++
	g.max = max(g.max, g.cur)
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.cur--
		g.mu.Unlock()
	}
}

func (g *readGauge) snapshot() (maxOverlap, calls int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.max, g.calls
}

// gaugedHistory counts the engine's reads of verified history (tip and
// block pages); Detect is not a read of history.
type gaugedHistory struct {
	*icrc3.Client
	g *readGauge
}

func (h gaugedHistory) Tip(ctx context.Context) (icrc3.Tip, error) {
	defer h.g.enter()()
	return h.Client.Tip(ctx)
}

func (h gaugedHistory) Blocks(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	defer h.g.enter()()
	return h.Client.Blocks(ctx, start, end, fn)
}

func (h gaugedHistory) BlocksDesc(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	defer h.g.enter()()
	return h.Client.BlocksDesc(ctx, start, end, fn)
}

// lockedBuffer is a log sink safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *lockedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pollUntil polls cond (state no subscription announces) until it holds.
func pollUntil(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached; last state: %s", what, state)
		}
		<-tick.C
	}
}
