package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icphistory"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// TestTruth checks the engine's verdicts against the ledger's own record
// of what executed, over thousands of generated scenarios (truth_gen_test.go).
// Every verdict must be allowed by docs/design.md#statuses at the moment it was decided;
// once every window has closed and every fault is lifted, every intent must
// have a correct final verdict. One wrong verdict fails the test with the
// world's seed and the scenario's full story, replayable with
// -truth.seed and -truth.world.
func TestTruth(t *testing.T) {
	n := *truthN
	tl, ok := runTruthWorlds(t, n, newWorldCfg)
	if !ok {
		return
	}
	if tl.finals < tl.scenarios {
		t.Fatalf("only %d final verdicts were checked for %d scenarios", tl.finals, tl.scenarios)
	}
	t.Logf("coverage: %v", tl.cover)
	if n < 2000 {
		return // too few scenarios to expect every rare combination
	}
	// A generator that silently stopped producing a kind of scenario would
	// leave the checks above vacuous for it.
	want := []string{"http", "archived", "var:none:absent"}
	for o := opKind(0); o < nOps; o++ {
		want = append(want, "op:"+o.String())
	}
	for o := outcome(0); o < nOutcomes; o++ {
		want = append(want, "out:"+o.String())
	}
	// Variations that stay the same call by docs/design.md#matching (none = zero
	// subaccount, an intent without fee) must have been found as well.
	for _, v := range []variation{varNone, varTo, varSubaccount, varFee} {
		want = append(want, "var:"+v.String()+":found")
	}
	for _, v := range []variation{varCaller, varMemo, varAmount, varTo, varSubaccount, varFee} {
		want = append(want, "var:"+v.String()+":absent")
	}
	for _, k := range want {
		if tl.cover[k] == 0 {
			t.Errorf("no scenario covered %q", k)
		}
	}
	// Every adversary must have acted on verdicts (the world index assigns
	// them round-robin, see newWorldCfg).
	advs := []string{"verify:queries", "verify:queries:lagging", "intent:bad_expiry", "config:narrow_window",
		"history:reinstall:memory", "history:restart:memory", "history:reinstall:sqlite", "history:restart:sqlite"}
	for f := faultKind(0); f < nFaults; f++ {
		advs = append(advs, "fault:"+f.String())
	}
	for _, k := range advs {
		if a := tl.adv[k]; a == nil || a.under == 0 {
			t.Errorf("adversary %q decided no verdict", k)
		}
	}
}

// runTruthWorlds runs n scenarios in worlds made by cfgOf and reports
// their tally; ok is false when only one world was replayed.
func runTruthWorlds(t *testing.T, n int, cfgOf func(seed int64, idx int) worldCfg) (_ *tally, ok bool) {
	worlds := (n + perWorld - 1) / perWorld
	start := time.Now()
	var tl tally
	t.Run("worlds", func(t *testing.T) {
		for wi := 0; wi < worlds; wi++ {
			if *truthWorld >= 0 && wi != *truthWorld {
				continue
			}
			cfg := cfgOf(*truthSeed, wi)
			size := min(perWorld, n-wi*perWorld)
			t.Run(fmt.Sprintf("w%04d", wi), func(t *testing.T) {
				t.Parallel()
				w := newWorld(t, cfg)
				if testing.Verbose() && *truthWorld >= 0 {
					t.Log(cfg)
				}
				w.run(size)
				w.tally.closeWorld(cfg)
				tl.add(&w.tally)
				for i, p := range w.problems {
					if i == 5 {
						t.Errorf("... and %d more wrong verdicts in world %d", len(w.problems)-i, wi)
						break
					}
					t.Errorf("wrong verdict (replay: go test ./reconcile -run 'TestTruth' -truth.seed=%d -truth.n=%d -truth.world=%d)\n%s\n%s",
						*truthSeed, n, wi, cfg, p)
				}
			})
		}
	})
	t.Logf("truth: seed %d, %s in %s\n%s", *truthSeed, tl.String(), time.Since(start).Round(time.Millisecond), tl.advTable())
	if testing.Verbose() || n > 10_000 {
		fmt.Printf("truth: seed %d, %s in %s\n%s", *truthSeed, tl.String(), time.Since(start).Round(time.Millisecond), tl.advTable())
	}
	if tl.scenarios == 0 {
		t.Fatal("no scenario ran")
	}
	if *truthWorld >= 0 {
		return &tl, false
	}
	return &tl, true
}

// TestTruthICP is TestTruth on the ICP-style ledger, read as the ICP
// ledger's history family (-truth.icpn scenarios).
func TestTruthICP(t *testing.T) {
	tl, ok := runTruthWorlds(t, *truthICPN, newICPWorldCfg)
	if !ok {
		return
	}
	if tl.finals < tl.scenarios {
		t.Fatalf("only %d final verdicts were checked for %d scenarios", tl.finals, tl.scenarios)
	}
	for o := opKind(0); o < nOps; o++ {
		if tl.cover["op:"+o.String()] == 0 && *truthICPN >= 2000 {
			t.Errorf("no scenario covered op %s", o)
		}
	}
	if *truthICPN < 2000 {
		return
	}
	// The adversaries the ICP family meets (newICPWorldCfg) must all have
	// acted on verdicts.
	for _, k := range []string{"intent:bad_expiry", "config:narrow_window", "fault:omit_block", "fault:alter_block",
		"fault:lag_blocks", "fault:wrong_key", "fault:lie_minting_account",
		"history:reinstall:memory", "history:restart:memory", "history:reinstall:sqlite", "history:restart:sqlite"} {
		if a := tl.adv[k]; a == nil || a.under == 0 {
			t.Errorf("adversary %q decided no verdict", k)
		}
	}
}

