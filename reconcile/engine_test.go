package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
)

func u64p(v uint64) *uint64 { return &v }

func TestDecideFoundNotYetAbsent(t *testing.T) {
	e := newEnv(t, envOpt{})
	alice, bob := principalN(1), principalN(2)
	e.fund(acct(alice, nil), 1_000_000_000)
	stamp := e.srv.Now()

	paid := transferIntent{id: "paid", caller: alice, to: acct(bob, nil), amount: 150_000, memo: []byte("lunch"), stamp: stamp}
	idx, err := e.ledger.Transfer(alice, paid.arg())
	if err != nil {
		t.Fatal(err)
	}
	unpaid := paid
	unpaid.id, unpaid.memo = "unpaid", []byte("dinner")

	v := e.decide(e.intent(paid.json(e.ledger.ID())))
	if v.Status != reconciled.StatusFound || !v.Final || v.Block == nil || uint64(v.Block.Index) != idx {
		t.Fatalf("paid: got %+v, want found at %d", v, idx)
	}
	if v.Evidence == nil || v.Evidence.Verified != "certificate+chain" || v.Evidence.TipIndex == nil {
		t.Fatalf("paid: evidence %+v", v.Evidence)
	}

	v = e.decide(e.intent(unpaid.json(e.ledger.ID())))
	if v.Status != reconciled.StatusNotYet || v.Final {
		t.Fatalf("unpaid, window open: got %s, want not_yet", v.Status)
	}
	if len(v.NearMisses) != 1 || uint64(v.NearMisses[0].Index) != idx || v.NearMisses[0].Differs[0] != "memo" {
		t.Fatalf("unpaid: near misses %+v, want block %d differing in memo", v.NearMisses, idx)
	}
	// The near miss shows what the block moved, for support staff.
	if b := v.NearMisses[0].Block; b == nil || b.Amount != "150000" || b.Memo == nil || *b.Memo != "6c756e6368" ||
		b.To != acct(bob, nil).String() || b.From == "" || b.Kind != "1xfer" || b.TS == 0 {
		t.Fatalf("unpaid: near miss block values %+v", v.NearMisses[0].Block)
	}
	if want := stamp + uint64(24*time.Hour+2*time.Minute); uint64(v.Window.ToTS) != want {
		t.Fatalf("window to %d, want %d", v.Window.ToTS, want)
	}

	e.closeWindow()
	v = e.decide(e.intent(unpaid.json(e.ledger.ID())))
	if v.Status != reconciled.StatusAbsent || !v.Final {
		t.Fatalf("unpaid, window closed: got %s (%+v), want absent", v.Status, v.Reason)
	}
	// Closing the window does not turn a paid intent absent.
	v = e.decide(e.intent(paid.json(e.ledger.ID())))
	if v.Status != reconciled.StatusFound {
		t.Fatalf("paid after close: %s", v.Status)
	}
}

func TestDecideJustBeforeAndAfterClose(t *testing.T) {
	e := newEnv(t, envOpt{})
	alice := principalN(1)
	e.fund(acct(alice, nil), 1_000_000)
	stamp := e.srv.Now()
	in := e.intent(transferIntent{id: "x", caller: alice, to: acct(principalN(2), nil), amount: 5, stamp: stamp}.json(e.ledger.ID()))
	// The test clock runs with the wall clock, so the exact boundary is the
	// matcher's unit tests' business; here: a minute either side of it. The
	// DFINITY ledger's own window (24 h + 60 s) is already past, yet the
	// configured drift of 2 min keeps it open: wider is safe.
	end := stamp + uint64(24*time.Hour+2*time.Minute)
	e.srv.Advance(time.Duration(end-e.srv.Now()) - time.Minute)
	if v := e.decide(in); v.Status != reconciled.StatusNotYet {
		t.Fatalf("a minute before the window's end: %s, want not_yet", v.Status)
	}
	e.srv.Advance(2 * time.Minute)
	if v := e.decide(in); v.Status != reconciled.StatusAbsent {
		t.Fatalf("a minute after the window's end: %s, want absent", v.Status)
	}
}

