package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/reconcile"
)

// A payment whose blocks the block cache trimmed is still found, at the
// same block, by reading them from the ledger again; an unpaid intent of
// that window gets the verdict it got before the trim.
func TestTrimmedCacheRereadsAWindowFromTheLedger(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envOpt{page: 100})
	st := openStore(t)
	id := e.ledger.ID().Encode()
	eng := reconcile.NewEngine(func(ledger string) (reconcile.History, reconcile.LedgerConfig, error) {
		if ledger != id {
			return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
		}
		return e.client, reconcile.LedgerConfig{}, nil
	}, st, nil)
	e.engine = eng

	alice, bob := principalN(1), principalN(2)
	e.fund(acct(alice, nil), 1_000_000_000)
	pay := transferIntent{id: "paid", caller: alice, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
	if _, err := e.ledger.Transfer(alice, pay.arg()); err != nil {
		t.Fatal(err)
	}
	unpaid := pay
	unpaid.id, unpaid.amount = "unpaid", 6
	// Three hours of other blocks, the last two hours of them busy, and
	// the window closed.
	e.srv.Advance(time.Hour)
	if err := e.ledger.GenerateHistory(600, 5, time.Hour); err != nil {
		t.Fatal(err)
	}
	e.closeWindow()
	if err := e.ledger.GenerateHistory(600, 6, 2*time.Hour); err != nil {
		t.Fatal(err)
	}

	v := e.decide(e.intent(pay.json(e.ledger.ID())))
	if v.Status != reconciled.StatusFound || v.Block == nil {
		t.Fatalf("before the trim: %s %+v", v.Status, v.Reason)
	}
	at := uint64(v.Block.Index)
	un := e.decide(e.intent(unpaid.json(e.ledger.ID())))
	if un.Status != reconciled.StatusAbsent {
		t.Fatalf("unpaid before the trim: %s %+v", un.Status, un.Reason)
	}
	key := reconcile.HistoryKey(e.client.NetworkKey(), id, e.client.Mode())
	if _, _, ok, err := st.BlockAt(ctx, key, at); err != nil || !ok {
		t.Fatalf("the paying block %d is not cached before the trim (%v)", at, err)
	}

	// Keep one hour of ledger time below the newest block.
	n, err := eng.TrimCache(ctx, time.Hour, nil, 4)
	if err != nil || n == 0 {
		t.Fatalf("trimmed %d blocks, %v", n, err)
	}
	if _, _, ok, _ := st.BlockAt(ctx, key, at); ok {
		t.Fatalf("block %d is still cached after the trim", at)
	}
	r, _, _ := st.LoadRange(ctx, key)
	if r.Lo <= at {
		t.Fatalf("range %d..%d after the trim still reaches block %d", r.Lo, r.Hi, at)
	}

	before := e.client.Stats().Total
	again := pay
	again.id = "paid-again"
	v2 := e.decide(e.intent(again.json(e.ledger.ID())))
	if v2.Status != reconciled.StatusFound || v2.Block == nil || uint64(v2.Block.Index) != at {
		t.Fatalf("after the trim: %s %+v, want found at block %d", v2.Status, v2.Block, at)
	}
	if q := e.client.Stats().Total - before; q < 2 {
		t.Fatalf("after the trim the payment cost %d queries: its blocks were not read again", q)
	}
	unpaid.id = "unpaid-again"
	if un2 := e.decide(e.intent(unpaid.json(e.ledger.ID()))); un2.Status != reconciled.StatusAbsent {
		t.Fatalf("unpaid after the trim: %s %+v, want absent as before", un2.Status, un2.Reason)
	}
	if r, _, _ := st.LoadRange(ctx, key); r.Lo > at {
		t.Fatalf("range %d..%d: the re-read blocks were not cached again", r.Lo, r.Hi)
	}
}
