package icrc3

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"

	"github.com/reconciled/reconciled/internal/testutil"
)

// dfinityTransfer is a block as the DFINITY ICRC ledger writes an
// icrc1_transfer with a memo and created_at_time and the fee left to the ledger.
func dfinityTransfer(r *rand.Rand, i uint64, phash *Hash) Value {
	ts := Uint(1_750_000_000_000_000_000 + i*1_000_003)
	fs := []Field{}
	if phash != nil {
		fs = append(fs, F("phash", Blob(phash[:])))
	}
	from := ArrayValue(Blob(randBytes(r, 29)))
	to := ArrayValue(Blob(randBytes(r, 29)), Blob(randBytes(r, 32)))
	fs = append(fs, F("ts", ts), F("fee", Uint(10)), F("tx", MapValue(
		F("op", Text("xfer")), F("from", from), F("to", to),
		F("amt", Uint(r.Uint64N(1e12))), F("memo", Blob(randBytes(r, 8))), F("ts", Uint(1_750_000_000_000_000_000+i*1_000_003-r.Uint64N(1e10))),
	)))
	return MapValue(fs...)
}

// reportRate reports blocks per wall second and per CPU second: on a
// shared machine wall time depends on the neighbours; with -cpu 1 the CPU
// time is what one core spent, so blocks per CPU-second is the figure to
// compare.
func reportRate(b *testing.B, blocks int, cpu0 time.Duration) {
	b.ReportMetric(float64(blocks*b.N)/b.Elapsed().Seconds(), "blocks/s")
	b.ReportMetric(float64(blocks*b.N)/(testutil.CPUTime(b)-cpu0).Seconds(), "blocks/cpu-s")
}

func benchPage(b testing.TB, n int) ([]byte, page) {
	r := rand.New(rand.NewPCG(11, uint64(n)))
	p := page{logLength: NatFromUint64(1_000_000)}
	var prev *Hash
	for i := range n {
		id := uint64(500_000 + i)
		v := dfinityTransfer(r, id, prev)
		h := v.Hash()
		prev = &h
		p.ids = append(p.ids, id)
		p.values = append(p.values, v)
	}
	return encodeGetBlocks(b, p), p
}

// agGetBlocksResult is the reply as agent-go's reflection decoder fills it.
type agGetBlocksResult struct {
	LogLength idl.Nat `ic:"log_length"`
	Blocks    []struct {
		ID    idl.Nat `ic:"id"`
		Block agValue `ic:"block"`
	} `ic:"blocks"`
	ArchivedBlocks []struct {
		Args []struct {
			Start  idl.Nat `ic:"start"`
			Length idl.Nat `ic:"length"`
		} `ic:"args"`
		Callback idl.Function `ic:"callback"`
	} `ic:"archived_blocks"`
}

func fromAg(a agValue) Value {
	switch {
	case a.Blob != nil:
		return Blob(*a.Blob)
	case a.Text != nil:
		return Text(*a.Text)
	case a.Nat != nil:
		n, _ := NatFromBig(a.Nat.BigInt())
		return NatValue(n)
	case a.Int != nil:
		return IntValue(a.Int.BigInt())
	case a.Array != nil:
		vs := make([]Value, len(*a.Array))
		for i, x := range *a.Array {
			vs[i] = fromAg(x)
		}
		return ArrayValue(vs...)
	case a.Map != nil:
		fs := make([]Field, len(*a.Map))
		for i, e := range *a.Map {
			fs[i] = F(e.Key, fromAg(e.Value))
		}
		return MapValue(fs...)
	}
	return Value{}
}

// benchDecode measures one page decoder: decode, hash and parse.
func benchDecode[R any](b *testing.B, raw []byte, n int, decode func([]byte) (R, error), blocks func(R) int) {
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	cpu0 := testutil.CPUTime(b)
	for b.Loop() {
		res, err := decode(raw)
		if err != nil || blocks(res) != n {
			b.Fatal(err)
		}
	}
	reportRate(b, n, cpu0)
}