// tally counts what a run checked.
type tally struct {
	mu        sync.Mutex
	worlds    int
	scenarios int
	verdicts  map[reconciled.Status]int
	finals    int // correct final verdicts checked after every window closed
	executed  int // scenarios whose intent the ledger really executed
	underF    int // verdicts decided while a fault was active
	wrong     int
	// cover counts what the scenarios exercised: "op:<op>", "out:<outcome>",
	// "var:<variation>:<final status>", "http", "archived".
	cover map[string]int
	// adv counts per adversary (worldCfg.adversaries): a world's scenarios,
	// finals and wrong verdicts count for each adversary it has; under and
	// finalsUnder count the verdicts decided while the adversary acted.
	adv map[string]*advCount
}

type advCount struct {
	worlds, scenarios, under, finalsUnder, finals, wrong int
}

func (t *tally) advOf(k string) *advCount {
	if t.adv == nil {
		t.adv = map[string]*advCount{}
	}
	a := t.adv[k]
	if a == nil {
		a = &advCount{}
		t.adv[k] = a
	}
	return a
}

// underAdv counts a verdict decided while adversary k acted.
func (t *tally) underAdv(k string, final bool) {
	a := t.advOf(k)
	a.under++
	if final {
		a.finalsUnder++
	}
}

// closeWorld credits the world's totals to each of its adversaries.
func (t *tally) closeWorld(cfg worldCfg) {
	for _, k := range cfg.adversaries() {
		t.advOf(k).add(advCount{worlds: 1, scenarios: t.scenarios, finals: t.finals, wrong: t.wrong})
	}
}

func (a *advCount) add(o advCount) {
	a.worlds += o.worlds
	a.scenarios += o.scenarios
	a.under += o.under
	a.finalsUnder += o.finalsUnder
	a.finals += o.finals
	a.wrong += o.wrong
}

// advTable is the per-adversary table of a run.
func (t *tally) advTable() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.adv))
	for k := range t.adv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%-32s %7s %10s %12s %12s %14s %6s\n", "adversary", "worlds", "scenarios", "under it", "finals under", "finals checked", "wrong")
	for _, k := range keys {
		a := t.adv[k]
		fmt.Fprintf(&b, "%-32s %7d %10d %12d %12d %14d %6d\n", k, a.worlds, a.scenarios, a.under, a.finalsUnder, a.finals, a.wrong)
	}
	return b.String()
}

func (t *tally) covered(k string) {
	if t.cover == nil {
		t.cover = map[string]int{}
	}
	t.cover[k]++
}

func (t *tally) count(s reconciled.Status) {
	if t.verdicts == nil {
		t.verdicts = map[reconciled.Status]int{}
	}
	t.verdicts[s]++
}

func (t *tally) add(o *tally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.worlds += o.worlds
	t.scenarios += o.scenarios
	t.finals += o.finals
	t.executed += o.executed
	t.underF += o.underF
	t.wrong += o.wrong
	if t.verdicts == nil {
		t.verdicts = map[reconciled.Status]int{}
	}
	for k, v := range o.verdicts {
		t.verdicts[k] += v
	}
	for k, v := range o.cover {
		if t.cover == nil {
			t.cover = map[string]int{}
		}
		t.cover[k] += v
	}
	for k, v := range o.adv {
		t.advOf(k).add(*v)
	}
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var st []string
	for _, s := range []reconciled.Status{reconciled.StatusFound, reconciled.StatusAbsent, reconciled.StatusNotYet, reconciled.StatusUnreadable, reconciled.StatusInvalid} {
		st = append(st, fmt.Sprintf("%s=%d", s, t.verdicts[s]))
	}
	return fmt.Sprintf("%d worlds, %d scenarios (%d executed), verdicts: %s (%d under faults), finals checked: %d, wrong: %d",
		t.worlds, t.scenarios, t.executed, strings.Join(st, " "), t.underF, t.finals, t.wrong)
}

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
		h = icphistory.Choose(c)
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

// run plays the world's timeline: two batches of scenarios twelve hours
// apart, decide rounds while windows are open, retries, a fault in the
// open phase and one after the first batch's windows closed, and final
// rounds once every window has closed.
func (w *world) run(n int) {
	g := &gen{r: w.r, w: w, zero: make([]byte, 32)}
	w.batch(g, 0, n/2)
	w.round("batch0-open", w.eng, nil, false, nil)
	w.retry(0, outDup, outLate)
	w.round("batch0-after-retries", w.eng, nil, false, nil)

	w.srv.Advance(12 * time.Hour)
	w.batch(g, 1, n-n/2)
	w.round("batch1-open", w.eng, nil, false, nil)
	w.retry(1, outDup, outLate)
	w.faultRounds("open", w.cfg.faults[0], -1)
	if w.cfg.narrow {
		// A configured window narrower than the ledger's is refused: no
		// verdict of any intent may be decided on it.
		narrow := reconcile.LedgerConfig{TW: time.Hour}
		if w.r.IntN(2) == 0 {
			narrow = reconcile.LedgerConfig{Drift: 10 * time.Second}
		}
		w.round("narrow-config", w.newEngineOn(reconcile.NewMemCache(), narrow), &activeFault{kind: faultNarrow}, false, nil)
	}

	w.closeBatch(0)
	w.retry(0, outTooOld)
	w.round("batch0-closed", w.eng, nil, false, nil)
	if w.cfg.verify == icrc3.VerifyQueries {
		w.lagQueries(0)
	}
	var last *reconcile.Engine
	if w.cfg.history != "" {
		w.changeHistory(g)
		before := w.historyChanges()
		w.round("history-changed", w.eng, nil, false, nil)
		if w.historyChanges() == before {
			w.tally.wrong++
			w.problems = append(w.problems, "the new history under the same canister id was not detected as a history change")
		}
		w.eng = w.restart()
		w.round("history-restarted", w.eng, nil, false, nil)
		last = w.eng
	} else {
		last = w.faultRounds("closed", w.cfg.faults[1], 1)
	}

	w.closeBatch(1)
	w.retry(1, outTooOld)
	w.round("final-warm", w.eng, nil, true, nil)
	w.round("final-after-fault", last, nil, true, nil)
	w.round("final-cold", w.newEngine(), nil, true, nil)
	w.checkBad()
}