func TestDecideIngressExpiryNarrowsWindow(t *testing.T) {
	e := newEnv(t, envOpt{})
	alice := principalN(1)
	e.fund(acct(alice, nil), 1_000_000)
	stamp := e.srv.Now()
	exp := stamp + uint64(5*time.Minute)
	in := e.intent(transferIntent{id: "x", caller: alice, to: acct(principalN(2), nil), amount: 5, stamp: stamp, ingressEx: &exp}.json(e.ledger.ID()))
	e.srv.Advance(6 * time.Minute)
	v := e.decide(in)
	if v.Status != reconciled.StatusAbsent || v.Window.NarrowedBy != "ingress_expiry" {
		t.Fatalf("got %s narrowed %q, want absent narrowed by ingress_expiry", v.Status, v.Window.NarrowedBy)
	}
}

func TestDecideInLongHistoryWithArchives(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    envOpt
	}{
		{"legacy-dfinity", envOpt{ledger: ledgertest.LedgerConfig{ArchiveThreshold: 2000, ArchiveBatch: 1000, ArchiveCapacity: 3000}}},
		{"icrc3-spec-legacytip", envOpt{ledger: ledgertest.LedgerConfig{ArchiveThreshold: 2000, ArchiveBatch: 1000, BlockStyle: ledgertest.StyleSpec, TipFormat: ledgertest.TipLegacy}, endpoint: icrc3.EndpointICRC3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.o)
			alice, bob := principalN(1), principalN(2)
			e.fund(acct(alice, nil), 1_000_000_000)
			// 3 days of history, then the payment, then a day more.
			if err := e.ledger.GenerateHistory(6000, 1, 72*time.Hour); err != nil {
				t.Fatal(err)
			}
			stamp := e.srv.Now()
			ti := transferIntent{id: "p", caller: alice, to: acct(bob, nil), amount: 42, stamp: stamp}
			idx, err := e.ledger.Transfer(alice, ti.arg())
			if err != nil {
				t.Fatal(err)
			}
			e.srv.Advance(2 * time.Hour)
			if err := e.ledger.GenerateHistory(3000, 2, time.Hour); err != nil {
				t.Fatal(err)
			}
			if len(e.ledger.Archives()) == 0 {
				t.Fatal("no archives: the test would not cover archive reads")
			}
			v := e.decide(e.intent(ti.json(e.ledger.ID())))
			if v.Status != reconciled.StatusFound || uint64(v.Block.Index) != idx {
				t.Fatalf("got %+v, want found at %d", v, idx)
			}
			// An unpaid intent stamped before the payment: its window reaches
			// back a drift before the stamp, into the generated history.
			miss := ti
			miss.id, miss.amount, miss.stamp = "miss", 43, stamp-uint64(time.Hour)
			e.closeWindow()
			v = e.decide(e.intent(miss.json(e.ledger.ID())))
			if v.Status != reconciled.StatusAbsent {
				t.Fatalf("miss: %s %+v", v.Status, v.Reason)
			}
			if v.Window.FirstBlock == nil || v.Window.LastBlock == nil {
				t.Fatalf("miss: window blocks not reported: %+v", v.Window)
			}
			first, _ := e.ledger.Block(uint64(*v.Window.FirstBlock))
			before, _ := e.ledger.Block(uint64(*v.Window.FirstBlock) - 1)
			if ts(first) < uint64(v.Window.FromTS) || ts(before) >= uint64(v.Window.FromTS) {
				t.Fatalf("first_block %d is not the window's first block", *v.Window.FirstBlock)
			}
		})
	}
}

func ts(v icrc3.Value) uint64 {
	t, _ := v.Get("ts")
	n, _ := t.Nat.Uint64()
	return n
}

