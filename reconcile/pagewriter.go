package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/reconciled/reconciled/icrc3"
)

// A walk down the chain used to store each verified page, with the range
// it grew, before it verified the next one. In a burst that write set the
// walk's pace, and so the wait of every intent whose window lies deeper:
// the pages are verified in memory, and a decision needs nothing more than
// that. The chain's pageWriter stores them behind the walk instead, in
// page order, one page and its range per transaction as before, so what
// the cache holds is always a verified range with all of its blocks: a
// crash loses pages that were not yet written, never claims them.
//
// Until a page is written, the chain's reads (byStamp, windowBlocks) take
// it from memory as well as from the cache. The pages are read before the
// cache, and leave memory only once written, so a page written meanwhile
// is read twice, never missed. A failed write stops the writer; the pages
// stay readable until the run ends, and the chain then reloads the range
// the cache holds. A decision run waits for the writer before it ends
// (and gives the chain up), serving intents that join meanwhile, so no
// other run ever sees a page waiting: the writer works for the run, it
// does not own the chain.

// maxWaitingBytes bounds the memory of the pages verified but not yet
// written (waitingPage.bytes): a walk that outruns its writes by this much
// waits for them. In a burst the writes run slower than the walk and share
// the store's writer with the verdicts, so a bound the walk meets sets the
// pace of every intent whose window lies deeper; a larger bound lets a walk
// run further ahead of its writes but raises the process's peak memory past
// its target. The bound is in bytes, not blocks, so an ICP page, whose
// blocks are kept whole, counts for what it holds. docs/benchmarks.md#past-rounds
// has the measurements behind the figure.
const maxWaitingBytes = 32 << 20

type waitingPage struct {
	// kept are what the writer and the reads need of each block, in
	// index order; a page holds its blocks' Values (Raw), not the blocks
	// parsed from them, which would double a waiting page's memory.
	kept []keptBlock
	// full is the page as verified when its blocks cannot be parsed again
	// from their Values alone (an ICP ledger's, whose hash covers their
	// protobuf bytes), or when the cache is given whole blocks (MemCache,
	// which keeps them as they are); nil otherwise.
	full []icrc3.Block
	r    icrc3.VerifiedRange // the range once this page is in
	// bytes is what the page holds in memory, near enough for
	// maxWaitingBytes: the blocks' Values and the records below.
	bytes int
	// timed are the page's blocks that carry a timestamp, ascending in
	// index and so in ts: windowBlocks searches them instead of scanning.
	timed []timedBlock
	// stamped are the page's stamped blocks sorted by stamp: a joiner's
	// lookup must not scan every waiting page.
	stamped []stampedBlock
}

type keptBlock struct {
	index, ts, stamp uint64
	hasStamp         bool
	hash             icrc3.Hash
	raw              []byte
}

type timedBlock struct{ index, ts uint64 }

type stampedBlock struct {
	stamp uint64
	pos   int
}

func newWaitingPage(blocks []icrc3.Block, r icrc3.VerifiedRange, whole bool) *waitingPage {
	p := &waitingPage{r: r, kept: make([]keptBlock, len(blocks)),
		timed: make([]timedBlock, 0, len(blocks)), stamped: make([]stampedBlock, 0, len(blocks))}
	if whole || slices.ContainsFunc(blocks, func(b icrc3.Block) bool { return b.Native != nil }) {
		p.full = blocks
	}
	for i := range blocks {
		b := &blocks[i]
		p.kept[i] = keptBlock{index: b.Index, ts: b.TS, hash: b.Hash, raw: b.Raw}
		p.bytes += len(b.Raw)
		if b.TS != 0 {
			p.timed = append(p.timed, timedBlock{b.Index, b.TS})
		}
		if st := b.CreatedAt; st != nil {
			p.kept[i].stamp, p.kept[i].hasStamp = *st, true
			p.stamped = append(p.stamped, stampedBlock{*st, i})
		}
	}
	slices.SortFunc(p.stamped, func(a, b stampedBlock) int { return cmp.Or(cmp.Compare(a.stamp, b.stamp), cmp.Compare(a.pos, b.pos)) })
	p.bytes += cap(p.kept)*int(unsafe.Sizeof(keptBlock{})) + cap(p.timed)*int(unsafe.Sizeof(timedBlock{})) +
		cap(p.stamped)*int(unsafe.Sizeof(stampedBlock{}))
	if p.full != nil {
		p.bytes += cap(p.full) * int(unsafe.Sizeof(icrc3.Block{}))
	}
	return p
}