// changeHistory puts a new history under the world's canister id: the
// ledger reinstalled on the same replica and clock, or a new replica from
// the same seed (same keys, same ids) whose clock restarts earlier than the
// old chain's newest blocks. The long-lived engine keeps its cache across
// it (a restart when the replica is new). The new history re-funds the
// second batch's callers and executes a random half of their calls again;
// from here on the new ledger's executions are the truth. Verdicts already
// final stay as published, so nothing checks them against the new truth.
func (w *world) changeHistory(g *gen) {
	oldNow, cfg, id := w.srv.Now(), w.cfg.ledger, w.l.ID()
	if w.cfg.history == "reinstall" {
		// On the same replica the id must be named; a new replica from the
		// same seed hands out the same ids in the same order (and naming
		// one there would let the first archive take it again).
		cfg.ID = id
	}
	if w.cfg.history == "restart" {
		w.srv.Close()
		srv, err := ledgertest.NewServer(ledgertest.WithSeed(int64(w.cfg.seed)))
		if err != nil {
			w.t.Fatal(err)
		}
		w.srv = srv
		// Earlier than the old chain's newest blocks, yet late enough for
		// the second batch's stamps to be inside the ledger's window.
		earlier := 1 + w.r.Uint64N(uint64(6*time.Hour))
		if target := oldNow - earlier; target > srv.Now() {
			srv.Advance(time.Duration(target - srv.Now()))
		}
	}
	l, err := installLedger(w.srv, cfg, w.cfg.icp)
	if err != nil {
		w.t.Fatal(err)
	}
	if !l.ID().Equal(id) || !l.MintingAccount().Equal(w.mint) {
		w.t.Fatalf("%s: the new history is not under the same canister and minting account", w.cfg)
	}
	w.l = l
	if w.cfg.history == "restart" {
		w.eng = w.restart()
	}
	if err := w.l.GenerateHistory(w.r.IntN(3*w.cfg.background), int64(w.cfg.seed%1_000_000)*100+99, time.Hour); err != nil {
		w.t.Fatalf("%s: history: %v", w.cfg, err)
	}
	for _, s := range w.scens {
		if s.batch != 1 {
			continue
		}
		for _, f := range s.setup {
			f()
		}
		if w.r.IntN(2) == 0 {
			s.logf("new history at %d: executed again: %s", w.srv.Now(), w.exec(s.sent))
		} else {
			s.logf("new history at %d: not executed", w.srv.Now())
		}
	}
}

// checkBad decides the malformed twins: every one must be invalid with
// E_BAD_EXPIRY, refused by the parser (expiry 0) or by the engine.
func (w *world) checkBad() {
	if len(w.bad) == 0 {
		return
	}
	var ins []*matcher.Intent
	var at []badIntent
	for _, b := range w.bad {
		in, err := matcher.ParseIntent(b.raw)
		if err != nil {
			var me *matcher.Error
			if !errors.As(err, &me) || me.Code != matcher.CodeBadExpiry {
				w.badProblem(b, fmt.Sprintf("refused by the parser with %v, want %s", err, matcher.CodeBadExpiry))
				continue
			}
			w.tally.count(reconciled.StatusInvalid)
			w.tally.underAdv("intent:bad_expiry", true)
			w.tally.finals++
			continue
		}
		ins, at = append(ins, in), append(at, b)
	}
	if len(ins) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	vs, err := w.newEngine().DecideMany(ctx, ins)
	if err != nil {
		w.t.Fatalf("%s: malformed intents: %v", w.cfg, err)
	}
	for i, v := range vs {
		w.tally.count(v.Status)
		w.tally.underAdv("intent:bad_expiry", v.Final)
		if v.Status != reconciled.StatusInvalid || !v.Final || v.Reason == nil || v.Reason.Code != matcher.CodeBadExpiry {
			vj, _ := json.Marshal(v)
			w.badProblem(at[i], fmt.Sprintf("verdict %s, want invalid %s", vj, matcher.CodeBadExpiry))
			continue
		}
		w.tally.finals++
	}
}

func (w *world) badProblem(b badIntent, p string) {
	w.tally.wrong++
	w.problems = append(w.problems, fmt.Sprintf("malformed twin of %s\n  body: %s\n  %s", w.scens[b.scen], b.raw, p))
}

