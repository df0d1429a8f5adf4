package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// rig is one daemon wired in-process by the daemon package, exactly as
// `reconciled serve` wires it, in front of one test replica and one
// embedded NATS server, plus the tool layer's own NATS connection. It
// differs from serve only where a test needs a handle: a query timeout on
// the agent's HTTP client, short unreadable backoff, and a gauge around
// each ledger's history that records how many reads of one ledger overlap.
// With NoDaemon it starts none of its own, and the fleet and restart
// tests start instances as deployed (instance).
type rig struct {
	*daemontest.Rig
	t       *testing.T
	ctx     context.Context
	srv     *ledgertest.Server
	tool    *queue.Conn
	d       *daemon.Daemon
	st      *store.Store
	metrics *reconcile.Metrics
	logs    *daemontest.LogBuffer

	// handlers records how many intake handlers ran at once.
	handlers readGauge

	mu     sync.Mutex
	gauges map[string]*readGauge
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
	// NoDaemon starts the replica, NATS and the tool layer only: a test of
	// several instances, or of one restarted on its data dir, starts its
	// daemons with instance. d, st and metrics stay nil.
	NoDaemon bool
}

// payer pays from a funded account; payee receives. Fixed keys keep every
// run's principals the same.
var (
	payer = principal.NewSelfAuthenticating(bytes.Repeat([]byte{0xa1}, 44))
	payee = principal.NewSelfAuthenticating(bytes.Repeat([]byte{0xb0}, 44))
)

func newRig(t *testing.T, o rigOpts) *rig {
	t.Helper()
	r := &rig{t: t, gauges: map[string]*readGauge{}}
	r.Rig = daemontest.New(t, daemontest.Options{Seed: 21, Instance: "e2e", Poll: o.Poll, QueryTimeout: o.QueryTimeout,
		MaxInflight: o.MaxInflight, MaxMsgBytes: o.MaxMsgBytes, NoDaemon: o.NoDaemon,
		Tune: func(_ *daemon.Config, do *daemon.Options) {
			// serve keeps the defaults (2 s doubling to 5 min); a fault
			// lifted in a test should be noticed on the next triggered round.
			do.BackoffBase, do.BackoffMax = 5*time.Millisecond, 20*time.Millisecond
			do.History = func(ledger string, h reconcile.History) reconcile.History {
				r.mu.Lock()
				defer r.mu.Unlock()
				g := r.gauges[ledger]
				if g == nil {
					g = &readGauge{}
					r.gauges[ledger] = g
				}
				return gaugedHistory{History: h, g: g}
			}
			do.Intake = func(next queue.Handler) queue.Handler {
				return func(ctx context.Context, dl *queue.Delivery) {
					defer r.handlers.enter()()
					next(ctx, dl)
				}
			}
		}})
	r.ctx, r.srv, r.tool, r.d, r.logs = r.Ctx, r.Replica, r.Tool, r.Daemon, r.Logs
	if r.d != nil {
		r.st, r.metrics = r.d.Store(), r.d.Metrics()
	}
	return r
}

// followUp asks for a follow-up round now.
func (r *rig) followUp() { r.d.FollowUpNow() }

func (r *rig) client(ledger principal.Principal) *icrc3history.Client {
	return r.d.Client(ledger.Encode())
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
	r.Publish(canister, queue.IntentMsgID(id, matcher.IntentHash(body)), body)
}

// wait returns the first verdict of id that satisfies until, reading the
// verdict stream from the intent's latest verdict on.
func (r *rig) wait(id string, until func(reconciled.Verdict) bool) reconciled.Verdict {
	r.t.Helper()
	return r.Wait(id, until)
}

// settle waits for a verdict of id satisfying until while asking for a
// follow-up round every few milliseconds: a watch becomes due only after
// its backoff, so one trigger may come too early.
func (r *rig) settle(id string, until func(reconciled.Verdict) bool) reconciled.Verdict {
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

func verdictAny(reconciled.Verdict) bool     { return true }
func verdictFinal(v reconciled.Verdict) bool { return v.Final }

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
	return ledgertest.TransferArg{To: icrc3.Account{Owner: payee}.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(p.amount)),
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
	reconcile.History
	g *readGauge
}

func (h gaugedHistory) Tip(ctx context.Context) (icrc3.Tip, error) {
	defer h.g.enter()()
	return h.History.Tip(ctx)
}

func (h gaugedHistory) Blocks(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	defer h.g.enter()()
	return h.History.Blocks(ctx, start, end, fn)
}

func (h gaugedHistory) BlocksDesc(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	defer h.g.enter()()
	return h.History.BlocksDesc(ctx, start, end, fn)
}

func (h gaugedHistory) BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error {
	defer h.g.enter()()
	return h.History.BlocksDescAbove(ctx, start, end, floor, fn)
}
