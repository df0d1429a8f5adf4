package icrc3

import (
	"fmt"
	"sync"
	"unsafe"
)

// A page's block hashes are computed in batches rather than as each Value
// is read: independent SHA-256 sums can run many to a core at once, one
// sum at a time cannot. rawValue queues each leaf's sum and each Array's
// and Map's, the latter by height (1 + the greatest height of its
// children, a leaf's being 0), and flushHashes runs the leaves, then the
// composites of height 1, whose children are then known, and so on up to
// the blocks' own maps. Everything queued is complete, as a composite is
// queued only once all its children are, so a flush can run at any point
// of the page, not only between blocks.
//
// Queued work names its bytes and its hash slots by offsets into a few
// buffers, not by Go pointers: a page queues some twenty sums per block,
// and records holding pointers would cost a write barrier per store and a
// scan per record whenever the GC is marking, which it often is while a
// page is read. Offsets also survive a buffer's growth: the reply's bytes
// never move, and the encoding and the arena grow by append, which copies
// what was written to the same offsets.

// hashSrc names the buffer a queued message is in.
type hashSrc uint8

const (
	srcInput hashSrc = iota // the reply
	srcOut                  // the blocks' encodings
	srcArena                // composites' children's hashes
	srcMsgs                 // the sorted Maps of the height being run
)

// hashRef names a hash slot: an offset into the arena, or with blockRef
// set, the Hash of the page's block of that index.
type hashRef uint32

const blockRef hashRef = 1 << 31

// hashJob is one queued SHA-256 sum.
type hashJob struct {
	off, n uint32 // the message, in src
	dst    hashRef
	src    hashSrc
	// The message's first skip blocks are already compressed, into
	// pageHashes.states[state].
	skip  uint8
	state uint32
}

// compJob is a queued Array or Map hash.
type compJob struct {
	off, n uint32 // children's hashes (Array) or pairs in wire order (Map), in the arena
	dst    hashRef
	perm   pairPerm // Map: wire position to sorted position
	isMap  bool
	mid    int8 // Map: the d.mid slot (its depth) its first pair may match, or -1
}

// pageHashes is a page's queued hashes. It is taken from a pool when a
// page's blocks are first read and returned once their hashes are all
// written, so its buffers are reused from page to page.
type pageHashes struct {
	lanes        sha256Lanes
	jobs         [sha256Shapes][]hashJob // by the shape of their tails
	states       [][8]uint32
	comps        [][]compJob // by height - 1
	queuedBlocks int         // blocks read since the last flush

	// The buffers offsets point into. input and out are the decoder's,
	// set again before each run; blocks is the page's.
	input, out, arena, msgs []byte
	blocks                  []Block

	// short goes with the buffers from page to page: an entry is the
	// bytes of a text and their hash, true in any reply, and the next
	// page's keys are found from its first block on.
	short shortTexts
}

// emptyTail is where a lane with nothing left to read points.
var emptyTail byte

var pageHashesPool = sync.Pool{New: func() any { return new(pageHashes) }}

// hashFlushBlocks is how many blocks' hashes are queued before they are
// run: enough for full batches at every height, few enough that the pairs
// and messages stay in cache.
const hashFlushBlocks = 64

// slot is the hash r names.
func (hs *pageHashes) slot(r hashRef) *Hash {
	if r&blockRef != 0 {
		return &hs.blocks[r&^blockRef].Hash
	}
	return (*Hash)(hs.arena[r : r+32])
}

// add queues the sum of n bytes at off in src into dst.
func (hs *pageHashes) add(src hashSrc, off, n int, dst hashRef) {
	hs.push(sha256ShapeOf(n), hashJob{off: uint32(off), n: uint32(n), dst: dst, src: src})
}

// push queues j, whose tail (its bytes after the blocks its state holds)
// is of shape si.
func (hs *pageHashes) push(si int, j hashJob) { appendInPlace(&hs.jobs[si], j) }

// appendInPlace is *s = append(*s, v), storing only the length while there
// is room: storing the whole header costs a write barrier while the GC
// marks, and the queues below take one append per Value.
func appendInPlace[T any](s *[]T, v T) {
	n := len(*s)
	if n == cap(*s) {
		*s = append(*s, v)
		return
	}
	*s = (*s)[:n+1]
	(*s)[n] = v
}