// batch draws, executes and publishes k scenarios, with background
// history between chunks of them.
func (w *world) batch(g *gen, b, k int) {
	for i := 0; i < k; i++ {
		if i%25 == 0 {
			w.chunks++
			if err := w.l.GenerateHistory(w.cfg.background, int64(w.cfg.seed%1_000_000)*100+int64(w.chunks), time.Hour); err != nil {
				w.t.Fatalf("%s: history: %v", w.cfg, err)
			}
		}
		w.srv.Advance(time.Duration(w.r.Int64N(int64(2 * time.Second))))
		s := g.scenario(len(w.scens), b)
		if s.sendNow {
			w.send(s)
		}
		s.raw = s.intent.intentJSON(fmt.Sprintf("w%d-s%d", w.cfg.idx, s.idx), w.l.ID(), "unknown")
		in, err := matcher.ParseIntent(s.raw)
		if err != nil {
			w.t.Fatalf("%s: harness built an invalid intent %s: %v", w.cfg, s.raw, err)
		}
		w.scens = append(w.scens, s)
		w.ins = append(w.ins, in)
		w.tally.scenarios++
		if w.r.IntN(1000) < w.cfg.badExpiry {
			w.bad = append(w.bad, badIntent{scen: s.idx, raw: w.badTwin(s)})
		}
	}
}

// badTwin is s's intent under another id with an ingress_expiry that no
// envelope of the call can have had.
func (w *world) badTwin(s *scenario) []byte {
	var body map[string]any
	if err := json.Unmarshal(s.intent.intentJSON(fmt.Sprintf("w%d-s%d-bad", w.cfg.idx, s.idx), w.l.ID(), "unknown"), &body); err != nil {
		w.t.Fatal(err)
	}
	exp := uint64(0)
	if from := s.intent.stamp() - uint64(2*time.Minute); w.r.IntN(2) == 0 {
		exp = from - 1 - w.r.Uint64N(uint64(time.Hour))
	}
	body["ingress_expiry"] = fmt.Sprint(exp)
	b, err := json.Marshal(body)
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

// send executes the scenario's call once; its reply is lost, so the tool
// layer cannot know the block index.
func (w *world) send(s *scenario) {
	if !s.http {
		if arm := w.exec(s.sent); arm != "Ok" {
			w.t.Fatalf("%s: %s\nthe original call failed: %s", w.cfg, s, arm)
		}
		s.logf("executed at %d (go)", w.srv.Now())
		return
	}
	before := len(w.l.Executions())
	ag, err := w.srv.NewAgent(s.id)
	if err != nil {
		w.t.Fatal(err)
	}
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{LoseReplies: true})
	var res any
	switch {
	case s.sent.xfer != nil:
		res = new(icrc1.TransferResult)
		err = ag.Call(w.l.ID(), s.sent.method, []any{*s.sent.xfer}, []any{res})
	case s.sent.appr != nil:
		res = new(icrc1.ApproveResult)
		err = ag.Call(w.l.ID(), s.sent.method, []any{*s.sent.appr}, []any{res})
	default:
		res = new(icrc1.TransferFromResult)
		err = ag.Call(w.l.ID(), s.sent.method, []any{*s.sent.tf}, []any{res})
	}
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{})
	if err == nil {
		w.t.Fatalf("%s: %s\nthe reply was not lost: %+v", w.cfg, s, res)
	}
	if after := len(w.l.Executions()); after != before+1 {
		w.t.Fatalf("%s: %s\nthe call over HTTP did not execute (%v)", w.cfg, s, err)
	}
	s.logf("executed at %d over HTTP, reply lost (%v)", w.srv.Now(), firstLine(err))
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// exec runs c Go-side as its caller and names the result's arm.
func (w *world) exec(c call) string {
	var err error
	switch {
	case c.xfer != nil:
		_, err = w.l.Transfer(c.caller, *c.clone().xfer)
	case c.appr != nil:
		_, err = w.l.Approve(c.caller, *c.clone().appr)
	default:
		_, err = w.l.TransferFrom(c.caller, *c.clone().tf)
	}
	if err == nil {
		return "Ok"
	}
	var te *icrc1.TransferError
	var ae *icrc1.ApproveError
	var fe *icrc1.TransferFromError
	switch {
	case errors.As(err, &te):
		return armName(te.Duplicate != nil, te.TooOld != nil, err)
	case errors.As(err, &ae):
		return armName(ae.Duplicate != nil, ae.TooOld != nil, err)
	case errors.As(err, &fe):
		return armName(fe.Duplicate != nil, fe.TooOld != nil, err)
	}
	return err.Error()
}

func armName(dup, tooOld bool, err error) string {
	switch {
	case dup:
		return "Duplicate"
	case tooOld:
		return "TooOld"
	}
	return err.Error()
}

// retry replays the sent bytes of batch b's scenarios with the given
// outcomes: a duplicate inside the window, the late first execution, or a
// retry after the ledger's window (TooOld).
func (w *world) retry(b int, outs ...outcome) {
	for _, s := range w.scens {
		if s.batch != b {
			continue
		}
		for _, o := range outs {
			if s.out != o {
				continue
			}
			want := map[outcome]string{outDup: "Duplicate", outLate: "Ok", outTooOld: "TooOld"}[o]
			got := w.exec(s.sent)
			s.logf("retried at %d: %s", w.srv.Now(), got)
			if got != want {
				w.t.Fatalf("%s: %s\nretry answered %s, want %s", w.cfg, s, got, want)
			}
		}
	}
}

