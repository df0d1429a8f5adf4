package reconcile_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/candid/idl"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/family"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// The truth test's rig: one test replica and ledger per world, its SQLite
// store and cache, and the engines that decide its scenarios' intents.

// world is one replica and ledger with its scenarios.
type world struct {
	t     testing.TB
	cfg   worldCfg
	r     *rand.Rand
	srv   *ledgertest.Server
	l     *ledgertest.Ledger
	mint  icrc3.Account
	fee   uint64
	eng   *reconcile.Engine // long-lived: its chain grows round by round
	scens []*scenario
	ins   []*matcher.Intent
	// cache outlives the long-lived engine's restarts: one MemCache, or a
	// SQLite store at dbPath reopened at each restart.
	cache  reconcile.BlockCache
	db     *store.Store
	dbPath string
	// metrics counts the history changes the world's engines detect.
	metrics *reconcile.Metrics
	// bad are intents with a malformed ingress_expiry, each the twin of a
	// scenario's intent.
	bad      []badIntent
	chunks   int
	tally    tally
	problems []string
}

// badIntent is an intent whose ingress_expiry no envelope of its call can
// have had: 0, or before stamp − drift. It must be invalid (E_BAD_EXPIRY),
// refused when parsed or when decided.
type badIntent struct {
	scen int
	raw  []byte
}

