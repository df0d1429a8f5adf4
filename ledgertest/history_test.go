package ledgertest

import (
	"testing"
	"time"

	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

func TestGenerateHistory(t *testing.T) {
	const n = 20_000
	span := 48 * time.Hour
	build := func() (*fakeHost, *Ledger) {
		h := newFakeHost()
		l, _, _ := newTestLedger(t, h, LedgerConfig{ArchiveThreshold: 2000, ArchiveBatch: 1000, ArchiveCapacity: 6000})
		if err := l.GenerateHistory(n, 42, span); err != nil {
			t.Fatal(err)
		}
		return h, l
	}
	h, l := build()
	_, l2 := build()
	if l.Len() != n+2 || l.TipHash() != l2.TipHash() {
		t.Fatalf("len %d; same seed must give the same chain (%s vs %s)", l.Len(), l.TipHash(), l2.TipHash())
	}
	now := h.Now()
	ops := map[string]int{}
	var prev uint64
	for i := uint64(2); i < l.Len(); i++ {
		r := &l.chain[i]
		if r.ts < prev || r.ts < now-uint64(span) || r.ts > now {
			t.Fatalf("block %d ts %d out of order or outside the span", i, r.ts)
		}
		prev = r.ts
		if r.flags&fCreatedAt != 0 && (r.createdAt > r.ts || r.ts-r.createdAt > uint64(time.Minute)) {
			t.Fatalf("block %d created_at %d not near ts %d", i, r.createdAt, r.ts)
		}
		name := r.op.name()
		if r.op == opXfer && r.spender != 0 {
			name = "transfer_from"
		}
		ops[name]++
	}
	for _, k := range []string{"xfer", "transfer_from", "approve", "mint", "burn"} {
		if ops[k] < n/50 {
			t.Errorf("history has only %d %s blocks: %v", ops[k], k, ops)
		}
	}
	// The dedup map only holds transactions still inside the window.
	if len(l.dedup) > n*3/4 {
		t.Errorf("dedup map holds %d entries for a %v span", len(l.dedup), span)
	}
	// The ledger state is consistent: total supply equals the sum of balances.
	var sum icrc3.Nat
	for _, b := range l.balances {
		sum = natAdd(sum, b)
	}
	if !sum.Equal(l.supply) {
		t.Fatalf("sum of balances %s != supply %s", sum, l.supply)
	}
	if len(l.Archives()) < 2 {
		t.Fatalf("archives %+v", l.Archives())
	}
	// A later call still follows the rules (ts after the generated blocks).
	if _, err := l.Transfer(l.accts.get(3).a.Owner, TransferArg{To: acc(testPrincipal(9), nil), Amount: nat(1)}); err != nil {
		if _, ok := err.(*icrc1.TransferError); !ok {
			t.Fatal(err)
		}
	}
}

// BenchmarkGenerateHistory reports the cost of bulk history per block.
func BenchmarkGenerateHistory(b *testing.B) {
	h := newFakeHost()
	l, err := newLedger(h, LedgerConfig{ArchiveThreshold: 2000, ArchiveBatch: 1000})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := l.GenerateHistory(b.N, 1, 24*time.Hour); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/block")
}
