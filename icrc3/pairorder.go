package icrc3

import "encoding/binary"

// A page's maps at one depth mostly repeat a few key sets in the same wire
// order (a DFINITY transfer's tx map writes its keys as every other
// transfer's does), so the order sortPairs finds for them repeats too. A
// pairOrder remembers one: the first eight bytes of each key hash in wire
// order and where sorting put that pair. When those eight bytes tell all
// the keys apart they alone decide the sorted order, so another map whose
// keys begin with the same bytes in the same wire order sorts the same way
// and can be laid out without comparing anything.

const maxOrderedPairs = 16

type pairOrder struct {
	n    int
	key  [maxOrderedPairs]uint64 // wire order
	perm [maxOrderedPairs]uint8  // wire position to sorted position
}

// orderCache keeps the last few orders met at one depth.
type orderCache struct {
	e    [4]pairOrder
	next int
	tmp  []byte // the sorted copy a remembered order lays out
}

// sorted returns s's pairs sorted as sortPairs sorts them, and whether
// their keys are known to be distinct. It either sorts s in place and
// returns it, or returns a sorted copy in c.tmp, valid until the next call.
func (c *orderCache) sorted(s []byte) ([]byte, bool) {
	n := len(s) / 64
	if n < 2 || n > maxOrderedPairs {
		sortPairs(s)
		return s, false
	}
	var k [maxOrderedPairs]uint64
	for i := range n {
		k[i] = binary.BigEndian.Uint64(s[i*64:])
	}
	for j := range c.e {
		e := &c.e[j]
		if e.n != n || e.key != k {
			continue
		}
		if cap(c.tmp) < len(s) {
			c.tmp = make([]byte, 64*maxOrderedPairs)
		}
		t := c.tmp[:len(s)]
		for i := range n {
			p := int(e.perm[i]) * 64
			copy(t[p:p+64], s[i*64:i*64+64])
		}
		return t, true
	}
	sortPairs(s)
	// Remember the order only if the first eight bytes decide it.
	e := pairOrder{n: n, key: k}
	for i := range n {
		found := -1
		for j := range n {
			if binary.BigEndian.Uint64(s[j*64:]) == k[i] {
				if found >= 0 {
					return s, false // two keys begin alike
				}
				found = j
			}
		}
		e.perm[i] = uint8(found)
	}
	c.e[c.next] = e
	c.next = (c.next + 1) % len(c.e)
	return s, true
}
