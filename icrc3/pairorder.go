package icrc3

import (
	"bytes"
	"encoding/binary"
)

// A map's hash is over its pairs sorted by (key hash, value hash), but the
// page's value hashes are computed later, in batches (hashjobs.go), so a
// map's order is decided from its key hashes alone, which are known as soon
// as the keys are read. That is the whole order when the keys are distinct;
// a repeated key is the one case where the values decide, and the decoder
// then hashes the map at once.
//
// A page's maps at one depth mostly repeat a few key sets in the same wire
// order (a DFINITY transfer's tx map writes its keys as every other
// transfer's does), so the order repeats too. A pairOrder remembers one:
// the first eight bytes of each key hash in wire order and where sorting
// put that pair. When those eight bytes tell all the keys apart they alone
// decide the order, so another map whose keys begin with the same bytes in
// the same wire order sorts the same way without comparing anything.

const maxOrderedPairs = 16

// pairPerm maps a pair's wire position to its sorted position.
type pairPerm [maxOrderedPairs]uint8

type pairOrder struct {
	n    int
	key  [maxOrderedPairs]uint64 // wire order
	perm pairPerm
}

// orderCache keeps the last few orders met at one depth.
type orderCache struct {
	e    [8]pairOrder
	next int
}

// order returns where sorting puts each of s's pairs, read from their key
// hashes only. ok is false when two key hashes are equal (a repeated key)
// or there are more than maxOrderedPairs pairs: the values are then needed
// to sort. c may be nil (no cache).
func (c *orderCache) order(s []byte) (perm pairPerm, ok bool) {
	n := len(s) / 64
	if n > maxOrderedPairs {
		return perm, false
	}
	if n < 2 {
		return perm, true
	}
	var k [maxOrderedPairs]uint64
	for i := range n {
		k[i] = binary.BigEndian.Uint64(s[i*64:])
	}
	if c != nil {
		for j := range c.e {
			if e := &c.e[j]; e.n == n && e.key == k {
				return e.perm, true
			}
		}
	}
	// Insertion sort of wire positions by key hash.
	var idx [maxOrderedPairs]uint8
	for i := range n {
		j := i
		for j > 0 {
			p := int(idx[j-1])
			// The first eight bytes mostly decide; the rest only on a tie.
			cmp := cmpUint64(k[i], k[p])
			if cmp == 0 {
				if cmp = bytes.Compare(s[i*64+8:i*64+32], s[p*64+8:p*64+32]); cmp == 0 {
					return perm, false
				}
			}
			if cmp > 0 {
				break
			}
			idx[j] = idx[j-1]
			j--
		}
		idx[j] = uint8(i)
	}
	for pos := range n {
		perm[idx[pos]] = uint8(pos)
	}
	if c != nil && allDistinct(k[:n]) {
		c.e[c.next] = pairOrder{n: n, key: k, perm: perm}
		c.next = (c.next + 1) % len(c.e)
	}
	return perm, true
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// allDistinct reports whether no two of k are equal: only then do the
// first eight bytes decide the order.
func allDistinct(k []uint64) bool {
	for i := range k {
		for j := i + 1; j < len(k); j++ {
			if k[i] == k[j] {
				return false
			}
		}
	}
	return true
}

// layOut writes s's pairs into dst in perm's order.
func layOut(dst, s []byte, perm *pairPerm) {
	for i := range len(s) / 64 {
		p := int(perm[i]) * 64
		copy(dst[p:p+64], s[i*64:i*64+64])
	}
}
