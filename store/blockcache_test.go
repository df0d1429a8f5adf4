package store

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/reconcile"
)

// parsed returns block i as the decoders deliver it.
func parsed(t testing.TB, c CachedBlock) icrc3.Block {
	t.Helper()
	v, err := icrc3.UnmarshalValue(c.Raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := icrc3.ParseBlock(c.Index, v, c.Hash)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parsedRange(t testing.TB, from, to uint64) []icrc3.Block {
	var out []icrc3.Block
	for _, c := range blocks(from, to) {
		out = append(out, parsed(t, c))
	}
	return out
}

func TestByStamp(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.PutVerified(ctx, ledgerA, parsedRange(t, 0, 30)); err != nil {
		t.Fatal(err)
	}
	// Blocks 9, 10, 11 share a stamp.
	got, err := s.ByStamp(ctx, ledgerA, testStamp(10), 0, 29)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d candidates, want 3", len(got))
	}
	for k, b := range got {
		want := parsed(t, block(uint64(9+k)))
		if !reflect.DeepEqual(b, want) {
			t.Fatalf("candidate %d:\n got %+v\nwant %+v", k, b, want)
		}
	}
	for _, c := range []struct{ lo, hi uint64 }{{10, 10}, {10, math.MaxUint64}} {
		got, err := s.ByStamp(ctx, ledgerA, testStamp(10), c.lo, c.hi)
		if err != nil || len(got) == 0 || got[0].Index != 10 {
			t.Fatalf("[%d, %d]: %v %v", c.lo, c.hi, got, err)
		}
	}
	if got, _ := s.ByStamp(ctx, ledgerA, testStamp(10), 12, 11); len(got) != 0 {
		t.Fatalf("empty range returned %d", len(got))
	}
	if got, _ := s.ByStamp(ctx, "other-ledger", testStamp(10), 0, 29); len(got) != 0 {
		t.Fatalf("other ledger returned %d", len(got))
	}

	// A cached Value that no longer hashes to its verified hash must fail
	// loudly: dropping it would turn "found" into "absent".
	rewriteCached(t, s, ledgerA, 10, func(b *CachedBlock) {
		b.Raw = icrc3.MarshalValue(transfer(10, testTS(10), &icrc3.Hash{9}))
	})
	if _, err := s.ByStamp(ctx, ledgerA, testStamp(10), 0, 29); err == nil || !strings.Contains(err.Error(), "hashes to") {
		t.Fatalf("corrupted cache: %v", err)
	}
}

// A stamp that does not fit in int64 (caller-chosen; only ledgers with a
// loose clock check would accept it) is still found exactly.
func TestByStampHighBit(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	for _, st := range []uint64{math.MaxInt64 + 1, math.MaxUint64} {
		tx := icrc3.MapValue(
			icrc3.F("op", icrc3.Text("mint")),
			icrc3.F("to", icrc3.ArrayValue(icrc3.Blob([]byte{4}))),
			icrc3.F("amt", icrc3.Uint(1)),
			icrc3.F("ts", icrc3.Uint(st)),
		)
		idx := st % 1000
		v := icrc3.MapValue(icrc3.F("ts", icrc3.Uint(5)), icrc3.F("tx", tx))
		b, err := icrc3.ParseBlock(idx, v, v.Hash())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PutVerified(ctx, ledgerA, []icrc3.Block{b}); err != nil {
			t.Fatal(err)
		}
		got, err := s.ByStamp(ctx, ledgerA, st, 0, 1000)
		if err != nil || len(got) != 1 || got[0].Index != idx {
			t.Fatalf("stamp %d: %v %v", st, got, err)
		}
	}
}

func TestPutVerifiedRefusesInconsistentBlocks(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	b := parsed(t, block(3))
	noValue := b
	noValue.Raw = nil
	otherStamp := b
	st := *b.CreatedAt + 1
	otherStamp.CreatedAt = &st
	noStamp := b
	noStamp.CreatedAt = nil
	otherTS := b
	otherTS.TS++
	for name, bad := range map[string]icrc3.Block{
		"no value": noValue, "other stamp": otherStamp, "no stamp": noStamp, "other ts": otherTS,
	} {
		if err := s.PutVerified(ctx, ledgerA, []icrc3.Block{bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if got, _ := s.CachedBlocks(ctx, ledgerA, 0, 10); len(got) != 0 {
		t.Fatalf("refused blocks cached: %v", indexes(got))
	}
}

// The store and the in-memory cache answer the engine's questions alike,
// whatever pages the blocks arrived in: pages of any size, written top down
// as a walk writes them, then again overlapping what is cached (so runs
// start and end anywhere, and a page straddles several runs).
func TestBlockCacheMatchesMemCache(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	mem := reconcile.NewMemCache()
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 700
	// Timestamps that repeat and jump, as real ledgers' do.
	var all []icrc3.Block
	ts := uint64(1_000_000)
	for i := uint64(0); i < n; i++ {
		if rng.IntN(3) > 0 {
			ts += uint64(rng.IntN(5000))
		}
		all = append(all, parsed(t, blockAt(i, ts)))
	}
	put := func(page []icrc3.Block) {
		t.Helper()
		if err := s.PutVerified(ctx, ledgerA, page); err != nil {
			t.Fatalf("put %d..%d: %v", page[0].Index, page[len(page)-1].Index, err)
		}
		if err := mem.PutVerified(ctx, ledgerA, page); err != nil {
			t.Fatal(err)
		}
	}
	for hi := n; hi > 0; {
		lo := max(0, hi-1-rng.IntN(150))
		put(all[lo:hi])
		hi = lo
	}
	for range 20 {
		lo := rng.IntN(n)
		put(all[lo:min(n, lo+1+rng.IntN(200))])
	}
	for q := 0; q < 300; q++ {
		lo := uint64(rng.IntN(n + 20))
		hi := lo + uint64(rng.IntN(n+20)) - 10
		from := all[rng.IntN(len(all))].TS - uint64(rng.IntN(3000))
		to := from + uint64(rng.IntN(400000))
		f1, l1, ok1, err1 := s.WindowBlocks(ctx, ledgerA, lo, min(hi, n-1), from, to)
		f2, l2, ok2, err2 := mem.WindowBlocks(ctx, ledgerA, lo, min(hi, n-1), from, to)
		if err1 != nil || err2 != nil || ok1 != ok2 || ok1 && (f1 != f2 || l1 != l2) {
			t.Fatalf("WindowBlocks(%d, %d, %d, %d): store %d %d %t %v, mem %d %d %t %v",
				lo, hi, from, to, f1, l1, ok1, err1, f2, l2, ok2, err2)
		}
		stamp := testStamp(uint64(rng.IntN(n + 10)))
		b1, err1 := s.ByStamp(ctx, ledgerA, stamp, lo, hi)
		b2, err2 := mem.ByStamp(ctx, ledgerA, stamp, lo, hi)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(blockIndexes(b1), blockIndexes(b2)) {
			t.Fatalf("ByStamp(%d, %d, %d): store %v %v, mem %v %v", stamp, lo, hi,
				blockIndexes(b1), err1, blockIndexes(b2), err2)
		}
		h1, ts1, ok1, err1 := s.BlockAt(ctx, ledgerA, lo)
		h2, ts2, ok2, err2 := mem.BlockAt(ctx, ledgerA, lo)
		if err1 != nil || err2 != nil || ok1 != ok2 || h1 != h2 || ts1 != ts2 {
			t.Fatalf("BlockAt(%d): store %s %d %t %v, mem %s %d %t %v", lo, h1, ts1, ok1, err1, h2, ts2, ok2, err2)
		}
	}
	got, err := s.CachedBlocks(ctx, ledgerA, 0, n+5)
	if err != nil || len(got) != n {
		t.Fatalf("cached: %d blocks %v, want %d", len(got), err, n)
	}
	for i := range got {
		if want := all[i]; got[i].Index != want.Index || got[i].Hash != want.Hash || !bytes.Equal(got[i].Raw, want.Raw) {
			t.Fatalf("cached block %d differs from block %d as put", got[i].Index, want.Index)
		}
	}
}

func blockIndexes(bs []icrc3.Block) []uint64 {
	out := []uint64{}
	for _, b := range bs {
		out = append(out, b.Index)
	}
	return out
}

func TestVerifiedRange(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if _, ok, err := s.LoadRange(ctx, ledgerA); ok || err != nil {
		t.Fatalf("no range: %t %v", ok, err)
	}
	if err := s.PutBlocks(ctx, ledgerA, blocks(10, 20)); err != nil {
		t.Fatal(err)
	}
	below := block(9).Hash
	r := icrc3.VerifiedRange{Lo: 10, Hi: 19, HiHash: block(19).Hash, Below: &below,
		LoTS: testTS(10), HiTS: testTS(19), TipTime: 777}
	if err := s.SaveRange(ctx, ledgerA, r); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.LoadRange(ctx, ledgerA)
	if err != nil || !ok || !reflect.DeepEqual(got, r) {
		t.Fatalf("load %+v %t %v\nwant %+v", got, ok, err, r)
	}
	if tip, err := s.Tip(ctx, ledgerA); err != nil || tip != (Tip{Index: 19, Hash: r.HiHash, CertifiedTime: 777}) {
		t.Fatalf("tip after save %+v %v", tip, err)
	}

	bad := r
	bad.HiHash = block(18).Hash
	if err := s.SaveRange(ctx, ledgerA, bad); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("hi hash contradicting the cache: %v", err)
	}
	bad = r
	bad.Lo, bad.Below = 12, &below // block 11 is cached with another hash
	if err := s.SaveRange(ctx, ledgerA, bad); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("below contradicting the cache: %v", err)
	}
	if got, _, _ := s.LoadRange(ctx, ledgerA); !reflect.DeepEqual(got, r) {
		t.Fatalf("refused save changed the range: %+v", got)
	}

	// The whole chain from block 0: no Below.
	full := icrc3.VerifiedRange{Lo: 0, Hi: 19, HiHash: r.HiHash, LoTS: 1, HiTS: testTS(19), TipTime: 778}
	if err := s.SaveRange(ctx, ledgerA, full); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.LoadRange(ctx, ledgerA); err != nil || !reflect.DeepEqual(got, full) {
		t.Fatalf("load %+v %v", got, err)
	}
}

// A verified page and the range grown by it are stored together, or
// neither: a range that contradicts the cache leaves the page out too.
func TestPutVerifiedRangeIsOneWrite(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.PutVerified(ctx, ledgerA, parsedRange(t, 20, 30)); err != nil {
		t.Fatal(err)
	}
	below := block(19).Hash
	r := icrc3.VerifiedRange{Lo: 20, Hi: 29, HiHash: block(29).Hash, Below: &below,
		LoTS: testTS(20), HiTS: testTS(29), TipTime: 777}
	if err := s.SaveRange(ctx, ledgerA, r); err != nil {
		t.Fatal(err)
	}
	page := parsedRange(t, 10, 20)
	grown := r
	grown.Lo, grown.LoTS = 10, testTS(10)
	b9 := block(9).Hash
	grown.Below = &b9
	bad := grown
	bad.HiHash = block(28).Hash // block 29 is cached with another hash
	if err := s.PutVerifiedRange(ctx, ledgerA, page, bad); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("range contradicting its page: %v", err)
	}
	if got, _, _ := s.LoadRange(ctx, ledgerA); !reflect.DeepEqual(got, r) {
		t.Fatalf("refused write changed the range: %+v", got)
	}
	if h, _, ok, err := s.BlockAt(ctx, ledgerA, 10); err != nil || ok {
		t.Fatalf("refused write stored block 10: %v %t %v", h, ok, err)
	}
	if err := s.PutVerifiedRange(ctx, ledgerA, page, grown); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.LoadRange(ctx, ledgerA); err != nil || !reflect.DeepEqual(got, grown) {
		t.Fatalf("range %+v %v, want %+v", got, err, grown)
	}
	if h, _, ok, err := s.BlockAt(ctx, ledgerA, 10); err != nil || !ok || h != block(10).Hash {
		t.Fatalf("block 10: %v %t %v", h, ok, err)
	}
}

// rewriteCached changes cached block index of ledger in place, behind the
// store's back, as a corrupted file would.
func rewriteCached(t *testing.T, s *Store, ledger string, index uint64, change func(*CachedBlock)) {
	t.Helper()
	ctx := context.Background()
	runs, err := cachedRuns(ctx, s.r, ledger, index, index, true)
	if err != nil || len(runs) != 1 {
		t.Fatalf("run of block %d: %d runs %v", index, len(runs), err)
	}
	r := runs[0]
	bs := make([]CachedBlock, r.n)
	for k := range bs {
		bs[k] = r.block(k)
	}
	change(&bs[index-r.lo])
	meta, vals, err := encodeRun(nil, nil, bs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE block_runs SET meta = ?, vals = ? WHERE `+ofHistory+` AND lo = ?`,
		meta, vals, ledger, int64(r.lo)); err != nil {
		t.Fatal(err)
	}
}

// A run that no longer decodes, or a stamp whose run is gone, fails every
// read that needs it: a block silently missing from ByStamp's answer would
// turn "found" into "absent". Values are read only where a block is
// rebuilt, so a run whose Values alone are damaged still answers BlockAt.
func TestCorruptRunsAreErrors(t *testing.T) {
	ctx := context.Background()
	breaks := []struct {
		name    string
		sql     string
		metaBad bool
	}{
		{"values truncated", `UPDATE block_runs SET vals = CAST(substr(vals, 1, length(vals) - 1) AS BLOB)`, false},
		{"records truncated", `UPDATE block_runs SET meta = CAST(substr(meta, 1, length(meta) - 1) AS BLOB)`, true},
		{"bad flag", `UPDATE block_runs SET meta = CAST(substr(meta, 1, 40) || x'07' || substr(meta, 42) AS BLOB)`, true},
		{"value ends out of order", `UPDATE block_runs SET meta = CAST(substr(meta, 1, 49) || x'ffffff7f' || substr(meta, 54) AS BLOB)`, true},
		{"longer than a run", `UPDATE block_runs SET hi = hi + 1`, true},
		{"run gone", `DELETE FROM block_runs`, false},
	}
	for _, br := range breaks {
		t.Run(br.name, func(t *testing.T) {
			s := openTest(t)
			if err := s.PutVerified(ctx, ledgerA, parsedRange(t, 0, 30)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.w.ExecContext(ctx, `PRAGMA ignore_check_constraints = 1`); err != nil {
				t.Fatal(err)
			}
			if _, err := s.w.ExecContext(ctx, br.sql+` WHERE lo = 0`); err != nil {
				t.Fatalf("%s: %v", br.sql, err)
			}
			if got, err := s.ByStamp(ctx, ledgerA, testStamp(0), 0, 29); err == nil {
				t.Fatalf("ByStamp over a broken run: %d blocks, no error", len(got))
			}
			if got, err := s.CachedBlocks(ctx, ledgerA, 0, 30); err == nil && br.name != "run gone" {
				t.Fatalf("CachedBlocks over a broken run: %d blocks, no error", len(got))
			}
			_, _, ok, err := s.BlockAt(ctx, ledgerA, 0)
			switch {
			case br.metaBad && err == nil:
				t.Fatal("BlockAt in a run with broken records: no error")
			case !br.metaBad && err != nil:
				t.Fatalf("BlockAt: %v", err)
			case br.name == "run gone" && ok:
				t.Fatal("BlockAt of a deleted run: found")
			}
		})
	}
}