// run computes every queued sum: sixteen of a shape at a time where the
// lanes are there and there are enough of them, the rest one by one.
func (hs *pageHashes) run() {
	bases := [...][]byte{srcInput: hs.input, srcOut: hs.out, srcArena: hs.arena, srcMsgs: hs.msgs}
	// The lanes take addresses: the offsets were made from slices of these
	// buffers (or of their earlier arrays, whose bytes an append copied to
	// the same offsets), so the addresses are within them and are taken
	// without the bounds checks job's slicing costs, a tenth of a pass.
	var ptrs [4]unsafe.Pointer
	for i, b := range bases {
		ptrs[i] = unsafe.Pointer(unsafe.SliceData(b))
	}
	// One group for every pass: each sets all sixteen lanes.
	var g sha256Group
	for si := range hs.jobs {
		list := hs.jobs[si]
		if si < sha256Shapes-1 && useBatchSHA {
			for len(list) >= sha256GroupMinFor {
				k := min(16, len(list))
				iv := true
				for lane, j := range list[:k] {
					skip := 64 * uint32(j.skip)
					h := &sha256IV
					if skip > 0 {
						h, iv = &hs.states[j.state], false
					}
					g.h[lane] = h
					if j.n > skip {
						g.full[lane] = (*byte)(unsafe.Add(ptrs[j.src&3], j.off+skip))
					} else {
						// An empty tail's offset may be its buffer's end,
						// and a pointer there would be past the buffer's
						// allocation, which the GC refuses to find on a
						// stack. The kernel reads nothing of it.
						g.full[lane] = &emptyTail
					}
					g.rest[lane] = uint64((j.n - skip) % 64)
					g.bits[lane] = uint64(j.n) << 3
					if j.dst&blockRef != 0 {
						g.dst[lane] = &hs.blocks[j.dst&^blockRef].Hash
					} else {
						g.dst[lane] = (*Hash)(unsafe.Add(ptrs[srcArena], j.dst))
					}
				}
				hs.lanes.pass(&g, k, si, iv)
				list = list[k:]
			}
		}
		for i := range list {
			j := hs.job(&bases, &list[i])
			j.finish()
		}
		hs.jobs[si] = hs.jobs[si][:0]
	}
	hs.states = hs.states[:0]
}

// job is j with its buffers resolved, valid until they next grow.
func (hs *pageHashes) job(bases *[4][]byte, j *hashJob) sha256Job {
	msg := bases[j.src&3][j.off : j.off+j.n]
	dst := hs.slot(j.dst)
	if j.skip > 0 {
		return sha256Job{&hs.states[j.state], msg[64*int(j.skip):], uint64(j.n), dst}
	}
	return sha256Job{&sha256IV, msg, uint64(j.n), dst}
}

// queueComp queues j at height h (≥ 1).
func (hs *pageHashes) queueComp(h int, j compJob) {
	for len(hs.comps) < h {
		hs.comps = append(hs.comps, nil)
	}
	appendInPlace(&hs.comps[h-1], j)
}

// A composite's slots are taken as its elements are read, not for the
// count its reply claims: a claimed count is bounded only by the bytes
// left, and Values nested a few dozen deep, each claiming as many elements
// as the rest of the reply could hold, would otherwise reserve dozens of
// times the reply's size before reading a byte of them.
const firstSlots = 16

// maxArena bounds the arena below blockRef, where an offset would read as
// a block index: some 2 GB of hashes, which a reply of tens of megabytes
// could only claim, never fill.
const maxArena = int(blockRef) - 1

// slots are a composite's hash slots while its elements are read: room
// slots of size bytes at off in the arena.
type slots struct{ off, room, size int }

// openSlots takes room for the first slots of a composite of n elements
// whose slots are size bytes, zeroed and valid until the next endBlocks.
func (d *decoder) openSlots(size, n int) (slots, error) {
	sl := slots{room: min(n, firstSlots), size: size}
	var err error
	if sl.off, err = d.hs.take(size * sl.room); err != nil {
		return sl, d.errf("%v", err)
	}
	return sl, nil
}

// slotAt is the offset of element i's slot, i being the next element;
// when the room is used up, the slots move to twice the room at the
// arena's end. The elements' sums queued so far write to the old slots,
// so they are run first (as any flush, at any point of a page, may be);
// the old slots are left unused until the next endBlocks.
func (d *decoder) slotAt(sl *slots, i int) (int, error) {
	if i == sl.room {
		d.flushHashes()
		off, err := d.hs.take(2 * sl.room * sl.size)
		if err != nil {
			return 0, d.errf("%v", err)
		}
		copy(d.hs.arena[off:], d.hs.arena[sl.off:sl.off+sl.room*sl.size])
		sl.off, sl.room = off, 2*sl.room
	}
	return sl.off + i*sl.size, nil
}

