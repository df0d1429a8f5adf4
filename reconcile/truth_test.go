package reconcile_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

// The truth test: generated scenarios (truth_gen_test.go) run by the
// driver (truth_driver_test.go) in worlds of the rig (truth_rig_test.go),
// each verdict judged by the oracle (truth_oracle_test.go). This file holds
// the tests and their tally.

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
