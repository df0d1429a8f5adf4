package icrc3

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestOrderCacheSortsAsSortPairs drives one cache through maps that repeat
// a few key sets in a few wire orders with new values each time, key sets
// whose hashes share their first eight bytes (or are equal: a repeated
// key), and sizes around the cache's limit, against sortPairs on a copy.
// A remembered order applied where it does not hold would be a wrong map
// hash; "distinct" claimed for a repeated key would let it through parse.
func TestOrderCacheSortsAsSortPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	randKeys := func(n int) [][32]byte {
		ks := make([][32]byte, n)
		for i := range ks {
			for j := range ks[i] {
				ks[i][j] = byte(r.Uint32())
			}
			switch {
			case i > 0 && r.IntN(12) == 0: // the first eight bytes of another
				copy(ks[i][:8], ks[r.IntN(i)][:8])
			case i > 0 && r.IntN(16) == 0: // a repeated key
				ks[i] = ks[r.IntN(i)]
			}
		}
		return ks
	}
	type layout struct{ keys [][32]byte }
	var layouts []layout
	for range 6 {
		ks := randKeys(1 + r.IntN(maxOrderedPairs+2))
		layouts = append(layouts, layout{ks})
		// The same keys in another wire order.
		sh := append([][32]byte(nil), ks...)
		r.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
		layouts = append(layouts, layout{sh})
	}
	var c orderCache
	hits := 0
	for round := range 5000 {
		l := layouts[r.IntN(len(layouts))]
		s := make([]byte, 0, 64*len(l.keys))
		for _, k := range l.keys {
			s = append(s, k[:]...)
			for range 32 {
				s = append(s, byte(r.Uint32()))
			}
		}
		want := bytes.Clone(s)
		sortPairs(want)
		got, distinct := c.sorted(s)
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d, %d pairs: order differs from sortPairs", round, len(l.keys))
		}
		if &got[0] != &s[0] {
			hits++
		}
		if distinct {
			for i := 64; i < len(want); i += 64 {
				if bytes.Equal(want[i:i+32], want[i-64:i-32]) {
					t.Fatalf("round %d: a repeated key reported distinct", round)
				}
			}
		}
	}
	if hits < 1000 {
		t.Fatalf("only %d of 5000 maps laid out from a remembered order", hits)
	}
}
