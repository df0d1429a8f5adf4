package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
)

// History is one ledger's block history as the engine reads it, whatever
// the ledger's family: *icrc3history.Client, *icphistory.History and
// family.History implement it.
type History interface {
	// Tip returns the certified tip (BLS certificate verified).
	Tip(ctx context.Context) (icrc3.Tip, error)
	// Blocks and BlocksDesc deliver unverified, contiguous pages of
	// [start, end), ascending or from the top down.
	Blocks(ctx context.Context, start, end uint64, fn func(page []icrc3.Block) error) error
	BlocksDesc(ctx context.Context, start, end uint64, fn func(page []icrc3.Block) error) error
	// BlocksDescAbove is BlocksDesc told, as it goes, below which index no
	// more pages need be requested: floor is read after each page, and a
	// page wholly below it need not be fetched (the walk may end above
	// start). Ignoring floor is correct, only slower.
	BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func(page []icrc3.Block) error) error
	// Detect reports the ledger's page size and minting account.
	Detect(ctx context.Context) (icrc3.Features, error)
	// NetworkKey names the IC network the history is read from (its root
	// key) and Mode how it is verified: with the canister id they identify
	// one verified chain.
	NetworkKey() string
	Mode() icrc3.VerifyMode
	// Forget drops what the source learnt about the chain it read (its
	// length, where archives hold blocks): the ledger's history changed.
	Forget()
}

// HistoryChangedError: the chain changed and could not be rebuilt.
type HistoryChangedError struct {
	Change reconciled.HistoryChange
	Err    error
}

func (e *HistoryChangedError) Error() string {
	return fmt.Sprintf("reconcile: the ledger's history changed (%s at tip %d) and the cached chain could not be discarded: %v",
		e.Change.Reason, e.Change.NewTipIndex, e.Err)
}

func (e *HistoryChangedError) Unwrap() error { return e.Err }

// chain is one ledger's verified range, shared by every intent of that
// ledger: an intent extends it only where no earlier intent already did, so
// many intents with overlapping windows cost about one scan. Its mutex is
// held for a whole decision: intents of one ledger wait on each other's
// ranges rather than fetching the same pages twice.
type chain struct {
	mu sync.Mutex
	// ledger is the chain's key in the block cache: network, canister and
	// verify mode, so that another network's (or another mode's) chain
	// under the same canister id is never taken for this one.
	ledger string
	hist   History
	// changed is the history change the current refresh detected, for the
	// evidence of the verdicts decided on it; onChange counts it.
	changed  *reconciled.HistoryChange
	onChange func(reconciled.HistoryChange)
	cache    BlockCache
	// w writes the pages a walk down verified behind it (pagewriter.go).
	w      *pageWriter
	loaded bool
	has    bool
	r      icrc3.VerifiedRange

	// reuse: a tip verified less than this long ago (wall clock) serves
	// again without a query. An older tip is always a safe answer: found
	// rests on verified blocks, and an older certified time only closes
	// fewer windows.
	reuse     time.Duration
	now       func() time.Time
	fetchedAt time.Time
	format    string

	// top is the range's highest block that carries a timestamp (topTS,
	// the range's HiTS), once a refresh or a walk into an empty range has
	// read it: a window still open at that timestamp ends at that block,
	// which windowBlocks then need not look up. topBlock checks it against
	// the range, so a range replaced since (a reload, a rebuild) drops it.
	top, topTS uint64
	hasTop     bool
}

// chainFault marks a verified history that contradicts itself (timestamps
// going backwards, a certified tip that disagrees with a verified block).
type chainFault struct{ msg string }

func (e *chainFault) Error() string { return "reconcile: " + e.msg }

// errStop ends a page walk early once the caller has what it needs.
var errStop = errors.New("stop")

func (c *chain) load(ctx context.Context) error {
	if c.loaded {
		return nil
	}
	r, ok, err := c.cache.LoadRange(ctx, c.ledger)
	if err != nil {
		return fmt.Errorf("reconcile: load verified range of %s: %w", c.ledger, err)
	}
	c.r, c.has, c.loaded = r, ok, true
	c.hasTop = false
	return nil
}