// block is the page's block at pos, parsed again from its Value unless
// the page keeps it whole.
func (p *waitingPage) block(pos int) (icrc3.Block, error) {
	if p.full != nil {
		return p.full[pos], nil
	}
	k := &p.kept[pos]
	b, err := icrc3.ParseRawBlock(k.index, k.raw, k.hash)
	if err != nil {
		return icrc3.Block{}, fmt.Errorf("reconcile: verified block %d waiting to be cached: %w", k.index, err)
	}
	if b.TS != k.ts || (b.CreatedAt != nil) != k.hasStamp || k.hasStamp && *b.CreatedAt != k.stamp {
		return icrc3.Block{}, fmt.Errorf("reconcile: verified block %d waiting to be cached parses to other fields", k.index)
	}
	return b, nil
}

// forCache builds a page without full in buf, as a cache that stores
// pages with their ranges (the store) is given it: that reads only each
// block's index, ts, hash, stamp and Value, which kept holds, and keeps
// none of it, so the writer reuses buf and stamps (the blocks' stamps)
// page after page (a fresh slice for each page was 23 MB of a burst's 350
// MB of allocations). Any other cache is given the page whole (full).
func (p *waitingPage) forCache(buf []icrc3.Block, stamps []uint64) ([]icrc3.Block, []uint64) {
	buf, stamps = slices.Grow(buf[:0], len(p.kept))[:len(p.kept)], slices.Grow(stamps[:0], len(p.kept))
	for i := range p.kept {
		k := &p.kept[i]
		buf[i] = icrc3.Block{Index: k.index, TS: k.ts, Hash: k.hash, Raw: k.raw}
		if k.hasStamp {
			// stamps never grows past its capacity here, so the
			// pointers taken into it stay valid.
			stamps = append(stamps, k.stamp)
			buf[i].CreatedAt = &stamps[len(stamps)-1]
		}
	}
	return buf, stamps
}

type pageWriter struct {
	c *chain

	mu   sync.Mutex
	cond *sync.Cond
	// waiting holds the pages not yet written, in the order the walk gave
	// them (descending indexes); the one being written is waiting[0]. A
	// page is never changed once queued, so reads hold on to pointers.
	waiting []*waitingPage
	bytes   int // of waiting (waitingPage.bytes)
	running bool
	// progress, when not nil, is closed at the next page written or when
	// the writer stops (waitWrite).
	progress chan struct{}
	// err is the first failed write. Nothing after it is written: each
	// later page's range covers the failed page, which the cache does not
	// hold.
	err error
}

