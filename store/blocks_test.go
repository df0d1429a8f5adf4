package store

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/reconciled/reconciled/icrc3"
)

// testTS is block i's ledger time; stampOf(i) its created_at_time, shared
// by runs of three blocks so that ByStamp has several candidates.
func testTS(i uint64) uint64    { return 1791547201000000000 + i*1000 }
func testStamp(i uint64) uint64 { return 1791547000000000000 + i/3 }

// transfer is a DFINITY-style transfer block (no btype, tx.op "xfer").
func transfer(i, ts uint64, phash *icrc3.Hash) icrc3.Value {
	tx := icrc3.MapValue(
		icrc3.F("op", icrc3.Text("xfer")),
		icrc3.F("from", icrc3.ArrayValue(icrc3.Blob([]byte{1, 2, 3}))),
		icrc3.F("to", icrc3.ArrayValue(icrc3.Blob([]byte{4, 5, byte(i)}))),
		icrc3.F("amt", icrc3.Uint(100+i)),
		icrc3.F("ts", icrc3.Uint(testStamp(i))),
	)
	fs := []icrc3.Field{icrc3.F("ts", icrc3.Uint(ts)), icrc3.F("tx", tx)}
	if phash != nil {
		fs = append(fs, icrc3.F("phash", icrc3.Blob(phash[:])))
	}
	return icrc3.MapValue(fs...)
}

func blockAt(i, ts uint64) CachedBlock {
	var ph *icrc3.Hash
	if i > 0 {
		h := icrc3.Hash{byte(i), byte(i >> 8)}
		ph = &h
	}
	v := transfer(i, ts, ph)
	st := testStamp(i)
	return CachedBlock{Index: i, TS: ts, Hash: v.Hash(), Raw: icrc3.MarshalValue(v), Stamp: &st}
}

func block(i uint64) CachedBlock { return blockAt(i, testTS(i)) }

func blocks(from, to uint64) []CachedBlock {
	var bs []CachedBlock
	for i := from; i < to; i++ {
		bs = append(bs, block(i))
	}
	return bs
}

func TestBlockCacheRangesAndImmutability(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	const other = "ryjl3-tyaaa-aaaaa-aaaba-cai"
	if err := s.PutBlocks(ctx, ledgerA, blocks(10, 20)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBlocks(ctx, ledgerA, blocks(30, 35)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBlocks(ctx, other, blocks(0, 50)); err != nil {
		t.Fatal(err)
	}
	got, err := s.CachedBlocks(ctx, ledgerA, 15, 32)
	if err != nil {
		t.Fatal(err)
	}
	want := append(blocks(15, 20), blocks(30, 32)...)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("range 15..32: got %d blocks %v", len(got), indexes(got))
	}
	if got, _ := s.CachedBlocks(ctx, ledgerA, 20, 30); len(got) != 0 {
		t.Fatalf("gap returned %v", indexes(got))
	}
	if got, _ := s.CachedBlocks(ctx, ledgerA, 0, 40); len(got) != 15 {
		t.Fatalf("whole range: %d blocks", len(got))
	}

	// Identical blocks again (overlapping a new one) are fine.
	if err := s.PutBlocks(ctx, ledgerA, blocks(18, 22)); err != nil {
		t.Fatalf("overlapping identical put: %v", err)
	}
	// A different hash at a cached index means broken verification: refuse,
	// and store nothing of the batch.
	bad := blocks(22, 26)
	bad = append(bad, func() CachedBlock { b := block(13); b.Hash[0] ^= 1; return b }())
	if err := s.PutBlocks(ctx, ledgerA, bad); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("conflicting put: %v, want ErrBlockConflict", err)
	}
	if got, _ := s.CachedBlocks(ctx, ledgerA, 20, 30); !reflect.DeepEqual(indexes(got), []uint64{20, 21}) {
		t.Fatalf("failed batch left blocks %v", indexes(got))
	}
	if err := s.PutBlocks(ctx, ledgerA, []CachedBlock{blockAt(13, testTS(13)+1)}); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("other block at a cached index: %v", err)
	}
	ts := block(40)
	ts.TS++
	if err := s.PutBlocks(ctx, ledgerA, []CachedBlock{ts}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ts differing from the Value's: %v", err)
	}
	undecodable := block(41)
	undecodable.Raw = []byte("not a value")
	if err := s.PutBlocks(ctx, ledgerA, []CachedBlock{undecodable}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("undecodable raw: %v", err)
	}
	// A caller's stamp is ignored: the index is built from the Value.
	lying := block(42)
	lie := uint64(7)
	lying.Stamp = &lie
	if err := s.PutBlocks(ctx, ledgerA, []CachedBlock{lying}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.CachedBlocks(ctx, ledgerA, 42, 43); len(got) != 1 || *got[0].Stamp != testStamp(42) {
		t.Fatalf("stamp taken from the caller: %+v", got)
	}
	if got, _ := s.CachedBlocks(ctx, ledgerA, 13, 14); len(got) != 1 || !reflect.DeepEqual(got[0], block(13)) {
		t.Fatalf("cached block changed: %+v", got)
	}
}