// take appends n zeroed bytes to the arena and returns their offset.
func (hs *pageHashes) take(n int) (int, error) {
	k := len(hs.arena)
	if n > maxArena-k {
		return 0, fmt.Errorf("Values of %d bytes of hashes exceed the decoder's %d", k+n, maxArena)
	}
	if cap(hs.arena)-k < n {
		hs.arena = append(hs.arena, make([]byte, n)...)
		return k, nil
	}
	hs.arena = hs.arena[:k+n]
	clear(hs.arena[k:])
	return k, nil
}

// flushHashes computes every queued hash.
func (d *decoder) flushHashes() {
	hs := d.hs
	hs.input, hs.out = d.buf, d.out
	hs.run()
	for l := range hs.comps {
		jobs := hs.comps[l]
		if len(jobs) == 0 {
			continue
		}
		size := 0
		for i := range jobs {
			if jobs[i].isMap {
				size += int(jobs[i].n) * 64
			}
		}
		if cap(hs.msgs) < size {
			hs.msgs = make([]byte, size, size+size/4)
		}
		hs.msgs = hs.msgs[:size]
		at := 0
		for i := range jobs {
			at = d.batchComp(&jobs[i], at)
		}
		hs.comps[l] = jobs[:0]
		hs.run()
	}
}

// batchComp queues j's sum now that its children are known; at is where
// in msgs its sorted pairs, if a Map, go. It returns the next such place.
func (d *decoder) batchComp(j *compJob, at int) int {
	hs := d.hs
	if !j.isMap {
		hs.add(srcArena, int(j.off), int(j.n)*32, j.dst)
		return at
	}
	size := int(j.n) * 64
	msg := hs.msgs[at : at+size]
	layOut(msg, hs.arena[j.off:int(j.off)+size], &j.perm)
	if j.mid < 0 || !haveSHANI || size < 128 {
		hs.add(srcMsgs, at, size, j.dst)
		return at + size
	}
	// A page's maps at one depth often begin with the same pair: tx.op
	// sorts first among a DFINITY transfer's keys and btype first among an
	// ICRC-3 block's, and both repeat block after block. The state after
	// that pair is kept per depth and reused while the pair repeats,
	// saving one of the block's compressions. It is computed when a pair
	// comes a second time: a first pair that changes with every block
	// (a timestamp or parent hash sorting first) would otherwise cost a
	// compression outside the lanes for each map.
	m := &d.mid[j.mid]
	if !(m.ok || m.seen) || !same64(&m.first, msg[:64]) {
		m.first = [64]byte(msg[:64])
		m.ok, m.seen = false, true
		hs.add(srcMsgs, at, size, j.dst)
		return at + size
	}
	if !m.ok {
		m.state = sha256IV
		sha256Blocks(&m.state, msg[:64])
		m.ok = true
	}
	hs.states = append(hs.states, m.state)
	hs.push(sha256ShapeOf(size-64), hashJob{off: uint32(at), n: uint32(size), dst: j.dst, src: srcMsgs, skip: 1, state: uint32(len(hs.states) - 1)})
	return at + size
}

// pageBlocks is called before each block of a page is read, with the
// page's slice of blocks, whose Hash fields the queued sums write. The
// first call takes the page's hash buffers.
func (d *decoder) pageBlocks(blocks []Block) {
	if d.hs == nil {
		d.hs = pageHashesPool.Get().(*pageHashes)
	}
	// Only a new array needs storing (a slice store is a write barrier
	// while the GC marks); blockQueued flushes before one is made.
	if unsafe.SliceData(d.hs.blocks) != unsafe.SliceData(blocks) {
		d.hs.blocks = blocks[:cap(blocks)]
	}
}

// blockQueued is called after each block of a page is read, with the
// page's slice. It flushes every hashFlushBlocks blocks, and before the
// next block would move the slice.
func (d *decoder) blockQueued(blocks []Block) {
	d.hs.queuedBlocks++
	if d.hs.queuedBlocks >= hashFlushBlocks || len(blocks) == cap(blocks) {
		d.endBlocks()
	}
}

// endBlocks flushes the hashes of the blocks read so far. Between blocks
// nothing refers to the arena any more, so it is reused.
func (d *decoder) endBlocks() {
	d.flushHashes()
	d.hs.queuedBlocks = 0
	d.hs.arena = d.hs.arena[:0]
}

// endPage flushes the last blocks' hashes and gives the buffers back.
func (d *decoder) endPage() {
	if d.hs == nil {
		return // no blocks
	}
	d.endBlocks()
	hs := d.hs
	hs.input, hs.out, hs.blocks = nil, nil, nil
	pageHashesPool.Put(hs)
	d.hs = nil
}