// refresh reads the certified tip and verifies every block above the range.
// It returns the tip the range now ends at: never older than what was
// already verified, so a lagging replica cannot shrink the known chain.
func (c *chain) refresh(ctx context.Context, onPage func([]icrc3.Block)) (icrc3.Tip, uint64, error) {
	c.changed = nil
	if err := c.load(ctx); err != nil {
		return icrc3.Tip{}, 0, err
	}
	if c.reuse > 0 && c.has && !wantsFresh(ctx) && !c.fetchedAt.IsZero() && c.now().Sub(c.fetchedAt) < c.reuse {
		return c.tip(icrc3.Tip{Format: c.format}), 0, nil
	}
	t, err := c.hist.Tip(ctx)
	if err != nil {
		return icrc3.Tip{}, 0, err
	}
	defer func() { c.fetchedAt, c.format = c.now(), t.Format }()
	if t.Empty {
		if c.has {
			// No blocks at all under a certificate: the ledger was
			// reinstalled, or a replica lags behind its first block. Either
			// way a certified empty state cannot be shown a prefix of the
			// chain; rebuilding from it costs reads only.
			if err := c.rebuild(ctx, t, "lower_tip"); err != nil {
				return icrc3.Tip{}, 0, err
			}
		}
		return t, 0, nil
	}
	if c.has {
		reason, err := c.contradicts(ctx, t)
		if err != nil {
			return icrc3.Tip{}, 0, err
		}
		if reason != "" {
			if err := c.rebuild(ctx, t, reason); err != nil {
				return icrc3.Tip{}, 0, err
			}
		}
	}
	if !c.has {
		h := t.Hash
		c.r = icrc3.VerifiedRange{Lo: t.Index + 1, Hi: t.Index, HiHash: t.Hash, Below: &h, TipTime: t.Time}
		c.has = true
		return c.tip(t), 0, c.save(ctx)
	}
	switch {
	case t.Index < c.r.Hi:
		// A replica behind what was already verified (contradicts proved
		// the tip a prefix of the chain): keep the newer state.
		return c.tip(t), 0, nil
	case t.Index == c.r.Hi:
		if t.Time > c.r.TipTime {
			c.r.TipTime = t.Time
			return c.tip(t), 0, c.save(ctx)
		}
		return c.tip(t), 0, nil
	}
	// New blocks: verify tip down to Hi+1, whose phash must be HiHash.
	v, err := icrc3.NewIncrementalVerifier(t.Anchor(), icrc3.Anchor{Index: c.r.Hi, Hash: c.r.HiHash})
	if err != nil {
		return icrc3.Tip{}, 0, err
	}
	var read, topTS, topIdx uint64
	prevTS := ^uint64(0) // ts of the block above the page being checked
	// floorBroken: the walk proved another history at the range's top.
	// Pages above the range are stored before the range is recorded, so a
	// cut walk leaves blocks above it that no range vouches for: the cache
	// gives those way to the blocks verified now (BlockCache.PutVerified).
	// One it holds inside its recorded range that differs from a verified
	// block proves another history as well.
	floorBroken := false
	err = c.hist.BlocksDesc(ctx, c.r.Hi+1, t.Index+1, func(page []icrc3.Block) error {
		if err := v.PushPage(page); err != nil {
			// Block Hi+1 was proven by the certified tip; a phash that is
			// not the verified block Hi's hash proves another history.
			var ce *icrc3.ChainError
			floorBroken = errors.As(err, &ce) && ce.Index == c.r.Hi && v.Next() == c.r.Hi+1
			return err
		}
		if t, i, ok := highestTS(page); ok && topTS == 0 {
			topTS, topIdx = t, i
		}
		if err := monotonic(page, &prevTS); err != nil {
			return err
		}
		if err := c.cache.PutVerified(ctx, c.ledger, page); err != nil {
			floorBroken = errors.Is(err, reconciled.ErrBlockConflict)
			return fmt.Errorf("reconcile: cache blocks of %s: %w", c.ledger, err)
		}
		read += uint64(len(page))
		if onPage != nil {
			onPage(page)
		}
		return nil
	})
	if err != nil && floorBroken {
		if err := c.rebuild(ctx, t, "hash"); err != nil {
			return icrc3.Tip{}, read, err
		}
		h := t.Hash
		c.r = icrc3.VerifiedRange{Lo: t.Index + 1, Hi: t.Index, HiHash: t.Hash, Below: &h, TipTime: t.Time}
		c.has = true
		return c.tip(t), read, c.save(ctx)
	}
	if err != nil {
		return icrc3.Tip{}, read, err
	}
	if !v.Done() {
		return icrc3.Tip{}, read, &chainFault{fmt.Sprintf("walk from tip %d stopped at block %d", t.Index, v.Next())}
	}
	if !c.r.Empty() && prevTS < c.r.HiTS {
		return icrc3.Tip{}, read, &chainFault{fmt.Sprintf("block %d has a timestamp below block %d's", c.r.Hi+1, c.r.Hi)}
	}
	if c.r.Empty() {
		// The range had no blocks yet: Lo (the old tip + 1) and Below (the
		// old tip's hash) already frame the new blocks; only their lowest
		// timestamp is new.
		c.r.LoTS = prevTS
	}
	// New blocks that carry no timestamp leave the range's highest one as
	// it was: the next refresh's blocks are checked against it.
	if topTS != 0 {
		c.r.HiTS = topTS
		c.top, c.topTS, c.hasTop = topIdx, topTS, true
	}
	// A longer chain holds every block the shorter one did, so the time
	// that vouched for the old top still holds for the new one (a queries
	// tip whose last block carries no timestamp proves none of its own).
	c.r.Hi, c.r.HiHash, c.r.TipTime = t.Index, t.Hash, max(c.r.TipTime, t.Time)
	return c.tip(t), read, c.save(ctx)
}