// closeBatch advances the clock past every window of batch b (stamp + TW +
// D, the engine's defaults) by a random margin of up to a minute.
func (w *world) closeBatch(b int) {
	var end uint64
	for _, s := range w.scens {
		if s.batch == b {
			end = max(end, s.intent.stamp()+uint64(24*time.Hour+2*time.Minute))
		}
	}
	target := end + 1 + w.r.Uint64N(uint64(time.Minute))
	if w.cfg.verify == icrc3.VerifyQueries {
		// Queries mode closes on the last block read, and no later than
		// certified time less the lag a replica answering queries may
		// have (icrc3's queriesLag).
		target += uint64(30 * time.Second)
	}
	if now := w.srv.Now(); target > now {
		w.srv.Advance(time.Duration(target - now))
	}
	if w.cfg.verify == icrc3.VerifyQueries {
		// A block past the windows' end, which no intent can match (it
		// carries no created_at_time): an idle ledger closes no window.
		w.mintTo(icrc3.Account{Owner: principal.Principal{Raw: []byte{0xcc, 0x02}}}, 1)
	}
}

// lagQueries decides a sample with a cold engine while the replica
// answering a queries-mode ledger's queries lags behind an execution of
// batch b, whose windows the certified time has closed, then every intent
// once it caught up. Only the blocks are that replica's word; the time
// comes from the subnet: a window must not close on a time the blocks read
// do not cover.
func (w *world) lagQueries(b int) {
	execs := w.l.Executions()
	cands := w.batchExecs(execs, b)
	if len(cands) == 0 {
		return
	}
	f := &activeFault{kind: faultLag, target: cands[w.r.IntN(len(cands))]}
	f.visible = f.target
	eng := w.newEngine()
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{LagBlocks: w.l.Len() - f.visible})
	w.round("lag-queries", eng, f, false, w.sample(faultSample))
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{})
	w.round("lag-queries-lifted", eng, nil, false, nil)
}

// batchExecs are the indexes of the stamped executions of batch b's calls,
// ascending.
func (w *world) batchExecs(execs []ledgertest.Execution, b int) []uint64 {
	var out []uint64
	for _, e := range execs {
		if !stamped(e) {
			continue
		}
		for _, s := range w.scens {
			if s.batch == b && e.Method == s.sent.method && execStamp(e) == s.sent.stamp() && bytes.Equal(e.Caller.Raw, s.sent.caller.Raw) {
				out = append(out, e.Index)
				break
			}
		}
	}
	return out
}

// activeFault is the fault on the ledger while a round was decided.
type activeFault struct {
	kind    faultKind
	target  uint64 // the block omitted or altered
	visible uint64 // LagBlocks: the chain length the lagging replica shows
}

func (f *activeFault) String() string {
	if f == nil {
		return "none"
	}
	return fmt.Sprintf("%s (block %d, visible %d)", f.kind, f.target, f.visible)
}

// faultRounds decides every intent with a cold engine while a fault is on,
// then again with the same engine once it is lifted; it returns that engine
// for the final rounds. The target is a block of a scenario's execution, so
// it lies inside some windows. lagBatch >= 0 restricts the target to
// executions of that batch (see lagTarget).
func (w *world) faultRounds(phase string, k faultKind, lagBatch int) *reconcile.Engine {
	execs := w.l.Executions()
	var cands []uint64
	for _, e := range execs {
		if stamped(e) {
			cands = append(cands, e.Index)
		}
	}
	eng := w.newEngine()
	if len(cands) == 0 {
		w.round("fault-"+phase+"-none", eng, nil, false, nil)
		return eng
	}
	f := &activeFault{kind: k, target: cands[w.r.IntN(len(cands))]}
	sample := w.sample(faultSample)
	var faults ledgertest.Faults
	switch k {
	case faultOmit:
		faults.OmitBlock = f.target + 1
	case faultAlter:
		faults.AlterBlock = f.target + 1
	case faultWrongKey:
		faults.WrongKey = true
	case faultLag:
		f.target = w.lagTarget(execs, lagBatch, f.target)
		f.visible = f.target
		faults.LagBlocks = w.l.Len() - f.visible
	case faultLieMinting:
		faults.LieMintingAccount = w.lieAccount(w.scens[sample[w.r.IntN(len(sample))]])
		faults.LoseReplies = w.cfg.certFails
	case faultLieBlockTypes:
		faults.LieBlockTypes = [...]string{"none", "1xfer", "2approve,107set_fee_collector"}[w.r.IntN(3)]
	case faultLieArchives:
		faults.LieArchives = true
	case faultLieProbes:
		faults.LieProbes = true
	}
	w.srv.SetFaults(w.l.ID(), faults)
	w.round("fault-"+phase+"-"+k.String(), eng, f, false, sample)
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{})
	w.round("fault-"+phase+"-lifted", eng, nil, false, nil)
	return eng
}

// lieAccount is the minting account a lying node names, by the world's
// lie: the caller-side account of s's intent (its transfer would be read as
// a mint), its recipient (a burn), none at all, or an account no call uses.
func (w *world) lieAccount(s *scenario) string {
	sub, _, _, _, to := s.intent.fields()
	switch w.cfg.lieMint {
	case "caller":
		return icrc3.Account{Owner: s.intent.caller, Subaccount: deref(*sub)}.String()
	case "recipient":
		return candidToAcct(*to).String()
	case "none":
		return "none"
	}
	return icrc3.Account{Owner: principal.Principal{Raw: []byte{0xcc, 0x01}}}.String()
}