func TestDecideSharedChainReadsBlocksOnce(t *testing.T) {
	e := newEnv(t, envOpt{ledger: ledgertest.LedgerConfig{ArchiveThreshold: 2000, ArchiveBatch: 1000}})
	alice := principalN(1)
	e.fund(acct(alice, nil), 1_000_000_000)
	if err := e.ledger.GenerateHistory(5000, 3, 30*time.Hour); err != nil {
		t.Fatal(err)
	}
	stamp := e.srv.Now() - uint64(20*time.Hour)
	base := e.ledger.Counters().BlocksServed
	var first uint64
	for i := 0; i < 20; i++ {
		in := e.intent(transferIntent{id: "i" + string(rune('a'+i)), caller: alice, to: acct(principalN(2), nil), amount: uint64(i + 1), stamp: stamp + uint64(i)*uint64(time.Minute)}.json(e.ledger.ID()))
		if v := e.decide(in); v.Status != reconciled.StatusNotYet {
			t.Fatalf("intent %d: %s %+v", i, v.Status, v.Reason)
		}
		if i == 0 {
			first = e.ledger.Counters().BlocksServed - base
		}
	}
	total := e.ledger.Counters().BlocksServed - base
	if total > first*12/10 {
		t.Fatalf("20 overlapping intents fetched %d blocks, one scan %d: more than 1.2x", total, first)
	}
}

// noMinting hides the ledger's minting account, as a ledger that does not
// answer icrc1_minting_account would.
type noMinting struct{ *icrc3history.Client }

func (n noMinting) Detect(ctx context.Context) (icrc3.Features, error) {
	f, err := n.Client.Detect(ctx)
	f.MintingAccount = nil
	return f, err
}

func TestDecideMintWithoutMintingAccountIsNeverAbsent(t *testing.T) {
	e := newEnv(t, envOpt{})
	e.engine = reconcile.NewEngine(func(string) (reconcile.History, reconcile.LedgerConfig, error) {
		return noMinting{e.client}, reconcile.LedgerConfig{}, nil
	}, reconcile.NewMemCache(), nil)
	minter := e.ledger.MintingAccount().Owner
	stamp := e.srv.Now()
	ti := transferIntent{id: "mint", caller: minter, to: acct(principalN(3), nil), amount: 77, stamp: stamp}
	if _, err := e.ledger.Transfer(minter, ti.arg()); err != nil {
		t.Fatal(err)
	}
	e.closeWindow()
	v := e.decide(e.intent(ti.json(e.ledger.ID())))
	if v.Status != reconciled.StatusUnreadable || v.Reason == nil || v.Reason.Code != "E_NO_MINTING_ACCOUNT" {
		t.Fatalf("got %s %+v, want unreadable E_NO_MINTING_ACCOUNT", v.Status, v.Reason)
	}
	// With the minting account known (the ledger reports it), it is found.
	e2 := newEnv(t, envOpt{})
	minter2 := e2.ledger.MintingAccount().Owner
	ti.caller, ti.stamp = minter2, e2.srv.Now()
	if _, err := e2.ledger.Transfer(minter2, ti.arg()); err != nil {
		t.Fatal(err)
	}
	if v := e2.decide(e2.intent(ti.json(e2.ledger.ID()))); v.Status != reconciled.StatusFound || v.Block.Kind != "1mint" {
		t.Fatalf("mint with a known minting account: %s %+v", v.Status, v.Block)
	}
}

