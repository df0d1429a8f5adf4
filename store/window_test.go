package store

import (
	"context"
	"math"
	"testing"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/reconcile"
)

// Runs ending at the highest storable index, with blocks that carry no
// timestamp, so a scan runs to the end of the index space: an error-free
// "none", not an overflow.
func TestWindowBlocksAtTopIndex(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	const m = uint64(math.MaxInt64)
	var a []CachedBlock
	for i := m - 9; i <= m-5; i++ {
		a = append(a, block(i))
	}
	if err := s.PutBlocks(ctx, ledgerA, a); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]uint64{{m - 4, m - 2}, {m - 1, m}} {
		var bs []CachedBlock
		for i := r[0]; i <= r[1]; i++ {
			bs = append(bs, blockAt(i, 0))
		}
		if err := s.PutBlocks(ctx, ledgerA, bs); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("WindowBlocks panicked: %v", p)
		}
	}()
	f, l, ok, err := s.WindowBlocks(ctx, ledgerA, m-3, m, 1, math.MaxUint64)
	if err != nil || ok {
		t.Fatalf("window: %d %d %v %v, want none", f, l, ok, err)
	}
}

// A block without a timestamp is in no window, even one from 0: the store
// and the in-memory cache agree.
func TestWindowBlocksFromZeroMatchesMemCache(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	mem := reconcile.NewMemCache()
	var page []icrc3.Block
	page = append(page, parsed(t, blockAt(0, 0)))
	for i := uint64(1); i < 10; i++ {
		page = append(page, parsed(t, block(i)))
	}
	if err := s.PutVerified(ctx, ledgerA, page); err != nil {
		t.Fatal(err)
	}
	if err := mem.PutVerified(ctx, ledgerA, page); err != nil {
		t.Fatal(err)
	}
	f1, l1, ok1, err1 := s.WindowBlocks(ctx, ledgerA, 0, 9, 0, testTS(5))
	f2, l2, ok2, err2 := mem.WindowBlocks(ctx, ledgerA, 0, 9, 0, testTS(5))
	if err1 != nil || err2 != nil || !ok1 || ok1 != ok2 || f1 != f2 || l1 != l2 || f1 != 1 {
		t.Fatalf("store %d %d %v %v, mem %d %d %v %v", f1, l1, ok1, err1, f2, l2, ok2, err2)
	}
}
