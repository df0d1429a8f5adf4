package reconcile

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/reconcile/cachetest"
)

// The chain's reads while pages wait to be written agree with reading
// every block: the waiting pages are the lowest of the range, of any
// sizes, with blocks without a timestamp among them. (Those are kept out
// of the cached part: MemCache's search assumes none lie inside a range.)
func TestReadsOverUnwrittenPagesMatchTheCache(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(20261201, 7))
	for round := range 300 {
		n := 1 + rng.IntN(400)
		// Blocks [0, split) wait, in pages the walk gave from the top down.
		split := rng.IntN(n + 1)
		blocks := make([]icrc3.Block, n)
		ts := uint64(1_000)
		for i := range blocks {
			ts += uint64(rng.IntN(3)) // equal timestamps happen
			var st *uint64
			if rng.IntN(3) > 0 {
				v := uint64(rng.IntN(8))
				st = &v
			}
			// A block of an unknown kind, without a timestamp.
			blocks[i] = testBlock(t, uint64(i), ts, st, i < split && rng.IntN(10) == 0)
		}
		all := NewMemCache()
		if err := all.PutVerified(ctx, "x", blocks); err != nil {
			t.Fatal(err)
		}
		cached := NewMemCache()
		if err := cached.PutVerified(ctx, "x", blocks[split:]); err != nil {
			t.Fatal(err)
		}
		// A cache that stores ranged pages (as the store does) makes the
		// waiting pages keep Values only, parsed again when read; any
		// other keeps them whole.
		var bc BlockCache = cached
		if round%2 == 0 {
			bc = rangedMem{cached}
		}
		c := &chain{ledger: "x", cache: bc}
		c.w = newPageWriter(c)
		for hi := split; hi > 0; {
			lo := max(0, hi-1-rng.IntN(50))
			c.w.queue(c.w.newPage(blocks[lo:hi], icrc3.VerifiedRange{}))
			hi = lo
		}
		top := uint64(n - 1)
		// Most rounds know the range's highest timestamped block, as a
		// chain does once it has read it: windows still open there are
		// answered without reading where they end.
		if round%3 > 0 {
			c.r = icrc3.VerifiedRange{Lo: 0, Hi: top}
			for i := n - 1; i >= 0; i-- {
				if blocks[i].TS != 0 {
					c.top, c.topTS, c.hasTop, c.r.HiTS = blocks[i].Index, blocks[i].TS, true, blocks[i].TS
					break
				}
			}
		}
		for range 20 {
			from, to := 990+uint64(rng.IntN(int(ts-980))), 990+uint64(rng.IntN(int(ts-980)))
			if rng.IntN(8) == 0 {
				from = 0
			}
			switch rng.IntN(8) {
			case 0:
				to = ^uint64(0)
			case 1, 2:
				to = ts + uint64(rng.IntN(3)) - 1 // about the highest timestamp
			}
			f1, l1, ok1, err1 := c.windowBlocks(ctx, 0, top, from, to)
			f2, l2, ok2 := cachetest.WindowOf(blocks, from, to)
			if err1 != nil || ok1 != ok2 || ok1 && (f1 != f2 || l1 != l2) {
				t.Fatalf("round %d (split %d of %d): window %d..%d: chain %d %d %v %v, a scan %d %d %v",
					round, split, n, from, to, f1, l1, ok1, err1, f2, l2, ok2)
			}
			st := uint64(rng.IntN(9))
			lo, hi := uint64(rng.IntN(n)), uint64(rng.IntN(n))
			lo, hi = min(lo, hi), max(lo, hi)
			got, err := c.byStamp(ctx, st, lo, hi)
			want, _ := all.ByStamp(ctx, "x", st, lo, hi)
			idx := func(bs []icrc3.Block) []uint64 {
				out := []uint64{}
				for _, b := range bs {
					out = append(out, b.Index)
				}
				return out
			}
			if err != nil || !slices.Equal(idx(got), idx(want)) {
				t.Fatalf("round %d (split %d of %d): stamp %d in %d..%d: chain %v %v, cache %v", round, split, n, st, lo, hi, idx(got), err, idx(want))
			}
			// A waiting block is parsed again from its Value: the same
			// block the walk verified.
			for _, g := range got {
				b := blocks[g.Index]
				if g.Hash != b.Hash || g.TS != b.TS || g.Kind != b.Kind || *g.CreatedAt != *b.CreatedAt || g.Amount.String() != b.Amount.String() || g.Index < uint64(split) && !bytes.Equal(g.Raw, b.Raw) { // MemCache drops Raw
					t.Fatalf("round %d: block %d read back as %+v, verified as %+v", round, g.Index, g, b)
				}
			}
		}
	}
}

// testBlock is block index with its Value: a mint at ts stamped st, or a
// block of an unknown kind without a timestamp.
func testBlock(t *testing.T, index, ts uint64, st *uint64, unknown bool) icrc3.Block {
	tx := []icrc3.Field{icrc3.F("op", icrc3.Text("mint")),
		icrc3.F("to", icrc3.ArrayValue(icrc3.Blob([]byte{4}))), icrc3.F("amt", icrc3.Uint(1))}
	if st != nil {
		tx = append(tx, icrc3.F("ts", icrc3.Uint(*st)))
	}
	v := icrc3.MapValue(icrc3.F("ts", icrc3.Uint(ts)), icrc3.F("tx", icrc3.MapValue(tx...)))
	if unknown {
		v = icrc3.MapValue(icrc3.F("btype", icrc3.Text("9test")), icrc3.F("tx", icrc3.MapValue(tx...)))
	}
	b, err := icrc3.ParseBlock(index, v, v.Hash())
	if err != nil {
		t.Fatal(err)
	}
	if unknown != (b.TS == 0) {
		t.Fatalf("block %d: ts %d", index, b.TS)
	}
	return b
}

// rangedMem is a MemCache that stores pages with their ranges.
type rangedMem struct{ *MemCache }

func (m rangedMem) PutVerifiedRange(ctx context.Context, ledger string, blocks []icrc3.Block, r icrc3.VerifiedRange) error {
	if err := m.PutVerified(ctx, ledger, blocks); err != nil {
		return err
	}
	return m.SaveRange(ctx, ledger, r)
}
