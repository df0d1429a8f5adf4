package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/reconciled/reconciled/reconcile"
)

// One legacy get_blocks page (2000 blocks) cached per transaction, as the
// engine does it: decoded blocks in, Value encoding and stamp index out.
func BenchmarkPutVerified2000(b *testing.B) {
	ctx := context.Background()
	s := openTestB(b)
	var next uint64
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		page := parsedRange(b, next, next+2000)
		next += 2000
		b.StartTimer()
		if err := s.PutVerified(ctx, ledgerA, page); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(next), "ns/block")
}

func BenchmarkByStamp(b *testing.B) {
	ctx := context.Background()
	s := openTestB(b)
	for i := uint64(0); i < 20000; i += 2000 {
		if err := s.PutBlocks(ctx, ledgerA, blocks(i, i+2000)); err != nil {
			b.Fatal(err)
		}
	}
	var i uint64
	b.ReportAllocs()
	for b.Loop() {
		bs, err := s.ByStamp(ctx, ledgerA, testStamp(i%19998), 0, 20000)
		if err != nil || len(bs) != 3 {
			b.Fatal(len(bs), err)
		}
		i += 3
	}
}

func BenchmarkCachedBlocks2000(b *testing.B) {
	ctx := context.Background()
	s := openTestB(b)
	for i := uint64(0); i < 20000; i += 2000 {
		if err := s.PutBlocks(ctx, ledgerA, blocks(i, i+2000)); err != nil {
			b.Fatal(err)
		}
	}
	var start uint64
	b.ReportAllocs()
	for b.Loop() {
		bs, err := s.CachedBlocks(ctx, ledgerA, start, start+2000)
		if err != nil || len(bs) != 2000 {
			b.Fatal(len(bs), err)
		}
		start = (start + 2000) % 18000
	}
}

func BenchmarkAppendVerdict(b *testing.B) {
	ctx := context.Background()
	s := openTestB(b)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		id := fmt.Sprintf("b%d", n)
		n++
		if err := s.AppendVerdict(ctx, verdict(id, 1, reconcile.StatusFound)); err != nil {
			b.Fatal(err)
		}
	}
}

func openTestB(b *testing.B) *Store {
	s, err := Open(context.Background(), b.TempDir()+"/recon.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