// contradicts says why certified tip t cannot belong to the verified chain,
// or "" when it can: the tip at a verified index must have that block's
// hash, and a tip below the chain's top must be a prefix of it (a lagging
// replica), which its hash at a cached index proves and a certified time
// at or after the next block's timestamp disproves. A lower tip that can be
// neither proven nor disproven is taken as a change too: rebuilding from a
// certified tip costs reads, never a wrong verdict, and an honest replica
// never lags by a whole verified range.
func (c *chain) contradicts(ctx context.Context, t icrc3.Tip) (string, error) {
	switch {
	case t.Index == c.r.Hi:
		if t.Hash != c.r.HiHash {
			return "hash", nil
		}
		return "", nil
	case t.Index > c.r.Hi:
		return "", nil // checked by the walk down to Hi+1
	}
	if !c.r.Empty() && t.Index+1 >= c.r.Lo {
		// t.Index is Lo-1 (Below) or a cached block; t.Index+1 is cached.
		if t.Index+1 == c.r.Lo {
			if c.r.Below == nil || *c.r.Below != t.Hash {
				return "hash", nil
			}
		} else {
			h, _, ok, err := c.cache.BlockAt(ctx, c.ledger, t.Index)
			if err != nil {
				return "", fmt.Errorf("reconcile: read verified block %d of %s: %w", t.Index, c.ledger, err)
			}
			if !ok || h != t.Hash {
				return "hash", nil
			}
		}
		_, next, ok, err := c.cache.BlockAt(ctx, c.ledger, t.Index+1)
		if err != nil {
			return "", fmt.Errorf("reconcile: read verified block %d of %s: %w", t.Index+1, c.ledger, err)
		}
		if ok && next != 0 && t.Time >= next {
			// A state certified at or after block t.Index+1 was written
			// holds it: the blocks above the tip are gone.
			return "later_time", nil
		}
		return "", nil
	}
	return "lower_tip", nil
}

