package store

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/reconcile/cachetest"
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

// WindowBlocks and WindowStart against a scan of every cached block, on
// chains whose blocks without a timestamp come singly and in stretches
// longer than a run, with pages left out: the bounds the timestamp index
// finds may then lie in the run it points at, in a neighbouring one, or in
// none.
func TestWindowBlocksMatchesAScan(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(20261201, 3))
	for chain := range 6 {
		s := openTest(t)
		const n = 900
		var all []icrc3.Block
		ts := uint64(1_000_000)
		for i := uint64(0); i < n; {
			if rng.IntN(12) == 0 {
				// A stretch without timestamps, up to twice a run.
				for k := rng.IntN(2 * runBlocks); k >= 0 && i < n; k-- {
					all = append(all, parsed(t, blockAt(i, 0)))
					i++
				}
				continue
			}
			if rng.IntN(3) > 0 {
				ts += uint64(rng.IntN(5000))
			}
			all = append(all, parsed(t, blockAt(i, ts)))
			i++
		}
		var cached []icrc3.Block
		for hi := n; hi > 0; {
			lo := max(0, hi-1-rng.IntN(3*runBlocks))
			if rng.IntN(5) > 0 {
				if err := s.PutVerified(ctx, ledgerA, all[lo:hi]); err != nil {
					t.Fatal(err)
				}
				cached = append(all[lo:hi:hi], cached...)
			}
			hi = lo
		}
		for range 400 {
			lo := uint64(rng.IntN(n + 20))
			hi := min(lo+uint64(rng.IntN(n+20))-10, n-1)
			from := all[rng.IntN(n)].TS + uint64(rng.IntN(3000)) - 1500
			to := from + uint64(rng.IntN(400_000))
			if rng.IntN(10) == 0 {
				to = math.MaxUint64
			}
			var in []icrc3.Block
			for _, b := range cached {
				if b.Index >= lo && b.Index <= hi {
					in = append(in, b)
				}
			}
			wf, wl, wok := cachetest.WindowOf(in, from, to)
			f, l, ok, err := s.WindowBlocks(ctx, ledgerA, lo, hi, from, to)
			if err != nil || ok != wok || ok && (f != wf || l != wl) {
				t.Fatalf("chain %d: WindowBlocks(%d, %d, %d, %d) = %d %d %t %v, a scan says %d %d %t",
					chain, lo, hi, from, to, f, l, ok, err, wf, wl, wok)
			}
			// WindowStart is the first index of a window without an end.
			wf, _, wok = cachetest.WindowOf(in, from, math.MaxUint64)
			if f, ok, err := s.WindowStart(ctx, ledgerA, lo, hi, from); err != nil || ok != wok || ok && f != wf {
				t.Fatalf("chain %d: WindowStart(%d, %d, %d) = %d %t %v, a scan says %d %t", chain, lo, hi, from, f, ok, err, wf, wok)
			}
		}
	}
}