func TestReuseTipsSavesTipQueries(t *testing.T) {
	e := newEnv(t, envOpt{})
	alice := principalN(1)
	e.fund(acct(alice, nil), 1_000_000)
	in := e.intent(transferIntent{id: "x", caller: alice, to: acct(principalN(2), nil), amount: 5, stamp: e.srv.Now()}.json(e.ledger.ID()))
	tipQueries := func() uint64 { return e.srv.Stats().Queries(e.ledger.ID(), "icrc3_get_tip_certificate") }

	// Detection probes icrc3_get_tip_certificate once per client and its
	// reply serves the first tip: warm both.
	if _, err := e.client.Tip(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.engine.ReuseTips(time.Hour)
	before := tipQueries()
	for i := 0; i < 3; i++ {
		if v := e.decide(in); v.Status != reconciled.StatusNotYet {
			t.Fatalf("decision %d: %s", i, v.Status)
		}
	}
	if n := tipQueries() - before; n != 1 {
		t.Fatalf("3 decisions with tip reuse read %d tips, want 1", n)
	}
	// Without reuse every decision reads its own tip; and a reused tip is
	// never a reason to call a window closed that the fresh one keeps open.
	fresh := reconcile.NewEngine(func(string) (reconcile.History, reconcile.LedgerConfig, error) {
		return e.client, reconcile.LedgerConfig{}, nil
	}, reconcile.NewMemCache(), nil)
	before = tipQueries()
	for i := 0; i < 2; i++ {
		if v, err := fresh.Decide(context.Background(), in); err != nil || v.Status != reconciled.StatusNotYet {
			t.Fatalf("fresh decision: %v %v", v.Status, err)
		}
	}
	if n := tipQueries() - before; n != 2 {
		t.Fatalf("2 decisions without reuse read %d tips, want 2", n)
	}
	e.closeWindow()
	if v := e.decide(in); v.Status != reconciled.StatusNotYet {
		t.Fatalf("reused tip closed the window: %s", v.Status)
	}
	if v, err := e.engine.Decide(reconcile.FreshTip(context.Background()), in); err != nil || v.Status != reconciled.StatusAbsent {
		t.Fatalf("FreshTip after the window: %s %v, want absent", v.Status, err)
	}
	if v, _ := fresh.Decide(context.Background(), in); v.Status != reconciled.StatusAbsent {
		t.Fatalf("fresh tip after the window: %s, want absent", v.Status)
	}
}

func TestUnreadableVerdictsCarryTheirWindow(t *testing.T) {
	e := newEnv(t, envOpt{})
	alice := principalN(1)
	stamp := e.srv.Now()
	in := e.intent(transferIntent{id: "x", caller: alice, to: acct(principalN(2), nil), amount: 5, stamp: stamp}.json(e.ledger.ID()))
	// Certificates signed by a wrong key fail detection itself.
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{WrongKey: true, QueryReject: 5})
	v := e.decide(in)
	if v.Status != reconciled.StatusUnreadable || v.Window == nil || uint64(v.Window.ToTS) != stamp+uint64(24*time.Hour+2*time.Minute) {
		t.Fatalf("got %s window %+v, want unreadable with the window", v.Status, v.Window)
	}
}

func TestOneBadPageAnswersEveryIntentThatNeedsIt(t *testing.T) {
	e := newEnv(t, envOpt{ledger: ledgertest.LedgerConfig{ArchiveThreshold: 2000, ArchiveBatch: 1000}})
	alice := principalN(1)
	e.fund(acct(alice, nil), 1_000_000)
	if err := e.ledger.GenerateHistory(6000, 5, 30*time.Hour); err != nil {
		t.Fatal(err)
	}
	stamp := e.srv.Now() - uint64(20*time.Hour)
	var ins []*matcher.Intent
	for i := 0; i < 10; i++ {
		ins = append(ins, e.intent(transferIntent{id: fmt.Sprintf("i%d", i), caller: alice, to: acct(principalN(2), nil), amount: uint64(i + 1), stamp: stamp}.json(e.ledger.ID())))
	}
	// A lying node drops a block inside every window (one the ledger itself
	// still holds: archives have their own faults).
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{OmitBlock: e.ledger.Len() - 500 + 1})
	before := e.ledger.Counters().BlocksServed
	vs, err := e.engine.DecideMany(context.Background(), ins)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Status != reconciled.StatusUnreadable || v.Reason.Code != "E_CHAIN" {
			t.Fatalf("%s: %s %+v, want unreadable E_CHAIN", v.IntentID, v.Status, v.Reason)
		}
	}
	if served := e.ledger.Counters().BlocksServed - before; served > 2*uint64(e.ledger.Len()) {
		t.Fatalf("10 intents read %d blocks past one bad page", served)
	}
}
