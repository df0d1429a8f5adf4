package icrc3

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestOrderCacheSortsAsSortPairs drives one cache through maps that repeat
// a few key sets in a few wire orders with new values each time, key sets
// whose hashes share their first eight bytes (or are equal: a repeated
// key), and sizes around the cache's limit, against sortPairs on a copy.
// A remembered order applied where it does not hold would be a wrong map
// hash; an order claimed from keys alone for a repeated key would ignore
// the values that decide it, and let the repeat through parse.
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
		repeated := false
		for i := 64; i < len(want); i += 64 {
			if bytes.Equal(want[i:i+32], want[i-64:i-32]) {
				repeated = true
			}
		}
		cached := false
		for _, e := range c.e {
			match := e.n == len(l.keys)
			for i, k := range l.keys {
				match = match && e.key[i] == binary.BigEndian.Uint64(k[:8])
			}
			cached = cached || match
		}
		perm, ok := c.order(s)
		if !ok {
			if !repeated && len(l.keys) <= maxOrderedPairs {
				t.Fatalf("round %d, %d pairs: no order for distinct keys", round, len(l.keys))
			}
			continue
		}
		if repeated {
			t.Fatalf("round %d: an order claimed for a repeated key", round)
		}
		got := make([]byte, len(s))
		layOut(got, s, &perm)
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d, %d pairs: order differs from sortPairs", round, len(l.keys))
		}
		if cached {
			hits++
		}
	}
	if hits < 1000 {
		t.Fatalf("only %d of 5000 maps laid out from a remembered order", hits)
	}
}
