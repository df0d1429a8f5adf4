package icrc3

import (
	"encoding/binary"
	"unsafe"
)

// A page's block hashes are thousands of independent SHA-256 sums, most of
// one or two blocks. SHA-NI runs one message's rounds at a time, and two
// interleaved messages gain little, so where AVX-512 is there
// sha256Batch instead queues the sums and compresses sixteen messages'
// blocks per pass (sha256x16), one message in each dword lane. Each lane
// walks its message's whole blocks in place and its last one or two
// padded blocks from a buffer of its own, and takes the next queued sum as
// soon as its digest is out, so lanes stay busy whatever the mix of
// lengths.

// sha256Batch queues SHA-256 sums and computes them together. Its zero
// value is ready to use; after run it is empty and can be used again.
type sha256Batch struct {
	jobs  []sha256Job
	lanes *sha256Lanes
}

// sha256Job is one queued sum: the message's tail after the whole blocks
// already in h, as for sha256Finish.
type sha256Job struct {
	h       [8]uint32
	tail    []byte
	total   uint64
	dst     *Hash
	resumed bool // h is not the initial state (addFrom)
}

// sha256Lanes is the sixteen lanes' working memory. It is on the heap by
// itself, never in a caller's frame, because the kernel is handed plain
// addresses into it that a moved stack would leave behind.
type sha256Lanes struct {
	state [8][16]uint32 // word-major: state[j][i] is lane i's word j
	ptr   [16]uintptr   // the lane's next block
	left  [16]int       // blocks from ptr on before the lane needs attention
	job   [16]int       // the lane's job in jobs, or -1 when it is idle
	// padded says the lane is on its last blocks, in pad.
	padded [16]bool
	pad    [16][128]byte
	// idle is what idle lanes compress: sha256x16 reads n blocks in every
	// lane, and an idle lane never stops the others.
	idle [sha256MaxSteps * 64]byte
}

const (
	// sha256MaxSteps bounds the blocks per kernel call, so that the idle
	// block area stays small.
	sha256MaxSteps = 8
	// sha256BatchMin is the fewest sums worth the lanes: below it sequential
	// SHA-NI is faster (BenchmarkSHA256BatchSize).
	sha256BatchMin = 24
	// sha256DrainAt is the number of busy lanes at which, with nothing left
	// queued, the last sums are finished one by one: a pass costs the same
	// for one busy lane as for sixteen.
	sha256DrainAt = 4
)

// useBatchSHA says run uses the sixteen-lane kernel; tests turn it off to
// cover the sequential path.
var useBatchSHA = haveBatchSHA

// add queues sum256(msg) to be written to *dst by run. msg is read only in
// run and must not change before it; dst must stay valid until then.
func (b *sha256Batch) add(msg []byte, dst *Hash) {
	b.jobs = append(b.jobs, sha256Job{h: sha256IV, tail: msg, total: uint64(len(msg)), dst: dst})
}

// addFrom queues what sha256Finish(h, tail, total, dst) computes: h, the
// state after the whole blocks before tail, is copied now; tail is read
// only in run.
func (b *sha256Batch) addFrom(h *[8]uint32, tail []byte, total uint64, dst *Hash) {
	b.jobs = append(b.jobs, sha256Job{h: *h, tail: tail, total: total, dst: dst, resumed: true})
}

// len reports the queued sums.
func (b *sha256Batch) len() int { return len(b.jobs) }

// run computes every queued sum, writes each to its dst and empties the
// batch.
func (b *sha256Batch) run() {
	if !useBatchSHA || len(b.jobs) < sha256BatchMin {
		for i := range b.jobs {
			b.jobs[i].finish()
		}
	} else {
		if b.lanes == nil {
			b.lanes = new(sha256Lanes)
		}
		b.lanes.run(b.jobs)
	}
	clear(b.jobs) // drop the references to messages and destinations
	b.jobs = b.jobs[:0]
}

// finish computes the job's sum one message at a time.
func (j *sha256Job) finish() {
	if !j.resumed {
		sum256To(j.dst, j.tail)
		return
	}
	h := j.h
	sha256Finish(&h, j.tail, j.total, j.dst)
}

func (l *sha256Lanes) run(jobs []sha256Job) {
	next, busy := 0, 0
	for i := range 16 {
		if next < len(jobs) {
			l.start(i, jobs, next)
			next++
			busy++
		} else {
			l.stop(i)
		}
	}
	for busy > 0 {
		if next == len(jobs) && busy <= sha256DrainAt && haveSHANI {
			l.drain(jobs)
			return
		}
		n := sha256MaxSteps
		for i := range 16 {
			n = min(n, l.left[i])
		}
		sha256x16(&l.state, &l.ptr, n)
		for i := range 16 {
			if l.job[i] < 0 {
				continue
			}
			l.left[i] -= n
			l.ptr[i] += uintptr(n) * 64
			if l.left[i] > 0 {
				continue
			}
			j := &jobs[l.job[i]]
			if !l.padded[i] {
				l.padTail(i, j)
				continue
			}
			l.digest(i, j.dst)
			if next < len(jobs) {
				l.start(i, jobs, next)
				next++
			} else {
				l.stop(i)
				busy--
			}
		}
	}
}

// start puts job k in lane i.
func (l *sha256Lanes) start(i int, jobs []sha256Job, k int) {
	j := &jobs[k]
	for w := range 8 {
		l.state[w][i] = j.h[w]
	}
	l.job[i] = k
	if n := len(j.tail) / 64; n > 0 {
		l.ptr[i] = uintptr(unsafe.Pointer(unsafe.SliceData(j.tail)))
		l.left[i] = n
		l.padded[i] = false
		return
	}
	l.padTail(i, j)
}

// padTail moves lane i on to the padded last blocks of its job j.
func (l *sha256Lanes) padTail(i int, j *sha256Job) {
	rest := j.tail[len(j.tail)&^63:]
	p := &l.pad[i]
	end := 64
	if len(rest) >= 56 {
		end = 128
	}
	copy(p[:], rest)
	p[len(rest)] = 0x80
	clear(p[len(rest)+1 : end-8])
	binary.BigEndian.PutUint64(p[end-8:end], j.total<<3)
	l.ptr[i] = uintptr(unsafe.Pointer(p))
	l.left[i] = end / 64
	l.padded[i] = true
}

// stop makes lane i idle.
func (l *sha256Lanes) stop(i int) {
	l.job[i] = -1
	l.ptr[i] = uintptr(unsafe.Pointer(&l.idle))
	l.left[i] = sha256MaxSteps
}

// digest writes lane i's state to dst as a big-endian digest.
func (l *sha256Lanes) digest(i int, dst *Hash) {
	for w := range 8 {
		binary.BigEndian.PutUint32(dst[4*w:], l.state[w][i])
	}
}

// drain finishes the busy lanes' sums one by one with the block function.
func (l *sha256Lanes) drain(jobs []sha256Job) {
	for i := range 16 {
		if l.job[i] < 0 {
			continue
		}
		j := &jobs[l.job[i]]
		var h [8]uint32
		for w := range 8 {
			h[w] = l.state[w][i]
		}
		if l.padded[i] {
			off := l.ptr[i] - uintptr(unsafe.Pointer(&l.pad[i]))
			sha256BlocksDigest(&h, l.pad[i][off:][:64*l.left[i]], j.dst)
			continue
		}
		done := l.ptr[i] - uintptr(unsafe.Pointer(unsafe.SliceData(j.tail)))
		sha256Finish(&h, j.tail[done:], j.total, j.dst)
	}
}
