package store

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/reconcile"
)

// One legacy get_blocks page (2000 blocks) cached per transaction, as the
// engine does it: decoded blocks in, Value encoding and stamp index out.
func BenchmarkPutVerified2000(b *testing.B) {
	ctx := context.Background()
	s := openTestB(b)
	var next uint64
	var cpu cpuMeter
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		page := parsedRange(b, next, next+2000)
		next += 2000
		// The setup's garbage, collected while the timer runs, would be
		// counted as the store's CPU time.
		runtime.GC()
		b.StartTimer()
		cpu.start(b)
		if err := s.PutVerified(ctx, ledgerA, page); err != nil {
			b.Fatal(err)
		}
		cpu.stop(b)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(next), "ns/block")
	cpu.report(b, next)
}

// A cold walk's cache writes: verified 2000-block pages, top down, each
// put and followed by the range it extends, as the engine's walk does.
// fresh starts from an empty cache; warm from one already holding 100,000
// blocks of the ledger (below the walk), so the indexes are deep.
func BenchmarkWalkWrites2000(b *testing.B) {
	const page, pages, held = 2000, 10, 100_000
	for _, warm := range []bool{false, true} {
		name := "fresh"
		if warm {
			name = "warm"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			// Keyed as the engine keys chains, so index keys have their size.
			ledger := reconcile.HistoryKey("8d3e0a1c5f7b9e24", ledgerA, "")
			base := uint64(0)
			if warm {
				base = held
			}
			top := base + page*pages
			walk := make([][]icrc3.Block, pages)
			for k := range walk {
				hi := top - uint64(k)*page
				walk[k] = parsedRange(b, hi-page, hi)
			}
			var below []CachedBlock
			if warm {
				below = blocks(0, held)
			}
			var n uint64
			var cpu cpuMeter
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				s := openTestB(b)
				for i := 0; i < len(below); i += page {
					if err := s.PutBlocks(ctx, ledger, below[i:i+page]); err != nil {
						b.Fatal(err)
					}
				}
				r := icrc3.VerifiedRange{Lo: top, Hi: top - 1, HiHash: walk[0][page-1].Hash}
				runtime.GC()
				b.StartTimer()
				cpu.start(b)
				for _, pg := range walk {
					if err := s.PutVerified(ctx, ledger, pg); err != nil {
						b.Fatal(err)
					}
					// The test chain's phash fields are not its hashes: Below
					// is the real hash of block Lo-1, which SaveRange checks
					// once that block is cached.
					r.Lo, r.LoTS = pg[0].Index, pg[0].TS
					if r.Lo > 0 {
						h := block(r.Lo - 1).Hash
						r.Below = &h
					}
					if err := s.SaveRange(ctx, ledger, r); err != nil {
						b.Fatal(err)
					}
					n += page
				}
				cpu.stop(b)
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n), "µs/block")
			cpu.report(b, n)
		})
	}
}

// cached20000 is a store caching blocks 0..19999, written in pages of 2,000.
func cached20000(b *testing.B) *Store {
	ctx := context.Background()
	s := openTestB(b)
	for i := uint64(0); i < 20000; i += 2000 {
		if err := s.PutBlocks(ctx, ledgerA, blocks(i, i+2000)); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

func BenchmarkByStamp(b *testing.B) {
	ctx := context.Background()
	s := cached20000(b)
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

// BenchmarkWindowBlocks is the window bounds every verdict carries, over
// 20,000 cached blocks and windows of 1,000 blocks starting anywhere.
// A window of 1,000 blocks inside the cache (closed), or one that began
// 1,000 blocks below the top and has not ended (open: a burst's recent
// intents).
func BenchmarkWindowBlocks(b *testing.B) {
	for _, open := range []bool{false, true} {
		name := "closed"
		if open {
			name = "open"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s := cached20000(b)
			var i uint64
			b.ReportAllocs()
			for b.Loop() {
				from, to, want := testTS(i), testTS(i+999), i+999
				if open {
					from, to, want = testTS(19000+i%1000), testTS(19999)+uint64(time.Hour), 19999
				}
				f, l, ok, err := s.WindowBlocks(ctx, ledgerA, 0, 19999, from, to)
				if err != nil || !ok || l != want {
					b.Fatal(f, l, ok, err)
				}
				i = (i + 317) % 19000
			}
		})
	}
}

func BenchmarkCachedBlocks2000(b *testing.B) {
	ctx := context.Background()
	s := cached20000(b)
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
		if err := s.AppendVerdict(ctx, verdict(id, 1, reconciled.StatusFound), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuMeter adds up the process's CPU time (user and system) over the
// measured parts of a benchmark. The machine may be shared: wall time then
// depends on the neighbours and on the disk's sync latency, CPU time on the
// work done.
type cpuMeter struct {
	t0, sum time.Duration
}

func (m *cpuMeter) start(b *testing.B) { m.t0 = cpuNow(b) }
func (m *cpuMeter) stop(b *testing.B)  { m.sum += cpuNow(b) - m.t0 }

func (m *cpuMeter) report(b *testing.B, blocks uint64) {
	if blocks > 0 {
		b.ReportMetric(float64(m.sum.Nanoseconds())/float64(blocks), "cpu-ns/block")
	}
}

func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func openTestB(b *testing.B) *Store {
	s, err := Open(context.Background(), b.TempDir()+"/recon.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