// lagTarget picks the first block a lagging replica hides. The test
// replica certifies the current /time over the lagged tip, which no real
// replica can: a certificate vouches for the state at its time, and every
// block stamped before that time is in that state. Hiding blocks of a
// closed window under such a certificate would make "absent" unavoidable
// for any reader, so once windows have closed the lag only hides blocks of
// batch lagBatch, whose windows are still open.
func (w *world) lagTarget(execs []ledgertest.Execution, lagBatch int, def uint64) uint64 {
	if lagBatch < 0 {
		return def
	}
	ex := w.batchExecs(execs, lagBatch)
	if len(ex) == 0 {
		return w.l.Len()
	}
	first := ex[0]
	// Between the first execution of the batch and the tip.
	return first + w.r.Uint64N(w.l.Len()-first)
}

func stamped(e ledgertest.Execution) bool {
	switch a := e.Arg.(type) {
	case icrc1.TransferArg:
		return a.CreatedAtTime != nil
	case icrc1.ApproveArgs:
		return a.CreatedAtTime != nil
	case icrc1.TransferFromArgs:
		return a.CreatedAtTime != nil
	}
	return false
}

func execStamp(e ledgertest.Execution) uint64 {
	switch a := e.Arg.(type) {
	case icrc1.TransferArg:
		return *a.CreatedAtTime
	case icrc1.ApproveArgs:
		return *a.CreatedAtTime
	case icrc1.TransferFromArgs:
		return *a.CreatedAtTime
	}
	return 0
}

// faultSample is how many intents a round under a fault decides. Under a
// lying node every intent's scan re-reads down to the bad page, so a round
// of all intents costs intents × window pages; a sample keeps the test
// fast and still puts intents of both batches on the faulty ledger.
const faultSample = 48

// sample returns k distinct scenario indexes, ascending.
func (w *world) sample(k int) []int {
	idx := w.r.Perm(len(w.scens))
	if len(idx) > k {
		idx = idx[:k]
	}
	sort.Ints(idx)
	return idx
}

// round decides the published intents (those of subset, or all) with one
// DecideMany and checks each verdict against the executions recorded
// before it. final demands a final verdict of everyone (every window has
// closed, no fault is on).
func (w *world) round(name string, eng *reconcile.Engine, f *activeFault, isFinal bool, subset []int) {
	if subset == nil {
		subset = make([]int, len(w.scens))
		for i := range subset {
			subset[i] = i
		}
	}
	ins := make([]*matcher.Intent, len(subset))
	for k, i := range subset {
		ins[k] = w.ins[i]
	}
	execs := w.l.Executions()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before := w.srv.Now()
	t0 := time.Now()
	vs, err := w.decide(ctx, eng, name, ins)
	after := w.srv.Now()
	if testing.Verbose() && *truthWorld >= 0 {
		w.t.Logf("round %s: %d intents in %s", name, len(vs), time.Since(t0).Round(time.Microsecond))
	}
	if err != nil {
		w.t.Fatalf("%s: round %s: %v", w.cfg, name, err)
	}
	var advs []string
	switch {
	case f != nil && f.kind == faultNarrow:
		advs = append(advs, "config:narrow_window")
	case f != nil && name == "lag-queries":
		advs = append(advs, "verify:queries:lagging")
	case f != nil:
		advs = append(advs, "fault:"+f.kind.String())
	case strings.HasPrefix(name, "history-"):
		advs = append(advs, w.cfg.adversaries()[1])
	}
	if w.cfg.verify == icrc3.VerifyQueries {
		advs = append(advs, "verify:queries")
	}
	if w.cfg.joining {
		advs = append(advs, "decide:joining")
	}
	for k, v := range vs {
		s := w.scens[subset[k]]
		w.tally.count(v.Status)
		if f != nil {
			w.tally.underF++
		}
		for _, a := range advs {
			w.tally.underAdv(a, v.Final)
		}
		p := w.check(s, v, execs, after, f)
		if p == "" && isFinal {
			if !v.Final {
				p = "not final after every window closed and every fault was lifted"
			} else {
				w.tally.finals++
			}
		}
		if name == "final-cold" {
			if len(w.matching(s, execs)) > 0 {
				w.tally.executed++
			}
			w.tally.covered("op:" + s.op.String())
			w.tally.covered("out:" + s.out.String())
			w.tally.covered("var:" + s.vary.String() + ":" + string(v.Status))
			if s.http {
				w.tally.covered("http")
			}
			if v.Status == reconciled.StatusFound && len(w.l.Archives()) > 0 && uint64(v.Block.Index) <= w.l.Archives()[len(w.l.Archives())-1].End {
				w.tally.covered("archived")
			}
		}
		if p != "" {
			w.tally.wrong++
			vj, _ := json.Marshal(v)
			w.problems = append(w.problems, fmt.Sprintf("round %s (ledger time %d..%d, fault %s): %s\n%s\n  matching executions: %s\n  verdict: %s",
				name, before, after, f, p, s, w.describeMatches(s, execs), vj))
		}
	}
}