// rebuild discards the cached chain after certified tip t contradicted it,
// logs and counts the change, and leaves the chain to be anchored at t.
func (c *chain) rebuild(ctx context.Context, t icrc3.Tip, reason string) error {
	ch := reconciled.HistoryChange{Reason: reason, OldTipIndex: reconciled.U64(c.r.Hi), OldTipHash: c.r.HiHash.String(),
		NewTipIndex: reconciled.U64(t.Index), NewTipHash: t.Hash.String(), CertifiedAt: reconciled.U64(t.Time)}
	if !c.r.Empty() {
		ch.BlocksDiscarded = reconciled.U64(c.r.Hi - c.r.Lo + 1)
	}
	if t.Empty {
		ch.NewTipIndex, ch.NewTipHash = 0, ""
	}
	if err := c.cache.Discard(ctx, c.ledger, ch); err != nil {
		return &HistoryChangedError{Change: ch, Err: err}
	}
	c.changed = &ch
	if c.onChange != nil {
		c.onChange(ch)
	}
	c.hist.Forget()
	c.r, c.has, c.fetchedAt = icrc3.VerifiedRange{}, false, time.Time{}
	return nil
}

// tip is the tip a decision rests on: the verified range's top and the
// newest certified time that vouched for it.
func (c *chain) tip(t icrc3.Tip) icrc3.Tip {
	return icrc3.Tip{Index: c.r.Hi, Hash: c.r.HiHash, Time: c.r.TipTime, Format: t.Format}
}

// pageRangeCache is a BlockCache that stores a page of verified blocks and
// the range now holding them in one write: a walk down then pays one
// commit per page, not two.
// PutVerifiedRange reads only each block's Index, TS, Hash, CreatedAt and
// Raw, and whether Native is set (the block's family: the store records
// it per history): the other fields are derived from Raw (pagewriter.go
// relies on it, and gives pages with Native set whole).
// It keeps none of blocks past its return, not even CreatedAt: the page
// writer builds the next page in the same memory.
type pageRangeCache interface {
	PutVerifiedRange(ctx context.Context, ledger string, blocks []icrc3.Block, r icrc3.VerifiedRange) error
}

// putPage caches a verified page and saves r, the range grown by it.
func (c *chain) putPage(ctx context.Context, page []icrc3.Block, r icrc3.VerifiedRange) error {
	if pc, ok := c.cache.(pageRangeCache); ok {
		if err := pc.PutVerifiedRange(ctx, c.ledger, page, r); err != nil {
			return fmt.Errorf("reconcile: cache blocks and range of %s: %w", c.ledger, err)
		}
		return nil
	}
	if err := c.cache.PutVerified(ctx, c.ledger, page); err != nil {
		return fmt.Errorf("reconcile: cache blocks of %s: %w", c.ledger, err)
	}
	if err := c.cache.SaveRange(ctx, c.ledger, r); err != nil {
		return fmt.Errorf("reconcile: save verified range of %s: %w", c.ledger, err)
	}
	return nil
}

func (c *chain) save(ctx context.Context) error {
	if err := c.cache.SaveRange(ctx, c.ledger, c.r); err != nil {
		return fmt.Errorf("reconcile: save verified range of %s: %w", c.ledger, err)
	}
	return nil
}

// covers reports whether every block with ts >= from is in the range.
// Timestamps never decrease along the chain (checked while verifying), so
// a verified block below from bounds the window.
func (c *chain) covers(from uint64) bool {
	if !c.has {
		return false
	}
	return c.r.Lo == 0 || (!c.r.Empty() && c.r.LoTS < from)
}