// BenchmarkDecodeGetBlocks measures, side by side, the page decoder
// ("ours": blocks read straight into their encoding), the tree-building
// reader it replaced and keeps as its oracle ("tree"), and agent-go's
// reflection decoder followed by the same hashing and parsing.
func BenchmarkDecodeGetBlocks(b *testing.B) {
	nBlocks := func(r *GetBlocksResult) int { return len(r.Blocks) }
	for _, n := range []int{100, 2000} {
		raw, _ := benchPage(b, n)
		b.Run(fmt.Sprintf("ours/%d", n), func(b *testing.B) { benchDecode(b, raw, n, DecodeGetBlocksResult, nBlocks) })
		b.Run(fmt.Sprintf("tree/%d", n), func(b *testing.B) { benchDecode(b, raw, n, decodeGetBlocksTree, nBlocks) })
		b.Run(fmt.Sprintf("agent-go/%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			cpu0 := testutil.CPUTime(b)
			for b.Loop() {
				var res agGetBlocksResult
				if err := candid.Unmarshal(raw, []any{&res}); err != nil || len(res.Blocks) != n {
					b.Fatal(err)
				}
				// The same work as ours: Values, hashes, typed fields.
				for _, e := range res.Blocks {
					v := fromAg(e.Block)
					if _, err := ParseBlock(e.ID.BigInt().Uint64(), v, v.Hash()); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportRate(b, n, cpu0)
		})
	}
}

// BenchmarkDecodeLegacyGetBlocks is BenchmarkDecodeGetBlocks for the
// legacy page (2000 blocks, Nat64 numbers as the DFINITY ledger writes them).
func BenchmarkDecodeLegacyGetBlocks(b *testing.B) {
	_, p := benchPage(b, 2000)
	p.first, p.chainLen = p.ids[0], p.ids[0]+2000
	raw := encodeLegacy(b, p, true)
	nBlocks := func(r *LegacyGetBlocksResult) int { return len(r.Blocks) }
	b.Run("ours/2000", func(b *testing.B) { benchDecode(b, raw, 2000, DecodeLegacyGetBlocks, nBlocks) })
	b.Run("tree/2000", func(b *testing.B) { benchDecode(b, raw, 2000, decodeLegacyTree, nBlocks) })
}

// TestAgentReflectionAgrees checks the benchmark's reference path decodes the
// page to the same blocks, so the comparison is like for like.
func TestAgentReflectionAgrees(t *testing.T) {
	raw, p := benchPage(t, 50)
	var res agGetBlocksResult
	if err := candid.Unmarshal(raw, []any{&res}); err != nil {
		t.Fatal(err)
	}
	ours, err := DecodeGetBlocksResult(raw)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range res.Blocks {
		v := fromAg(e.Block)
		if !v.Equal(p.values[i]) || v.Hash() != ours.Blocks[i].Hash || e.ID.BigInt().Uint64() != ours.Blocks[i].Index {
			t.Fatalf("block %d differs", i)
		}
	}
}

// BenchmarkSHA256PerBlock is the hashing ICRC-3 prescribes for one block
// of benchPage, without any decoding: the twelve SHA-256 sums a DFINITY
// transfer needs (phash, ts, from's owner and array, to's owner,
// subaccount and array, amt, memo, tx.ts, the tx map's six pairs and the
// block's four; the fee, op and keys hash from caches), 23 compressions.
// It bounds what a decoder can reach per CPU second ("crypto": with
// crypto/sha256's Sum256; "blocks": with sum256, the page decoder's,
// which also saves the tx map's first compression while tx.op repeats).
func BenchmarkSHA256PerBlock(b *testing.B) {
	sizes := []int{32, 9, 29, 32, 29, 32, 64, 6, 8, 9, 6 * 64, 4 * 64}
	for _, c := range []struct {
		name string
		sum  func([]byte) Hash
	}{{"crypto", func(p []byte) Hash { return sha256.Sum256(p) }}, {"blocks", sum256}} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 384)
			cpu0 := testutil.CPUTime(b)
			for b.Loop() {
				for range 2000 {
					for _, n := range sizes {
						h := c.sum(buf[:n])
						buf[0] = h[0]
					}
				}
			}
			reportRate(b, 2000, cpu0)
		})
	}
}

// BenchmarkDecodeInterleaved alternates the page decoder and the tree
// reader on the same page, page by page, and charges each the process CPU
// time of its turns: on a shared machine whose load moves by the second,
// benchmarks run one after the other compare different machines.
func BenchmarkDecodeInterleaved(b *testing.B) {
	gb, p := benchPage(b, 2000)
	p.first, p.chainLen = p.ids[0], p.ids[0]+2000
	lg := encodeLegacy(b, p, true)
	pages := []struct {
		name       string
		raw        []byte
		ours, tree func([]byte) (int, error)
	}{
		{"icrc3/2000", gb,
			func(r []byte) (int, error) { res, err := DecodeGetBlocksResult(r); return blocksOf(res, err) },
			func(r []byte) (int, error) { res, err := decodeGetBlocksTree(r); return blocksOf(res, err) }},
		{"legacy/2000", lg,
			func(r []byte) (int, error) { res, err := DecodeLegacyGetBlocks(r); return legacyBlocksOf(res, err) },
			func(r []byte) (int, error) { res, err := decodeLegacyTree(r); return legacyBlocksOf(res, err) }},
	}
	for _, pg := range pages {
		b.Run(pg.name, func(b *testing.B) {
			var ours, tree time.Duration
			for b.Loop() {
				t0 := testutil.CPUTime(b)
				if n, err := pg.ours(pg.raw); err != nil || n != 2000 {
					b.Fatal(n, err)
				}
				t1 := testutil.CPUTime(b)
				if n, err := pg.tree(pg.raw); err != nil || n != 2000 {
					b.Fatal(n, err)
				}
				ours, tree = ours+t1-t0, tree+testutil.CPUTime(b)-t1
			}
			b.ReportMetric(float64(2000*b.N)/ours.Seconds(), "ours-blocks/cpu-s")
			b.ReportMetric(float64(2000*b.N)/tree.Seconds(), "tree-blocks/cpu-s")
		})
	}
}

func blocksOf(r *GetBlocksResult, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return len(r.Blocks), nil
}

func legacyBlocksOf(r *LegacyGetBlocksResult, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return len(r.Blocks), nil
}
