package store

import (
	"context"
	"testing"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
)

func rangeOf(t *testing.T, s *Store) icrc3.VerifiedRange {
	t.Helper()
	r, ok, err := s.LoadRange(context.Background(), ledgerA)
	if err != nil || !ok {
		t.Fatalf("range: %v %v", ok, err)
	}
	return r
}

func TestTrimBlocksRaisesTheRangesBottom(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	const n = 2000
	page := parsedRange(t, 0, n)
	full := icrc3.VerifiedRange{Lo: 0, Hi: n - 1, HiHash: page[n-1].Hash, LoTS: testTS(0), HiTS: testTS(n - 1), TipTime: testTS(n)}
	if err := s.PutVerifiedRange(ctx, ledgerA, page, full); err != nil {
		t.Fatal(err)
	}
	stamps := func() int { return rowCount(t, s, "block_stamps") }
	before := stamps()

	// At most two runs a transaction: the bottom moves up by 128 blocks.
	got, err := s.TrimBlocks(ctx, ledgerA, testTS(1000), 2)
	if err != nil || got != 128 {
		t.Fatalf("trimmed %d, %v; want 2 runs of 64", got, err)
	}
	if r := rangeOf(t, s); r.Lo != 128 || r.Below == nil || *r.Below != page[127].Hash || r.LoTS != testTS(128) || r.Hi != n-1 || r.HiTS != full.HiTS {
		t.Fatalf("range after one batch %+v", r)
	}
	// Then up to the run holding the first block at keepTS (960..1023).
	for {
		got, err := s.TrimBlocks(ctx, ledgerA, testTS(1000), 0)
		if err != nil {
			t.Fatal(err)
		}
		if got == 0 {
			break
		}
	}
	r := rangeOf(t, s)
	if r.Lo != 960 || *r.Below != page[959].Hash || r.LoTS != testTS(960) {
		t.Fatalf("range %+v, want Lo 960 with block 959's hash below", r)
	}
	if _, _, ok, _ := s.BlockAt(ctx, ledgerA, 959); ok {
		t.Fatal("block 959 is still cached")
	}
	if _, _, ok, _ := s.BlockAt(ctx, ledgerA, 960); !ok {
		t.Fatal("block 960 was trimmed")
	}
	if got := before - stamps(); got != 960 {
		t.Fatalf("%d stamp rows went with 960 blocks", got)
	}
	if bs, err := s.ByStamp(ctx, ledgerA, testStamp(1500), 0, n-1); err != nil || len(bs) == 0 {
		t.Fatalf("a kept block's stamp: %d blocks, %v", len(bs), err)
	}

	// The blocks below are re-read and verified against Below: putting
	// them back with the range they extend is accepted.
	back := full
	if err := s.PutVerifiedRange(ctx, ledgerA, page[:960], back); err != nil {
		t.Fatalf("re-caching the trimmed blocks: %v", err)
	}
	if r := rangeOf(t, s); r.Lo != 0 || stamps() != before {
		t.Fatalf("after re-caching: range %+v, %d stamps (had %d)", r, stamps(), before)
	}

	// A keep point past every block keeps the run holding Hi.
	for {
		got, err := s.TrimBlocks(ctx, ledgerA, ^uint64(0), 0)
		if err != nil {
			t.Fatal(err)
		}
		if got == 0 {
			break
		}
	}
	if r := rangeOf(t, s); r.Lo != 1984 || r.Hi != n-1 {
		t.Fatalf("range %+v, want the top run 1984..1999 kept", r)
	}
	var h icrc3.Hash
	if h, _, _, _ = s.BlockAt(ctx, ledgerA, n-1); h != page[n-1].Hash {
		t.Fatal("the top block is gone")
	}
}

func TestOldestOpenWindows(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	for i, from := range []uint64{300, 100, 200} {
		id := string(rune('a' + i))
		mustPut(t, s, intent(id, 1))
		v := verdict(id, 1, reconciled.StatusNotYet)
		v.Window.FromTS = reconciled.U64(from)
		if err := s.AppendVerdict(ctx, v, &reconciled.Watch{IntentID: id, CanisterID: ledgerA, NextCheck: v.DecidedAt}); err != nil {
			t.Fatal(err)
		}
	}
	// A final intent is not open: its window does not count.
	mustPut(t, s, intent("d", 1))
	v := verdict("d", 1, reconciled.StatusFound)
	v.Window.FromTS = 50
	if err := s.AppendVerdict(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.OldestOpenWindows(ctx)
	if err != nil || len(got) != 1 || got[ledgerA] != 100 {
		t.Fatalf("oldest open windows %v, %v; want %s: 100", got, err, ledgerA)
	}
}