// extendDown verifies blocks from Lo-1 down towards target, growing the
// range page by page (each page is chained to the verified block above it,
// so a failure keeps what was verified). onPage sees each verified page and
// returns true to stop early. aim, when set, is asked after each verified
// page for the lowest index still worth requesting; the walk may then end
// above target, and the caller looks again.
func (c *chain) extendDown(ctx context.Context, target uint64, aim func() uint64, onPage func([]icrc3.Block) bool) (read uint64, err error) {
	if c.r.Lo == 0 || target >= c.r.Lo {
		return 0, nil
	}
	walk := c.hist.BlocksDesc
	var floor atomic.Uint64
	if aim != nil {
		floor.Store(max(target, aim()))
		walk = func(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
			return c.hist.BlocksDescAbove(ctx, start, end, floor.Load, fn)
		}
	}
	v := icrc3.NewVerifier(icrc3.Anchor{Index: c.r.Lo - 1, Hash: *c.r.Below})
	prevTS := ^uint64(0)
	if !c.r.Empty() {
		prevTS = c.r.LoTS
	}
	err = walk(ctx, target, c.r.Lo, func(page []icrc3.Block) error {
		if err := v.PushPage(page); err != nil {
			return err
		}
		if err := monotonic(page, &prevTS); err != nil {
			return err
		}
		r := c.r
		// The first timestamp a walk meets is the range's highest: the
		// range was empty, or its blocks so far carried none.
		t, top, timed := highestTS(page)
		fromEmpty := r.Empty()
		firstTS := timed && (fromEmpty || r.HiTS == 0)
		if firstTS {
			r.HiTS = t
		}
		// LoTS bounds every block below Lo only if it is a real timestamp:
		// keep the lowest one seen, so coverage is never claimed on a block
		// that carries no time.
		if t, ok := lowestTS(page); ok {
			r.LoTS = t
		} else if r.Empty() {
			r.LoTS = ^uint64(0)
		}
		low := page[0]
		r.Lo, r.Below = low.Index, low.PHash
		if err := c.w.put(ctx, page, r); err != nil {
			return err
		}
		c.r = r
		// Only a walk from an empty range knows that no block above this
		// one carries a timestamp: a range loaded from the cache may have
		// been saved with HiTS 0 above timestamped blocks.
		if firstTS && fromEmpty {
			c.top, c.topTS, c.hasTop = top, t, true
		}
		read += uint64(len(page))
		if onPage != nil && onPage(page) {
			return errStop
		}
		if aim != nil {
			floor.Store(max(target, aim()))
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return read, nil
	}
	return read, err
}

// monotonic checks an ascending page against the block above it (prevTS)
// and leaves prevTS at the page's lowest timestamp. A block with ts 0 is a
// block of an unknown type that carries no ts (known blocks must have one,
// and no IC block is from 1970): it neither constrains nor bounds the order.
func monotonic(page []icrc3.Block, prevTS *uint64) error {
	for i := len(page) - 1; i >= 0; i-- {
		if page[i].TS == 0 {
			continue
		}
		if page[i].TS > *prevTS {
			return &chainFault{fmt.Sprintf("block %d has timestamp %d above the next block's %d", page[i].Index, page[i].TS, *prevTS)}
		}
		*prevTS = page[i].TS
	}
	return nil
}

// lowestTS is the timestamp of the page's lowest timestamped block.
func lowestTS(page []icrc3.Block) (uint64, bool) {
	for i := range page {
		if page[i].TS != 0 {
			return page[i].TS, true
		}
	}
	return 0, false
}

// highestTS is the timestamp and index of the page's highest timestamped
// block.
func highestTS(page []icrc3.Block) (ts, index uint64, ok bool) {
	for i := len(page) - 1; i >= 0; i-- {
		if page[i].TS != 0 {
			return page[i].TS, page[i].Index, true
		}
	}
	return 0, 0, false
}

// topBlock returns the range's highest timestamped block and its
// timestamp, when known for the range as it is.
func (c *chain) topBlock() (index, ts uint64, ok bool) {
	if !c.hasTop || c.r.Empty() || c.top < c.r.Lo || c.top > c.r.Hi || c.topTS != c.r.HiTS {
		return 0, 0, false
	}
	return c.top, c.topTS, true
}

// walkTarget is the lowest index a walk down to a window starting at ledger
// time from requests, estimated from the verified range's block density
// (blocks per nanosecond between its ends), with a sixteenth of the
// estimate and an eighth of a page of slack. It only bounds how far ahead
// pages are requested: a walk that reaches it without covering the window
// is started again from there, and 0 (no estimate: an empty or
// single-instant range) lets the walk run speculatively down to the
// window. A lying ledger can only make the walk take more rounds.
func (c *chain) walkTarget(from, page uint64) uint64 {
	r := c.r
	if r.Empty() || r.Hi <= r.Lo || r.HiTS <= r.LoTS || r.LoTS < from {
		return 0
	}
	rate := float64(r.Hi-r.Lo) / float64(r.HiTS-r.LoTS)
	est := rate * float64(r.LoTS-from)
	est += est/16 + float64(page)/8
	if est >= float64(r.Lo) {
		return 0
	}
	return r.Lo - uint64(est)
}