func (w *world) describeMatches(s *scenario, execs []ledgertest.Execution) string {
	var out []string
	for _, e := range w.matching(s, execs) {
		out = append(out, fmt.Sprintf("block %d at %d", e.Index, e.Time))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// check says what is wrong with verdict v of s, or "".
func (w *world) check(s *scenario, v reconciled.Verdict, execs []ledgertest.Execution, after uint64, f *activeFault) string {
	stamp := s.intent.stamp()
	from, to := stamp-uint64(2*time.Minute), stamp+uint64(24*time.Hour+2*time.Minute)
	if v.IntentID != w.ins[s.idx].ID {
		return fmt.Sprintf("verdict for %q", v.IntentID)
	}
	// A ledger that cannot even be detected gives no rules to compute the
	// window with; any other verdict carries it.
	if v.Window == nil && v.Status == reconciled.StatusUnreadable {
		return w.checkUnreadable(v, f)
	}
	if f != nil && f.kind == faultNarrow && v.Status != reconciled.StatusUnreadable {
		return fmt.Sprintf("%s decided on a configured window narrower than the ledger's", v.Status)
	}
	if v.Window == nil || uint64(v.Window.FromTS) != from || uint64(v.Window.ToTS) != to {
		return fmt.Sprintf("window %+v, want [%d, %d]", v.Window, from, to)
	}
	if p := w.checkWindowBlocks(v, from, to); p != "" {
		return p
	}
	matches := w.matching(s, execs)
	var ct uint64
	if v.Evidence != nil && v.Evidence.CertifiedTime != nil {
		ct = uint64(*v.Evidence.CertifiedTime)
	}
	if v.Status != reconciled.StatusUnreadable && v.Status != reconciled.StatusInvalid {
		if ct == 0 || ct > after {
			return fmt.Sprintf("certified time %d is missing or after the ledger's clock %d", ct, after)
		}
	}
	switch v.Status {
	case reconciled.StatusFound:
		if !v.Final || v.Block == nil {
			return "found without a block or not final"
		}
		for _, e := range matches {
			if e.Index == uint64(v.Block.Index) {
				return ""
			}
		}
		return fmt.Sprintf("found block %d, which is no execution of the intent", v.Block.Index)
	case reconciled.StatusAbsent:
		switch {
		case !v.Final:
			return "absent but not final"
		case len(matches) > 0:
			return "absent, but the ledger executed the intent"
		case ct <= to:
			return fmt.Sprintf("absent while the window was open (certified time %d <= to %d)", ct, to)
		}
		return ""
	case reconciled.StatusNotYet:
		if v.Final {
			return "not_yet marked final"
		}
		if ct > to {
			return fmt.Sprintf("not_yet after the window closed (certified time %d > to %d)", ct, to)
		}
		for _, e := range matches {
			if f != nil && f.kind == faultLag && e.Index >= f.visible {
				continue // the lagging replica's tip does not reach it yet
			}
			return fmt.Sprintf("not_yet, but block %d below the certified tip executes the intent", e.Index)
		}
		return ""
	case reconciled.StatusUnreadable:
		return w.checkUnreadable(v, f)
	}
	return fmt.Sprintf("status %q for a valid intent", v.Status)
}

// checkWindowBlocks says what is wrong with the window's first and last
// blocks that v names, or "": the first block of the ledger at or after
// from, and the last at or before to that the decision's certified tip
// reaches. Blocks without a timestamp are in no window.
func (w *world) checkWindowBlocks(v reconciled.Verdict, from, to uint64) string {
	fb, lb := v.Window.FirstBlock, v.Window.LastBlock
	if (fb == nil) != (lb == nil) {
		return fmt.Sprintf("window blocks %v..%v: one of them missing", fb, lb)
	}
	if fb == nil || w.cfg.icp || v.Evidence == nil || v.Evidence.TipIndex == nil {
		return ""
	}
	tsAt := func(i uint64) uint64 {
		b, ok := w.l.Block(i)
		if !ok {
			return 0
		}
		return ts(b)
	}
	f, l, tip := uint64(*fb), uint64(*lb), uint64(*v.Evidence.TipIndex)
	if f > l || l > tip {
		return fmt.Sprintf("window blocks %d..%d, certified tip %d", f, l, tip)
	}
	if t := tsAt(f); t == 0 || t < from {
		return fmt.Sprintf("window's first block %d has ts %d, before the window's start %d", f, t, from)
	}
	if t := tsAt(l); t == 0 || t > to {
		return fmt.Sprintf("window's last block %d has ts %d, after the window's end %d", l, t, to)
	}
	for i := f; i > 0; i-- {
		if t := tsAt(i - 1); t != 0 {
			if t >= from {
				return fmt.Sprintf("window's first block %d, but block %d has ts %d >= %d", f, i-1, t, from)
			}
			break
		}
	}
	for i := l + 1; i <= tip; i++ {
		if t := tsAt(i); t != 0 {
			if t <= to {
				return fmt.Sprintf("window's last block %d, but block %d below the tip has ts %d <= %d", l, i, t, to)
			}
			break
		}
	}
	return ""
}

func (w *world) checkUnreadable(v reconciled.Verdict, f *activeFault) string {
	if f == nil {
		return fmt.Sprintf("unreadable without a fault: %+v", v.Reason)
	}
	if f.kind == faultNarrow && (v.Reason == nil || v.Reason.Code != "E_LEDGER_CONFIG") {
		return fmt.Sprintf("unreadable under a narrow configured window with %+v, want E_LEDGER_CONFIG", v.Reason)
	}
	if v.Reason == nil || v.Reason.Code == "" {
		return "unreadable without a reason"
	}
	return ""
}

// matching returns the executions that are the intent's call by docs/design.md#matching.
// It reads the ledger's record of calls, never blocks and never the
// matcher: the same caller and method, the same arguments with an absent
// subaccount equal to the all-zero one, and the fee compared only when the
// intent set one (against what the ledger charged).
func (w *world) matching(s *scenario, execs []ledgertest.Execution) []ledgertest.Execution {
	var out []ledgertest.Execution
	for _, e := range execs {
		if w.sameCall(s.intent, e) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

func (w *world) sameCall(in call, e ledgertest.Execution) bool {
	if e.Method != in.method || !bytes.Equal(e.Caller.Raw, in.caller.Raw) {
		return false
	}
	switch a := e.Arg.(type) {
	case icrc1.TransferArg:
		b := in.xfer
		fromSide := icrc3.Account{Owner: in.caller, Subaccount: deref(b.FromSubaccount)}
		feeless := candidToAcct(b.To).Equal(w.mint) || fromSide.Equal(w.mint)
		return sameSub(a.FromSubaccount, b.FromSubaccount) && sameAcct(a.To, b.To) && natEq(a.Amount, b.Amount) &&
			memoEq(a.Memo, b.Memo) && u64Eq(a.CreatedAtTime, b.CreatedAtTime) && w.feeOK(b.Fee, feeless)
	case icrc1.ApproveArgs:
		b := in.appr
		return sameSub(a.FromSubaccount, b.FromSubaccount) && sameAcct(a.Spender, b.Spender) && natEq(a.Amount, b.Amount) &&
			optNatEq(a.ExpectedAllowance, b.ExpectedAllowance) && u64Eq(a.ExpiresAt, b.ExpiresAt) &&
			memoEq(a.Memo, b.Memo) && u64Eq(a.CreatedAtTime, b.CreatedAtTime) && w.feeOK(b.Fee, false)
	case icrc1.TransferFromArgs:
		b := in.tf
		feeless := candidToAcct(b.To).Equal(w.mint)
		return sameSub(a.SpenderSubaccount, b.SpenderSubaccount) && sameAcct(a.From, b.From) && sameAcct(a.To, b.To) &&
			natEq(a.Amount, b.Amount) && memoEq(a.Memo, b.Memo) && u64Eq(a.CreatedAtTime, b.CreatedAtTime) && w.feeOK(b.Fee, feeless)
	}
	return false
}

// feeOK: an intent's fee, when set, must be what the ledger charged — its
// fee for transfers and approves, nothing for mints and burns.
func (w *world) feeOK(fee *idl.Nat, feeless bool) bool {
	if fee == nil {
		return true
	}
	want := new(big.Int).SetUint64(w.fee)
	if feeless {
		want.SetUint64(0)
	}
	return fee.BigInt().Cmp(want) == 0
}

func deref(p *[]byte) []byte {
	if p == nil {
		return nil
	}
	return *p
}

func candidToAcct(c icrc3.CandidAccount) icrc3.Account {
	return icrc3.Account{Owner: c.Owner, Subaccount: deref(c.Subaccount)}
}

// sameSub: ICRC-1 subaccount equality (none equals 32 zero bytes).
func sameSub(a, b *[]byte) bool {
	norm := func(p *[]byte) []byte {
		if p == nil {
			return make([]byte, 32)
		}
		return *p
	}
	return bytes.Equal(norm(a), norm(b))
}

func sameAcct(a, b icrc3.CandidAccount) bool {
	return bytes.Equal(a.Owner.Raw, b.Owner.Raw) && sameSub(a.Subaccount, b.Subaccount)
}

func natEq(a, b idl.Nat) bool {
	x, y := a.BigInt(), b.BigInt()
	if x == nil {
		x = new(big.Int)
	}
	if y == nil {
		y = new(big.Int)
	}
	return x.Cmp(y) == 0
}

func optNatEq(a, b *idl.Nat) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return natEq(*a, *b)
}

// memoEq: an absent memo differs from an empty one.
func memoEq(a, b *[]byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return bytes.Equal(*a, *b)
}

func u64Eq(a, b *uint64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// TestTruthCatchesWrongVerdicts shows that the checks can fail: on a small
// world whose windows have all closed, each true final verdict is forged
// into wrong ones, and every forgery must be reported.
func TestTruthCatchesWrongVerdicts(t *testing.T) {
	w := newWorld(t, newWorldCfg(*truthSeed, 0))
	w.run(40)
	for _, p := range w.problems {
		t.Fatal(p)
	}
	execs := w.l.Executions()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vs, err := w.eng.DecideMany(ctx, w.ins)
	if err != nil {
		t.Fatal(err)
	}
	after := w.srv.Now()
	var found, absent int
	for i, v := range vs {
		s := w.scens[i]
		if p := w.check(s, v, execs, after, nil); p != "" {
			t.Fatalf("true verdict rejected: %s\n%s", p, s)
		}
		var forged []reconciled.Verdict
		unreadable := v
		unreadable.Status, unreadable.Final, unreadable.Reason = reconciled.StatusUnreadable, false, &reconciled.Reason{Code: "E_CHAIN", Message: "forged"}
		notYet := v
		notYet.Status, notYet.Final, notYet.Block = reconciled.StatusNotYet, false, nil
		forged = append(forged, unreadable, notYet)
		switch v.Status {
		case reconciled.StatusFound:
			found++
			a := v
			a.Status, a.Block = reconciled.StatusAbsent, nil
			other := v
			blk := *v.Block
			blk.Index++
			other.Block = &blk
			forged = append(forged, a, other)
		case reconciled.StatusAbsent:
			absent++
			f := v
			f.Status = reconciled.StatusFound
			f.Block = &reconciled.BlockRef{Index: reconciled.U64(execs[len(execs)-1].Index)}
			forged = append(forged, f)
		}
		for _, fv := range forged {
			if w.check(s, fv, execs, after, nil) == "" {
				t.Errorf("forged %s verdict passed the checks (true: %s)\n%s", fv.Status, v.Status, s)
			}
		}
	}
	if found == 0 || absent == 0 {
		t.Fatalf("the small world has %d found and %d absent verdicts: too few to test the checks", found, absent)
	}
}
