package icrc3

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRecordedEntriesMatchTheEncoding holds the entries the page decoder
// records while it writes a block's encoding to the ones rawEntries reads
// back from it, for the block's map and every Map directly in it, and
// checks no such Map is left out: parse trusts them instead of walking
// the encoding.
func TestRecordedEntriesMatchTheEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	vals := append(malformedBlocks(), randChain(r, 0, 60)...)
	vals = append(vals,
		MapValue(F("a", MapValue(F("k", Uint(1)), F("k", Uint(2)))), F("b", MapValue()), F("c", ArrayValue(MapValue(F("deep", Uint(1)))))),
		MapValue(),
		ArrayValue(MapValue(F("k", Uint(1)))),
	)
	checked := 0
	for i, v := range vals {
		p := page{logLength: NatFromUint64(9), ids: []uint64{uint64(i)}, values: []Value{v}}
		d := newDecoder(encodeGetBlocks(t, p))
		if _, err := d.getBlocksResult(); err != nil {
			if _, ok := err.(*BlockError); !ok {
				t.Fatalf("value %d: %v", i, err)
			}
		}
		raw := MarshalValue(v)
		var want []int // offsets of the Maps at depth 0 and 1
		if Kind(raw[1]) == KindMap {
			want = append(want, 1)
			for _, e := range rawEntries(raw, 1, nil) {
				if Kind(raw[e.val]) == KindMap {
					want = append(want, e.val)
				}
			}
		} else if Kind(raw[1]) == KindArray {
			n, p := rawCount(raw, 1)
			for range n {
				if Kind(raw[p]) == KindMap {
					want = append(want, p)
				}
				p = rawSkip(raw, p)
			}
		}
		var got []int
		for _, m := range d.ents.maps {
			got = append(got, m.pos)
			es := d.ents.slab[m.lo:m.hi]
			if w := rawEntries(raw, m.pos, nil); !slices.Equal(es, w) {
				t.Fatalf("value %d, Map at %d: recorded %v, encoding has %v", i, m.pos, es, w)
			}
			checked++
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("value %d: Maps recorded at %v, the encoding has them at %v", i, got, want)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d Maps checked", checked)
	}
}

// TestLegacyRefusedBlockThenBrokenReply: the legacy decoder parses each
// block as it reads it, yet a block it refuses must not hide an error of
// the reply's decoding further on, which comes first, as it did when the
// blocks were parsed after the whole reply.
func TestLegacyRefusedBlockThenBrokenReply(t *testing.T) {
	clear(seen)
	defer seen.require(t, "block error", "other error")
	r := rand.New(rand.NewPCG(43, 44))
	good := randChain(r, 20, 3)
	for _, bad := range malformedBlocks() {
		vals := []Value{good[0], bad, good[1], good[2]}
		p := page{first: 20, chainLen: 24, values: vals, archived: randArchived(r)}
		lg := encodeLegacy(t, p, true)
		checkLegacyReaders(t, lg)
		checkLegacyReaders(t, append(lg, 0)) // a trailing byte
		checkLegacyReaders(t, lg[:len(lg)-1])
	}
}
