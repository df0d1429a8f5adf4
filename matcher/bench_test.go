package matcher

import (
	"testing"

	"github.com/reconciled/reconciled/icrc3"
)

func BenchmarkParseIntent(b *testing.B) {
	a := transferArg()
	body := transferBody().with("arg_hex", candidHex(b, a)).json(b)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := ParseIntent(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMatch is the per-block cost of a window scan: most blocks differ
// in stamp, a few are near misses.
func BenchmarkMatch(b *testing.B) {
	in := mustParse(b, transferBody())
	other := transferBlock()
	other.createdAt = u64p(stamp + 1)
	near := transferBlock()
	near.amt = natp(1)
	blocks := []*icrc3.Block{other.with("1xfer").block(b), near.with("1xfer").block(b), transferBlock().with("1xfer").block(b)}
	for b.Loop() {
		for _, blk := range blocks {
			Match(in, blk, rules)
		}
	}
}

func BenchmarkCanonicalHash(b *testing.B) {
	in := mustParse(b, transferBody())
	for b.Loop() {
		in.Hash()
	}
}
