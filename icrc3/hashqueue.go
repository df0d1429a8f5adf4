package icrc3

import "math/bits"

// The page decoders' SHA-256 sums go through a hashQueue so that two of
// them can share the two-lane block function: one SHA256RNDS2 waits for
// the one before, so a single message leaves the SHA unit idle between
// rounds (BenchmarkSHA256Lanes). A sum whose inputs are complete waits in
// the queue for a partner of the same length in blocks; it is run early,
// with whatever partner there is, when its result is about to be read: a
// container's hash needs its children's, and a block's hash is read once
// the page is read.
//
// A waiting sum names where its result goes (dst) and the scratch depth
// that memory belongs to (dstDepth, -1 for memory no later read reuses),
// so the decoder runs exactly the sums it is about to read or overwrite.

// hashJob is one pending sum: the rest of a message after the blocks
// already folded into h.
type hashJob struct {
	h        [8]uint32
	tail     []byte
	total    uint64 // the whole message's length in bytes
	dst      *Hash
	dstDepth int
}

// blocks is the number of compressions the job has left, padding included.
func (j *hashJob) blocks() int {
	n := len(j.tail) / 64
	if len(j.tail)%64 < 56 {
		return n + 1
	}
	return n + 2
}

// hashSlots is the number of waiting places; a job of more blocks waits
// in the last.
const hashSlots = 8

type hashQueue struct {
	used uint16 // bit k: slot[k] holds a job
	slot [hashSlots]hashJob
	// buf[k] holds the message of slot k's job when the caller's memory
	// for it would be reused before the job runs.
	buf [hashSlots][]byte
}

// add hashes the message whose state after its first blocks is *h and
// whose rest is tail into dst now if a job of as many blocks is waiting,
// else leaves it waiting (h is copied). stable says tail stays as it is
// until the page is read; if not, it is copied. The job is written into its
// slot in place: building it on the stack and copying it costs as much as
// the pairing saves.
func (q *hashQueue) add(h *[8]uint32, tail []byte, total uint64, dst *Hash, dstDepth int, stable bool) {
	n := len(tail)/64 + 1
	if len(tail)%64 >= 56 {
		n++
	}
	k := min(n, hashSlots) - 1
	p := &q.slot[k]
	if q.used&(1<<k) != 0 {
		q.used &^= 1 << k
		h2 := *h
		sha256Finish2(&p.h, &h2, p.tail, tail, p.total, total, p.dst, dst)
		return
	}
	if !stable {
		q.buf[k] = append(q.buf[k][:0], tail...)
		tail = q.buf[k]
	}
	p.h, p.tail, p.total, p.dst, p.dstDepth = *h, tail, total, dst, dstDepth
	q.used |= 1 << k
}

// flush runs every waiting job whose result lands at scratch depth
// minDepth or deeper (all of them for minDepth -1), pairing them with each
// other; one left over is paired with a waiting job no longer than itself,
// which then costs nothing extra, or else run alone.
func (q *hashQueue) flush(minDepth int) {
	var left *hashJob
	for m := q.used; m != 0; m &= m - 1 {
		k := bits.TrailingZeros16(m)
		j := &q.slot[k]
		if j.dstDepth < minDepth {
			continue
		}
		q.used &^= 1 << k
		if left == nil {
			left = j
			continue
		}
		sha256Finish2(&left.h, &j.h, left.tail, j.tail, left.total, j.total, left.dst, j.dst)
		left = nil
	}
	if left == nil {
		return
	}
	// The longest waiting job that fits under the left-over one.
	kl := min(left.blocks(), hashSlots) - 1
	if m := q.used & (1<<kl - 1); m != 0 {
		k := 15 - bits.LeadingZeros16(m)
		q.used &^= 1 << k
		p := &q.slot[k]
		sha256Finish2(&left.h, &p.h, left.tail, p.tail, left.total, p.total, left.dst, p.dst)
		return
	}
	sha256Finish(&left.h, left.tail, left.total, left.dst)
}
