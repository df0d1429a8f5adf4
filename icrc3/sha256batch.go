package icrc3

// A page's block hashes are thousands of independent SHA-256 sums, most of
// one or two blocks. SHA-NI runs one message's rounds at a time, and two
// interleaved messages gain little, so where AVX-512 is there the sums
// are queued (pageHashes) and computed sixteen at once (sha256x16), one
// message in each dword lane. They are queued by shape (whole blocks, then
// one or two padded ones) and run in groups of sixteen of one shape, whose
// lanes start and finish together: the kernel takes the states in, pads
// the last block in registers and puts the digests out itself, so the
// lanes never wait on Go. A group is filled on the stack just before its
// pass: filling one in the heap would cost a write barrier per pointer
// while the GC marks.

// sha256Group is sixteen sums of one shape as sha256x16 reads them, at
// offsets the assembly spells out (TestSHA256GroupLayout).
type sha256Group struct {
	h     [16]*[8]uint32 // the lane's state before its whole blocks
	full  [16]*byte      // its message from there on
	rest  [16]uint64     // the bytes after the whole blocks, < 64
	bits  [16]uint64     // the whole message's length in bits
	dst   [16]*Hash      // where its digest goes
	saved [8][16]uint32  // the kernel's own: the state before a block
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

// sha256Shapes counts the shapes a group can have, plus one for the sums
// of sha256MaxFull whole blocks or more (a Value of a kilobyte or more;
// none in a DFINITY block), which are summed one by one.
const sha256Shapes = 2*sha256MaxFull + 1

// sha256ShapeOf is the shape of a sum whose tail (its message after the
// blocks its state holds) is n bytes long: twice its whole blocks, plus
// one if its padding takes two blocks.
func sha256ShapeOf(n int) int {
	full := n / 64
	if full >= sha256MaxFull {
		return sha256Shapes - 1
	}
	if n%64 >= 56 {
		return 2*full + 1
	}
	return 2 * full
}

// sha256Lanes holds what the idle lanes of a short group use.
type sha256Lanes struct{ idle *sha256Idle }

// pass computes the sums in g's first k lanes, all of shape si; the other
// lanes idle. iv says no lane resumes from a state of its own, so the
// kernel broadcasts the initial one. g should be on the caller's stack (see
// above).
func (l *sha256Lanes) pass(g *sha256Group, k, si int, iv bool) {
	if k < 16 {
		if l.idle == nil {
			l.idle = new(sha256Idle)
		}
		for lane := k; lane < 16; lane++ {
			g.h[lane] = &sha256IV
			g.full[lane] = &l.idle.blocks[0]
			g.rest[lane] = 0
			g.dst[lane] = &l.idle.sink
		}
	}
	sha256x16(g, si/2, si%2+1, iv)
}

// sha256Job is a sum for sha256Finish.
type sha256Job struct {
	h     *[8]uint32
	tail  []byte
	total uint64
	dst   *Hash
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