func TestBlockCacheU64Range(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	top := blockAt(math.MaxInt64, math.MaxInt64)
	if err := s.PutBlocks(ctx, ledgerA, []CachedBlock{block(0), top}); err != nil {
		t.Fatal(err)
	}
	got, err := s.CachedBlocks(ctx, ledgerA, 0, math.MaxUint64)
	if err != nil || !reflect.DeepEqual(indexes(got), []uint64{0, math.MaxInt64}) || got[1].TS != math.MaxInt64 {
		t.Fatalf("extremes: %v %v", got, err)
	}
	if got, _ := s.CachedBlocks(ctx, ledgerA, 1, math.MaxInt64); len(got) != 0 {
		t.Fatalf("half-open end included %v", indexes(got))
	}
	for name, b := range map[string]CachedBlock{
		"index 2^63": block(1 << 63),
		"ts 2^63":    blockAt(5, 1<<63),
	} {
		if err := s.PutBlocks(ctx, ledgerA, []CachedBlock{b}); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("%s: %v, want ErrOutOfRange", name, err)
		}
	}
	if err := s.PutTip(ctx, ledgerA, Tip{Index: 1 << 63}); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("tip 2^63: %v", err)
	}
}

func TestTips(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if _, err := s.Tip(ctx, ledgerA); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no tip: %v", err)
	}
	if err := s.PutBlocks(ctx, ledgerA, blocks(0, 10)); err != nil {
		t.Fatal(err)
	}
	put := func(i, ct uint64) error {
		return s.PutTip(ctx, ledgerA, Tip{Index: i, Hash: block(i).Hash, CertifiedTime: ct})
	}
	check := func(i, ct uint64) {
		t.Helper()
		got, err := s.Tip(ctx, ledgerA)
		if err != nil || got != (Tip{Index: i, Hash: block(i).Hash, CertifiedTime: ct}) {
			t.Fatalf("tip %+v %v, want index %d time %d", got, err, i, ct)
		}
	}
	if err := put(5, 100); err != nil {
		t.Fatal(err)
	}
	check(5, 100)
	if err := put(9, 200); err != nil {
		t.Fatal(err)
	}
	if err := put(7, 300); err != nil { // a lagging replica: ignored
		t.Fatal(err)
	}
	check(9, 200)
	if err := put(9, 150); err != nil { // same tip, older certificate
		t.Fatal(err)
	}
	check(9, 200)
	if err := put(9, 250); err != nil {
		t.Fatal(err)
	}
	check(9, 250)
	if err := s.PutTip(ctx, ledgerA, Tip{Index: 9, Hash: block(8).Hash, CertifiedTime: 300}); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("same index, other hash: %v", err)
	}
	if err := s.PutTip(ctx, ledgerA, Tip{Index: 3, Hash: block(8).Hash}); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("tip contradicting the cache: %v", err)
	}
	if err := put(20, 400); err != nil { // beyond the cache
		t.Fatal(err)
	}
	b20 := block(20)
	b20.Hash = icrc3.Hash{1}
	if err := s.PutBlocks(ctx, ledgerA, []CachedBlock{b20}); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("block contradicting the tip: %v", err)
	}
	check(20, 400)
}

func indexes(bs []CachedBlock) []uint64 {
	out := []uint64{}
	for _, b := range bs {
		out = append(out, b.Index)
	}
	return out
}

// Batches span several runs and stamp statements: a conflict in any of them, with
// a cached row or within the batch itself, stores nothing of the batch.
func TestPutBlocksConflictsAcrossStatements(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	n := uint64(3*stampRows + 7)
	if err := s.PutBlocks(ctx, ledgerA, blocks(0, n)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBlocks(ctx, ledgerA, blocks(0, n)); err != nil {
		t.Fatalf("identical batch again: %v", err)
	}
	bad := blocks(n, 2*n)
	alt := block(stampRows + 3)
	alt.Hash[0] ^= 1
	bad = slices.Insert(bad, 2*stampRows+1, alt)
	if err := s.PutBlocks(ctx, ledgerA, bad); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("batch contradicting a cached block: %v, want ErrBlockConflict", err)
	}
	twice := blocks(2*n, 2*n+5)
	other := block(2*n + 2)
	other.Hash[1] ^= 1
	if err := s.PutBlocks(ctx, ledgerA, append(twice, other)); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("batch contradicting itself: %v, want ErrBlockConflict", err)
	}
	if got, _ := s.CachedBlocks(ctx, ledgerA, n, 3*n); len(got) != 0 {
		t.Fatalf("failed batches left blocks %v", indexes(got))
	}
	if err := s.PutBlocks(ctx, ledgerA, append(twice, block(2*n+2))); err != nil {
		t.Fatalf("batch repeating a block: %v", err)
	}
	if got, _ := s.CachedBlocks(ctx, ledgerA, 0, 3*n); len(got) != int(n)+5 {
		t.Fatalf("%d blocks cached, want %d", len(got), n+5)
	}
}