func newWorld(t testing.TB, cfg worldCfg) *world {
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(int64(cfg.seed)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := installLedger(srv, cfg.ledger, cfg.icp)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	fee, ok := l.Fee().Uint64()
	if !ok {
		t.Fatalf("ledger fee %s does not fit a uint64", l.Fee())
	}
	w := &world{t: t, cfg: cfg, r: rand.New(rand.NewPCG(cfg.seed, 0x776f726c64)), srv: srv, l: l, mint: l.MintingAccount(), fee: fee,
		metrics: reconcile.NewMetrics()}
	w.tally.worlds = 1
	// The testing package keeps finished subtests, and their cleanups, until
	// the whole test ends: drop the world's ledger and engines here so that
	// a long run holds one world per worker, not all of them.
	t.Cleanup(w.close)
	w.cache = reconcile.NewMemCache()
	if cfg.sqlite {
		dir, err := os.MkdirTemp("", "truth-world-")
		if err != nil {
			t.Fatal(err)
		}
		w.dbPath = filepath.Join(dir, "reconciled.db")
		w.reopenDB()
	}
	w.eng = w.newEngineOn(w.cache, reconcile.LedgerConfig{})
	return w
}

// installLedger installs the world's ledger on srv: an ICP-style one (read
// through its inner ledger, which executes the calls) or an ICRC one.
func installLedger(srv *ledgertest.Server, cfg ledgertest.LedgerConfig, icp bool) (*ledgertest.Ledger, error) {
	if !icp {
		return srv.NewLedger(cfg)
	}
	il, err := srv.NewICPLedger(cfg)
	if err != nil {
		return nil, err
	}
	return il.Inner(), nil
}

// close releases the world's replica and store as soon as it has run.
func (w *world) close() {
	if w.srv != nil {
		w.srv.Close()
	}
	if w.db != nil {
		_ = w.db.Close()
	}
	if w.dbPath != "" {
		_ = os.RemoveAll(filepath.Dir(w.dbPath))
	}
	w.srv, w.l, w.eng, w.scens, w.ins, w.cache, w.db, w.dbPath = nil, nil, nil, nil, nil, nil, nil, ""
}

// reopenDB closes the world's SQLite cache, if open, and opens it again: a
// daemon restart, as far as the cache is concerned.
func (w *world) reopenDB() {
	if w.db != nil {
		if err := w.db.Close(); err != nil {
			w.t.Fatal(err)
		}
	}
	db, err := store.Open(context.Background(), w.dbPath)
	if err != nil {
		w.t.Fatal(err)
	}
	w.db, w.cache = db, db
}

// restart is a daemon restart: a new engine and client on the world's
// lasting cache (reopened when it is SQLite).
func (w *world) restart() *reconcile.Engine {
	if w.cfg.sqlite {
		w.reopenDB()
	}
	return w.newEngineOn(w.cache, reconcile.LedgerConfig{})
}

// newEngine is a cold engine: its own agent, client and cache.
func (w *world) newEngine() *reconcile.Engine {
	return w.newEngineOn(reconcile.NewMemCache(), reconcile.LedgerConfig{})
}

// newEngineOn is an engine with its own agent and client on cache, with
// the ledger configured as cfg.
func (w *world) newEngineOn(cache reconcile.BlockCache, cfg reconcile.LedgerConfig) *reconcile.Engine {
	ag, err := w.srv.NewAgent(nil)
	if err != nil {
		w.t.Fatal(err)
	}
	c, err := icrc3history.NewClient(icrc3history.ClientConfig{Agent: ag, Ledger: w.l.ID(), RootKey: w.srv.RootKey(), Endpoint: w.cfg.endpoint, Verify: w.cfg.verify})
	if err != nil {
		w.t.Fatal(err)
	}
	id := w.l.ID().Encode()
	var h reconcile.History = c
	if w.cfg.icp {
		// As the daemon reads it: the family told by the endpoints.
		h = family.Choose(c)
	}
	eng := reconcile.NewEngine(func(ledger string) (reconcile.History, reconcile.LedgerConfig, error) {
		if ledger != id {
			return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
		}
		return h, cfg, nil
	}, cache, nil)
	eng.Observe(w.metrics)
	// Joining worlds let every intent of a round join its decision.
	eng.JoinRunning(time.Hour)
	return eng
}

// decide decides a round's intents: with one DecideMany, or in a joining
// world as a burst arrives, one intent starting the decision and the rest
// joining it one to four at a time, between the pages of its walk; those
// still waiting when it ends are decided next.
func (w *world) decide(ctx context.Context, eng *reconcile.Engine, round string, ins []*matcher.Intent) ([]reconciled.Verdict, error) {
	if !w.cfg.joining || len(ins) == 0 {
		return eng.DecideMany(ctx, ins)
	}
	r := rand.New(rand.NewPCG(w.cfg.seed, uint64(len(round))<<32|uint64(len(ins))))
	out := make([]reconciled.Verdict, len(ins))
	got := make([]bool, len(ins))
	next := 1
	join := func() []*matcher.Intent {
		// Often nothing new: the decision walks on and asks again after
		// its next page.
		if next == len(ins) || r.IntN(2) == 0 {
			return nil
		}
		k := min(len(ins)-next, 1+r.IntN(4))
		more := ins[next : next+k]
		next += k
		return more
	}
	err := eng.DecideJoining(ctx, ins[0].Canister.Encode(), ins[:1], reconcile.Joins{Take: join}, func(k int, v reconciled.Verdict) {
		if got[k] {
			w.t.Errorf("%s: round %s: intent %d answered twice", w.cfg, round, k)
		}
		got[k], out[k] = true, v
	})
	if err != nil {
		return nil, err
	}
	// Those that arrived after the decision stopped taking more are the
	// next decision's, as the service batches them.
	for next < len(ins) {
		rest := ins[next:]
		base := next
		next = len(ins)
		if err := eng.DecideJoining(ctx, rest[0].Canister.Encode(), rest, reconcile.Joins{}, func(k int, v reconciled.Verdict) {
			got[base+k], out[base+k] = true, v
		}); err != nil {
			return nil, err
		}
	}
	for k := range got {
		if !got[k] {
			return nil, fmt.Errorf("intent %d of %d got no verdict", k, len(ins))
		}
	}
	return out, nil
}

// historyChanges is the number of history changes the world's engines
// detected.
func (w *world) historyChanges() uint64 {
	var n uint64
	for _, r := range []string{"hash", "later_time", "lower_tip"} {
		n += w.metrics.Get(reconcile.MetricHistoryChanges, r)
	}
	return n
}

func (w *world) mintTo(a icrc3.Account, amount uint64) {
	arg := icrc1.TransferArg{FromSubaccount: optBytes(w.mint.Subaccount), To: a.ToCandid(), Amount: idl.NewNat(amount)}
	if _, err := w.l.Transfer(w.mint.Owner, arg); err != nil {
		w.t.Fatalf("%s: fund %s: %v", w.cfg, a, err)
	}
}

func (w *world) approve(from, spender icrc3.Account) {
	arg := icrc1.ApproveArgs{FromSubaccount: optBytes(from.Subaccount), Spender: spender.ToCandid(), Amount: idl.NewNat(uint64(1_000_000_000_000))}
	if _, err := w.l.Approve(from.Owner, arg); err != nil {
		w.t.Fatalf("%s: approve %s for %s: %v", w.cfg, from, spender, err)
	}
}

func optBytes(b []byte) *[]byte {
	if b == nil {
		return nil
	}
	c := bytes.Clone(b)
	return &c
}
