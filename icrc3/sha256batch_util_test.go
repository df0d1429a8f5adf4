package icrc3

import (
	"bytes"
	"testing"
	"unsafe"
)

// sha256Batch queues sums given as slices and pointers and runs them
// through pageHashes, the decoder's queue, as the tests and benchmarks of
// the lanes drive them. The messages are copied into the queue's buffer,
// or, with within set, read in place from it; the digests come back
// through the queue's arena, at every alignment, in slots whose guard
// bytes run must leave alone, as it must the messages.
type sha256Batch struct {
	hs     pageHashes
	sums   []batchSum
	within []byte
	buf    []byte
}

type batchSum struct {
	msg   []byte
	skip  int // blocks in h
	h     [8]uint32
	dst   *Hash
	total int
}

// skipped stands for the blocks a resumed sum's state holds.
var skipped [64 * 255]byte

const (
	batchGuard = 0x5a
	batchSlot  = 80 // a digest and its guards
)

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

// digestAt is where sum i's digest goes in its slot.
func digestAt(i int) int { return batchSlot*i + 8 + i%40 }

// run computes the sums; t, when not nil, fails the test if the queue's
// message buffer or its slots' guards changed.
func (b *sha256Batch) run(t testing.TB) {
	hs := &b.hs
	hs.msgs, hs.arena, hs.input = hs.msgs[:0], hs.arena[:0], b.within
	for i, s := range b.sums {
		src, off := srcMsgs, len(hs.msgs)
		if b.within != nil && s.skip == 0 {
			src = srcInput
			off = int(uintptr(unsafe.Pointer(unsafe.SliceData(s.msg))) - uintptr(unsafe.Pointer(unsafe.SliceData(b.within))))
		} else {
			hs.msgs = append(hs.msgs, skipped[:64*s.skip]...)
			hs.msgs = append(hs.msgs, s.msg...)
		}
		for range batchSlot {
			hs.arena = append(hs.arena, batchGuard)
		}
		j := hashJob{off: uint32(off), n: uint32(s.total), dst: hashRef(digestAt(i)), src: src}
		if s.skip > 0 {
			hs.states = append(hs.states, b.sums[i].h)
			j.skip, j.state = uint8(s.skip), uint32(len(hs.states)-1)
		}
		hs.push(sha256ShapeOf(s.total-64*s.skip), j)
	}
	b.buf = append(b.buf[:0], hs.msgs...)
	hs.run()
	for i, s := range b.sums {
		slot := hs.arena[batchSlot*i : batchSlot*(i+1)]
		at := digestAt(i) - batchSlot*i
		*s.dst = Hash(slot[at : at+32])
		if t == nil {
			continue
		}
		for k, c := range slot {
			if (k < at || k >= at+32) && c != batchGuard {
				t.Fatalf("sum %d: guard byte %d of its slot changed to %#x", i, k, c)
			}
		}
	}
	if t != nil && !bytes.Equal(b.buf, hs.msgs) {
		t.Fatalf("run changed the messages it read")
	}
	clear(b.sums)
	b.sums = b.sums[:0]
}
