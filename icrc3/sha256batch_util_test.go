package icrc3

import (
	"bytes"
	"testing"
)

// sha256Batch queues sums given as slices and pointers and runs them
// through pageHashes, the decoder's queue, as the tests and benchmarks of
// the lanes drive them. The messages are copied into the queue's buffer
// and the digests come back through its arena, whose slots are spaced
// with guard bytes that run must leave alone, as it must the messages.
type sha256Batch struct {
	hs   pageHashes
	sums []batchSum
	buf  []byte
}

type batchSum struct {
	msg   []byte
	skip  int // blocks in h
	h     [8]uint32
	dst   *Hash
	total int
}

const batchGuard = 0x5a

func (b *sha256Batch) add(msg []byte, dst *Hash) {
	b.sums = append(b.sums, batchSum{msg: msg, dst: dst, total: len(msg)})
}

// addFrom copies h now, as the decoder's states are copied when queued.
// The blocks h holds are not given: zeros stand for them in the buffer.
func (b *sha256Batch) addFrom(h *[8]uint32, tail []byte, total uint64, dst *Hash) {
	skip := (int(total) - len(tail)) / 64
	b.sums = append(b.sums, batchSum{msg: tail, skip: skip, h: *h, dst: dst, total: int(total)})
}

func (b *sha256Batch) len() int { return len(b.sums) }

// run computes the sums; t, when not nil, fails the test if the queue's
// message buffer or its slots' guards changed.
func (b *sha256Batch) run(t testing.TB) {
	hs := &b.hs
	hs.msgs, hs.arena = hs.msgs[:0], hs.arena[:0]
	for i, s := range b.sums {
		off := len(hs.msgs)
		hs.msgs = append(hs.msgs, make([]byte, 64*s.skip)...)
		hs.msgs = append(hs.msgs, s.msg...)
		slot := len(hs.arena)
		hs.arena = append(hs.arena, bytes.Repeat([]byte{batchGuard}, 64)...)
		j := hashJob{off: uint32(off), n: uint32(s.total), dst: hashRef(slot + 16), src: srcMsgs}
		if s.skip > 0 {
			hs.states = append(hs.states, b.sums[i].h)
			j.skip, j.state = uint8(s.skip), uint32(len(hs.states)-1)
		}
		hs.push(j)
	}
	b.buf = append(b.buf[:0], hs.msgs...)
	hs.run()
	for i, s := range b.sums {
		slot := hs.arena[64*i : 64*i+64]
		*s.dst = Hash(slot[16:48])
		if t == nil {
			continue
		}
		for k, c := range append(slot[:16:16], slot[48:]...) {
			if c != batchGuard {
				t.Fatalf("sum %d: guard byte %d beside its digest changed to %#x", i, k, c)
			}
		}
	}
	if t != nil && !bytes.Equal(b.buf, hs.msgs) {
		t.Fatalf("run changed the messages it read")
	}
	clear(b.sums)
	b.sums = b.sums[:0]
}
