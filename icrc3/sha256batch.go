package icrc3

import "unsafe"

// A page's block hashes are thousands of independent SHA-256 sums, most of
// one or two blocks. SHA-NI runs one message's rounds at a time, and two
// interleaved messages gain little, so where AVX-512 is there
// sha256Batch queues the sums and computes sixteen at once (sha256x16),
// one message in each dword lane. The sums are queued by shape (whole
// blocks, then one or two padded ones) in groups of sixteen of one shape,
// whose lanes start and finish together: the kernel takes the states in,
// pads the last block in registers and puts the digests out itself, so a
// queued sum costs Go five stores and the lanes never wait on Go.

// sha256Batch queues SHA-256 sums and computes them together. Its zero
// value is ready to use; after run it is empty and can be used again
// without allocating.
type sha256Batch struct {
	// shapes[2*full+pads-1] queues the sums of full whole blocks and
	// pads padded ones.
	shapes [2 * sha256MaxFull]sha256Shape
	queued int
	// long are the sums of sha256MaxFull whole blocks or more (none in a
	// block hash), summed one by one.
	long []sha256Job
	// mids holds addFrom's states, in chunks that never move while
	// groups point into them.
	mids []*[64][8]uint32
	nmid int
	idle *sha256Idle
}

// sha256Group is sixteen sums of one shape as sha256x16 reads them, at
// offsets the assembly spells out (TestSHA256GroupLayout).
type sha256Group struct {
	h     [16]*[8]uint32 // the lane's state before its whole blocks
	full  [16]*byte      // its message from there on
	rest  [16]uint64     // the bytes after the whole blocks, < 64
	bits  [16]uint64     // the whole message's length in bits
	dst   [16]*Hash      // where its digest goes
	saved [8][16]uint32  // the kernel's own: the state before a block
	// mid says a lane starts from a state of its own (addFrom), not the
	// initial one.
	mid bool
}

// sha256Shape is the queue of one shape: groups[:used] are in use, the
// last of them with n lanes filled.
type sha256Shape struct {
	groups []*sha256Group
	used   int
	n      int
}

// sha256Job is a sum for sha256Finish.
type sha256Job struct {
	h     *[8]uint32
	tail  []byte
	total uint64
	dst   *Hash
}

// sha256Idle is what the idle lanes of a group short of sixteen read and
// write: never the stack, which may move under the kernel's addresses.
type sha256Idle struct {
	blocks [sha256MaxFull * 64]byte
	sink   Hash
}

const (
	// sha256MaxFull bounds the whole blocks of a sum sent to the lanes.
	sha256MaxFull = 16
	// sha256GroupMin is the fewest sums of one shape worth a pass of the
	// lanes, which costs the same for one as for sixteen: fewer are
	// summed one by one (BenchmarkSHA256BatchSize).
	sha256GroupMin = 8
)

// useBatchSHA says run uses the sixteen-lane kernel; tests turn it off to
// cover the sequential path.
var useBatchSHA = haveBatchSHA

// sha256GroupMinFor is sha256GroupMin, a variable so that a benchmark can
// measure the lanes below it.
var sha256GroupMinFor = sha256GroupMin

// add queues sum256(msg) to be written to *dst by run. msg is read only in
// run and must not change before it; dst must stay valid until then.
func (b *sha256Batch) add(msg []byte, dst *Hash) {
	b.queue(&sha256IV, msg, uint64(len(msg)), dst)
}

// addFrom queues what sha256Finish(h, tail, total, dst) computes: h, the
// state after the whole blocks before tail, is copied now; tail is read
// only in run.
func (b *sha256Batch) addFrom(h *[8]uint32, tail []byte, total uint64, dst *Hash) {
	if b.nmid == 64*len(b.mids) {
		b.mids = append(b.mids, new([64][8]uint32))
	}
	mid := &b.mids[b.nmid/64][b.nmid%64]
	b.nmid++
	*mid = *h
	b.queue(mid, tail, total, dst)
}

func (b *sha256Batch) queue(h *[8]uint32, tail []byte, total uint64, dst *Hash) {
	b.queued++
	full := len(tail) / 64
	if full >= sha256MaxFull {
		b.long = append(b.long, sha256Job{h, tail, total, dst})
		return
	}
	rest := len(tail) % 64
	si := 2 * full
	if rest >= 56 {
		si++
	}
	s := &b.shapes[si]
	if s.n == 16 || s.used == 0 {
		if s.used == len(s.groups) {
			s.groups = append(s.groups, new(sha256Group))
		}
		s.used++
		s.n = 0
		s.groups[s.used-1].mid = false
	}
	g, i := s.groups[s.used-1], s.n
	s.n++
	g.mid = g.mid || h != &sha256IV
	g.h[i] = h
	g.full[i] = unsafe.SliceData(tail)
	g.rest[i] = uint64(rest)
	g.bits[i] = total << 3
	g.dst[i] = dst
}

// len reports the queued sums.
func (b *sha256Batch) len() int { return b.queued }

// run computes every queued sum, writes each to its dst and empties the
// batch.
func (b *sha256Batch) run() {
	lanes := useBatchSHA
	if lanes && b.idle == nil {
		b.idle = new(sha256Idle)
	}
	for si := range b.shapes {
		s := &b.shapes[si]
		full, pads := si/2, si%2+1
		for k, g := range s.groups[:s.used] {
			n := 16
			if k == s.used-1 {
				n = s.n
			}
			switch {
			case lanes && n == 16:
				sha256x16(g, full, pads, !g.mid)
			case lanes && n >= sha256GroupMinFor:
				for i := n; i < 16; i++ {
					g.h[i] = &sha256IV
					g.full[i] = &b.idle.blocks[0]
					g.rest[i] = 0
					g.dst[i] = &b.idle.sink
				}
				sha256x16(g, full, pads, !g.mid)
			default:
				for i := range n {
					j := sha256Job{g.h[i], unsafe.Slice(g.full[i], 64*full+int(g.rest[i])), g.bits[i] >> 3, g.dst[i]}
					j.finish()
				}
			}
			// Drop the references to messages and destinations.
			clear(g.h[:])
			clear(g.full[:])
			clear(g.dst[:])
		}
		s.used, s.n = 0, 0
	}
	for i := range b.long {
		b.long[i].finish()
	}
	clear(b.long)
	b.long = b.long[:0]
	b.queued, b.nmid = 0, 0
}

// finish computes the job's sum one message at a time.
func (j *sha256Job) finish() {
	if j.h == &sha256IV {
		sum256To(j.dst, j.tail)
		return
	}
	h := *j.h
	sha256Finish(&h, j.tail, j.total, j.dst)
}