func newPageWriter(c *chain) *pageWriter {
	w := &pageWriter{c: c}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// put queues page, whose range after it is r, for writing. An error is a
// failed earlier write: the page is not queued, and the walk stops as it
// did when its own write failed.
func (w *pageWriter) put(ctx context.Context, page []icrc3.Block, r icrc3.VerifiedRange) error {
	p := w.newPage(page, r)
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && len(w.waiting) > 0 && w.bytes+p.bytes > maxWaitingBytes {
		w.cond.Wait()
	}
	if w.err != nil {
		return w.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w.queue(p)
	if !w.running {
		w.running = true
		// A cancelled walk's queued pages are still written: they are
		// verified, and the run waits for them before giving the chain
		// up.
		go w.write(context.WithoutCancel(ctx))
	}
	return nil
}

// queue adds p to the pages waiting; w.mu is held.
func (w *pageWriter) queue(p *waitingPage) {
	w.waiting = append(w.waiting, p)
	w.bytes += p.bytes
}

// newPage is page as it waits for the writer.
func (w *pageWriter) newPage(page []icrc3.Block, r icrc3.VerifiedRange) *waitingPage {
	_, ranged := w.c.cache.(pageRangeCache)
	return newWaitingPage(page, r, !ranged)
}

func (w *pageWriter) write(ctx context.Context) {
	var blocks []icrc3.Block
	var stamps []uint64
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.waiting) > 0 && w.err == nil {
		p := w.waiting[0]
		w.mu.Unlock()
		page := p.full
		if page == nil {
			blocks, stamps = p.forCache(blocks, stamps)
			page = blocks
		}
		err := w.c.putPage(ctx, page, p.r)
		clear(blocks) // the Values it points to go with their page
		w.mu.Lock()
		if err != nil {
			// The pages stay readable from memory until the run ends:
			// the walk verified them and the chain's range holds them,
			// so a read must find them until the range is reloaded.
			w.err = err
		} else {
			w.bytes -= p.bytes
			w.waiting[0] = nil
			w.waiting = w.waiting[1:]
		}
		w.cond.Broadcast()
		w.progressed()
	}
	w.running = false
	w.cond.Broadcast()
	w.progressed()
}

// progressed wakes waitWrite's callers; w.mu is held.
func (w *pageWriter) progressed() {
	if w.progress != nil {
		close(w.progress)
		w.progress = nil
	}
}

// waitWrite returns once another page is written, the writer stopped or
// wake is ready, and false at once when nothing is being written.
func (w *pageWriter) waitWrite(wake <-chan struct{}) bool {
	w.mu.Lock()
	if !w.running {
		w.mu.Unlock()
		return false
	}
	if w.progress == nil {
		w.progress = make(chan struct{})
	}
	p := w.progress
	w.mu.Unlock()
	select {
	case <-p:
	case <-wake:
	}
	return true
}

// flush waits until every queued page is written or a write failed, and
// returns that failure (once). The pages a failure left unwritten are
// dropped: the caller must then reload the chain's range from the cache,
// which holds the range as it was before the failed page.
func (w *pageWriter) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.running {
		w.cond.Wait()
	}
	err := w.err
	w.err = nil
	clear(w.waiting)
	w.waiting, w.bytes = nil, 0
	return err
}

// unwritten returns the pages not yet known to be written, lowest first,
// and the lowest index above them: the cache holds the range from there
// up. With none it returns lo itself.
func (w *pageWriter) unwritten(lo uint64) (pages []*waitingPage, above uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	above = lo
	for i := len(w.waiting) - 1; i >= 0; i-- {
		p := w.waiting[i]
		if len(p.kept) == 0 {
			continue
		}
		pages = append(pages, p)
		above = max(above, p.kept[len(p.kept)-1].index+1)
	}
	return pages, above
}

// withStamp returns the waiting pages' blocks in [lo, hi] with this stamp.
func (w *pageWriter) withStamp(stamp, lo, hi uint64) ([]icrc3.Block, error) {
	pages, _ := w.unwritten(lo)
	var out []icrc3.Block
	for _, p := range pages {
		k, _ := slices.BinarySearchFunc(p.stamped, stamp, func(s stampedBlock, t uint64) int { return cmp.Compare(s.stamp, t) })
		for ; k < len(p.stamped) && p.stamped[k].stamp == stamp; k++ {
			pos := p.stamped[k].pos
			if i := p.kept[pos].index; i < lo || i > hi {
				continue
			}
			b, err := p.block(pos)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// byStamp is the chain's ByStamp over its range [lo, hi]: the cache's
// answer and the unwritten pages', each block once. The cache is asked
// over the whole range, as it was before pages were written behind the
// walk: its failure is the decision's, wherever the block lies.
func (c *chain) byStamp(ctx context.Context, stamp, lo, hi uint64) ([]icrc3.Block, error) {
	out, err := c.w.withStamp(stamp, lo, hi)
	if err != nil {
		return nil, err
	}
	cached, err := c.cache.ByStamp(ctx, c.ledger, stamp, lo, hi)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return cached, nil
	}
	// A page written since the pages were read is in both.
	for _, b := range cached {
		if !slices.ContainsFunc(out, func(m icrc3.Block) bool { return m.Index == b.Index }) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b icrc3.Block) int { return cmp.Compare(a.Index, b.Index) })
	return out, nil
}

// windowBlocks is the chain's WindowBlocks over its range [lo, hi] (see
// BlockCache), the unwritten pages being the lowest part of it.
func (c *chain) windowBlocks(ctx context.Context, lo, hi, from, to uint64) (first, last uint64, ok bool, err error) {
	if first, last, ok, done, err := c.openWindow(ctx, lo, hi, from, to); done {
		return first, last, ok, err
	}
	pages, above := c.w.unwritten(lo)
	if above <= hi {
		if first, last, ok, err = c.cache.WindowBlocks(ctx, c.ledger, above, hi, from, to); err != nil {
			return 0, 0, false, err
		}
	}
	// A block without a timestamp is in no window (ts 0): timed holds
	// none. Timestamps never decrease up the chain, across pages too.
	from = max(from, 1)
	var mFirst, mLast timedBlock
	var hasFirst, hasLast bool
	mFirst, hasFirst = firstFrom(pages, lo, hi, from)
	for i := len(pages) - 1; i >= 0; i-- {
		t := timedIn(pages[i].timed, lo, hi)
		k, _ := slices.BinarySearchFunc(t, to+1, func(b timedBlock, x uint64) int { return cmp.Compare(b.ts, x) })
		if to == ^uint64(0) {
			k = len(t)
		}
		if k > 0 {
			mLast, hasLast = t[k-1], true
			break
		}
	}
	switch {
	case ok:
		// The window's last block is above the pages, and its first is
		// theirs if any of them reaches from.
		if hasFirst {
			first = mFirst.index
		}
		return first, last, true, nil
	case hasFirst && mFirst.ts <= to && hasLast:
		return mFirst.index, mLast.index, true, nil
	}
	return 0, 0, false, nil
}

// openWindow answers windowBlocks when the window is still open at the
// range's highest timestamped block (an intent's window mostly is: it ends a
// day after its stamp): the window ends at that block, and only its first
// block is looked up. done is false when it cannot tell (the block is not
// known, the window closes below it, or the cache finds no first blocks
// alone).
func (c *chain) openWindow(ctx context.Context, lo, hi, from, to uint64) (first, last uint64, ok, done bool, err error) {
	top, topTS, known := c.topBlock()
	ws, alone := c.cache.(windowStartCache)
	if !known || !alone || to < topTS || top < lo || top > hi {
		return 0, 0, false, false, nil
	}
	// Every timestamped block of [lo, hi] is at or below top, and so at or
	// below topTS: the window holds a block only if top is one.
	from = max(from, 1)
	if from > topTS {
		return 0, 0, false, true, nil
	}
	pages, above := c.w.unwritten(lo)
	if b, ok := firstFrom(pages, lo, hi, from); ok {
		return b.index, top, true, true, nil
	}
	if above > hi {
		return 0, 0, false, true, nil
	}
	if first, ok, err = ws.WindowStart(ctx, c.ledger, above, hi, from); err != nil || !ok {
		return 0, 0, false, true, err
	}
	return first, top, true, true, nil
}

// firstFrom is the lowest block of the waiting pages (the lowest first)
// within [lo, hi] whose ts is at least from.
func firstFrom(pages []*waitingPage, lo, hi, from uint64) (timedBlock, bool) {
	for _, p := range pages {
		t := timedIn(p.timed, lo, hi)
		if k, _ := slices.BinarySearchFunc(t, from, func(b timedBlock, f uint64) int { return cmp.Compare(b.ts, f) }); k < len(t) {
			return t[k], true
		}
	}
	return timedBlock{}, false
}

// timedIn is the part of t, a page's timed blocks, within [lo, hi].
func timedIn(t []timedBlock, lo, hi uint64) []timedBlock {
	a, _ := slices.BinarySearchFunc(t, lo, func(b timedBlock, i uint64) int { return cmp.Compare(b.index, i) })
	b, _ := slices.BinarySearchFunc(t, hi+1, func(b timedBlock, i uint64) int { return cmp.Compare(b.index, i) })
	if hi == ^uint64(0) {
		b = len(t)
	}
	return t[a:b]
}
