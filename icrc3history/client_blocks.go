package icrc3history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icagent"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// Blocks reads blocks [start, end) from the ledger and its archives and
// hands them to fn page by page, in ascending index order; each page is an
// ascending, contiguous slice. Pages are fetched concurrently (at most
// Concurrency in flight) but memory holds only those pages. fn must not
// keep the slice. A block that cannot be read is an error, never a gap:
// every delivered page is exactly contiguous with the previous one.
//
// Blocks proves nothing by itself: in VerifyChain mode pages are read
// without signed-query verification and must be checked with a Verifier
// against a certified tip.
func (c *Client) Blocks(ctx context.Context, start, end uint64, fn func(page []icrc3.Block) error) error {
	return c.blocks(ctx, start, end, false, nil, fn)
}

// BlocksDesc is Blocks delivering pages from the top (the page holding
// end-1) downwards, the order a Verifier walks from a tip. Blocks within a
// page stay ascending.
func (c *Client) BlocksDesc(ctx context.Context, start, end uint64, fn func(page []icrc3.Block) error) error {
	return c.blocks(ctx, start, end, true, nil, fn)
}

// BlocksDescAbove is BlocksDesc for a walk whose end is learnt on the way:
// no page lying wholly below floor() is requested. floor is asked before
// each request, from another goroutine, and again after each delivered
// page, so fn may lower it as pages arrive; once every requested page is
// delivered and the next still lies below floor(), the walk ends without
// error, possibly above start.
func (c *Client) BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func(page []icrc3.Block) error) error {
	return c.blocks(ctx, start, end, true, floor, fn)
}

type chunkResult struct {
	blocks []icrc3.Block
	err    error
}

func (c *Client) blocks(ctx context.Context, start, end uint64, desc bool, floor func() uint64, fn func([]icrc3.Block) error) error {
	if start >= end {
		return nil
	}
	f, err := c.features(ctx)
	if err != nil {
		return err
	}
	page := f.PageSize
	if end-start > page && !c.listedSince(c.now().Add(-archiveListAge)) {
		// Knowing where the archives' ranges lie lets pages go straight to
		// the archives instead of through the ledger first. Detection lists
		// them; a list older than archiveListAge may miss ranges archived
		// since, so a long read asks the ledger about its own range first.
		if err := c.learnArchives(ctx, f, start, end); err != nil {
			return err
		}
	} else if err := c.listArchives(ctx, f.Endpoint); err != nil {
		return err
	}

	// Deferred in this order so that cancel runs first and unblocks the
	// producer and fetches before waiting for them.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// At most Concurrency queries are in flight, and at most twice that
	// many pages are fetched, decoding or in flight but not yet delivered:
	// a reply frees its slot as soon as it arrives, before it is decoded
	// and whether or not the consumer waits on it yet (replies come back
	// in any order), so the next request goes out during the decoding
	// instead of after it; memory stays bounded by 2·Concurrency pages.
	// Pages are decoded on the goroutines that fetched them, side by side
	// on as many cores as there are; only verification is in page order.
	conc := c.concurrency(f.Endpoint)
	inflight := make(chan struct{}, conc)
	undelivered := make(chan struct{}, 2*conc)
	futures := make(chan chan chunkResult, 2*conc)
	cuts := c.archiveCuts()
	// With a floor, delivered counts the pages fn took and kick wakes a
	// producer waiting for the floor to move.
	var issued uint64
	var delivered atomic.Uint64
	kick := make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(futures)
		for lo, hi := start, end; lo < hi; {
			var a, b uint64
			if desc {
				for floor != nil && hi <= floor() {
					if delivered.Load() == issued {
						return // every page asked for is in, and no more are wanted
					}
					select {
					case <-kick:
					case <-ctx.Done():
						return
					}
				}
				b = hi
				a = cutBelow(cuts, max(lo, b-min(b, page)), b)
				hi = a
			} else {
				a = lo
				b = cutAbove(cuts, a, min(hi, a+page))
				lo = b
			}
			select {
			case undelivered <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case inflight <- struct{}{}:
			case <-ctx.Done():
				return
			}
			fut := make(chan chunkResult, 1)
			futures <- fut // never blocks: undelivered bounds it
			issued++
			s := &slot{ch: inflight, held: true}
			wg.Add(1)
			go func() {
				defer wg.Done()
				bl, err := c.fetchChunk(ctx, s, f, a, b)
				s.give()
				fut <- chunkResult{bl, err}
			}()
		}
	}()
	for fut := range futures {
		var r chunkResult
		select {
		case r = <-fut:
		case <-ctx.Done():
			return icagent.Classify(ctx.Err(), c.ledger, string(f.Endpoint))
		}
		<-undelivered
		if r.err != nil {
			return r.err
		}
		// Both cases of the select may be ready: a cancelled scan delivers
		// no further page.
		if err := ctx.Err(); err != nil {
			return icagent.Classify(err, c.ledger, string(f.Endpoint))
		}
		if err := fn(r.blocks); err != nil {
			return err
		}
		delivered.Add(1)
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	return ctx.Err()
}

// archiveCuts are the known archive ranges' bounds, ascending: a page
// that spans one would be served partly by the ledger (or one archive) and
// partly by another, two round trips in a row; pages are cut there
// instead, so each goes to one canister in one round trip.
func (c *Client) archiveCuts() []uint64 {
	c.archMu.Lock()
	defer c.archMu.Unlock()
	cuts := make([]uint64, 0, 2*len(c.archives))
	for _, x := range c.archives {
		cuts = append(cuts, x.start, x.end)
	}
	slices.Sort(cuts)
	return slices.Compact(cuts)
}

// cutBelow raises a to the highest cut inside (a, b).
func cutBelow(cuts []uint64, a, b uint64) uint64 {
	i, _ := slices.BinarySearch(cuts, b) // first cut >= b
	if i > 0 && cuts[i-1] > a {
		return cuts[i-1]
	}
	return a
}

// cutAbove lowers b to the lowest cut inside (a, b).
func cutAbove(cuts []uint64, a, b uint64) uint64 {
	i, _ := slices.BinarySearch(cuts, a+1) // first cut > a
	if i < len(cuts) && cuts[i] < b {
		return cuts[i]
	}
	return b
}

// chunk collects the blocks of [a, b) from however many replies it takes.
// The usual reply is the whole chunk: its decoded slice becomes the chunk
// as it is (blocks set, have nil), without copying a page of blocks into
// another.
type chunk struct {
	a, b    uint64
	blocks  []icrc3.Block // nil until a block arrives
	have    []bool        // which of blocks are in; nil while blocks is one whole reply
	missing uint64
}

func newChunk(a, b uint64) *chunk {
	return &chunk{a: a, b: b, missing: b - a}
}

// putAll takes a reply's blocks, which the caller checked are numbered
// contiguously.
func (ch *chunk) putAll(bl []icrc3.Block) {
	if ch.blocks == nil && len(bl) > 0 && bl[0].Index == ch.a && uint64(len(bl)) == ch.b-ch.a {
		ch.blocks, ch.missing = bl, 0
		return
	}
	for i := range bl {
		ch.put(&bl[i])
	}
}

// put keeps the first copy of each index: ledger and archive ranges may
// overlap while archiving, and the chain decides whether a copy is genuine.
func (ch *chunk) put(bl *icrc3.Block) {
	if bl.Index < ch.a || bl.Index >= ch.b || ch.has(bl.Index) {
		return
	}
	if ch.have == nil {
		ch.blocks, ch.have = make([]icrc3.Block, ch.b-ch.a), make([]bool, ch.b-ch.a)
	}
	ch.blocks[bl.Index-ch.a] = *bl
	ch.have[bl.Index-ch.a] = true
	ch.missing--
}

// has reports whether block i (inside the chunk) is in.
func (ch *chunk) has(i uint64) bool {
	if ch.have == nil {
		return ch.blocks != nil
	}
	return ch.have[i-ch.a]
}

func (ch *chunk) firstMissing() uint64 {
	for i := ch.a; i < ch.b; i++ {
		if !ch.has(i) {
			return i
		}
	}
	return ch.b
}

// slot is one page fetch's claim on the requests in flight of a walk: held
// while one of its queries is out, given back while a reply is decoded.
type slot struct {
	ch   chan struct{}
	held bool
}

func (s *slot) take(ctx context.Context) error {
	if s == nil || s.held {
		return nil
	}
	select {
	case s.ch <- struct{}{}:
		s.held = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slot) give() {
	if s != nil && s.held {
		<-s.ch
		s.held = false
	}
}

// pageQuery is a block query that holds s only while it is out.
func (c *Client) pageQuery(ctx context.Context, s *slot, canister principal.Principal, method string, arg []byte) ([]byte, error) {
	if err := s.take(ctx); err != nil {
		return nil, icagent.Classify(err, canister, method)
	}
	raw, err := c.Query(ctx, canister, method, arg, c.verify == icrc3.VerifyQueries)
	s.give()
	if afterPageReply != nil {
		afterPageReply()
	}
	return raw, err
}

// afterPageReply, when set (by tests), runs between a page's reply and its
// decoding.
var afterPageReply func()

func (c *Client) fetchChunk(ctx context.Context, s *slot, f icrc3.Features, a, b uint64) ([]icrc3.Block, error) {
	ch := newChunk(a, b)
	if ar, ok := c.archiveFor(a, b); ok {
		// A direct archive read saves the ledger round trip; if it fails
		// (the range may have moved), the ledger says where blocks are now.
		if err := c.fetchArchive(ctx, s, ar, a, b, ch); err == nil && ch.missing == 0 {
			return ch.blocks, nil
		} else if ctx.Err() != nil {
			return nil, icagent.Classify(ctx.Err(), ar.cb.Canister, ar.cb.Method)
		}
	}
	lagRetried := false
	for ch.missing > 0 {
		g := ch.firstMissing()
		var chainLen uint64
		var err error
		if f.Endpoint == icrc3.EndpointLegacy {
			chainLen, err = c.ledgerLegacy(ctx, s, g, b, ch)
		} else {
			chainLen, err = c.ledgerICRC3(ctx, s, g, b, ch)
		}
		if err != nil {
			return nil, err
		}
		if ch.has(g) {
			continue // progress; ask for the rest of a prefix reply
		}
		if known := c.known.Load(); chainLen <= g || chainLen < known {
			if !lagRetried {
				lagRetried = true
				continue
			}
			return nil, &icrc3.Error{Kind: icrc3.KindLagging, Canister: c.ledger, Method: string(f.Endpoint), Index: idx(g),
				Msg: fmt.Sprintf("replica reports %d blocks; at least %d are known to exist", chainLen, max(known, g+1))}
		}
		return nil, &icrc3.Error{Kind: icrc3.KindChain, Canister: c.ledger, Method: string(f.Endpoint), Index: idx(g),
			Msg: fmt.Sprintf("block missing from the reply for %d..%d", g, b)}
	}
	return ch.blocks, nil
}

// ledgerICRC3 asks the ledger for [g, b) with icrc3_get_blocks and follows
// the archive callbacks of its reply. It returns the reply's log_length.
func (c *Client) ledgerICRC3(ctx context.Context, s *slot, g, b uint64, ch *chunk) (uint64, error) {
	const method = "icrc3_get_blocks"
	raw, err := c.pageQuery(ctx, s, c.ledger, method, encodeGetBlocksArgs(icrc3.BlockRange{Start: g, Length: b - g}))
	if err != nil {
		return 0, fmt.Errorf("icrc3: get blocks %d..%d: %w", g, b, err)
	}
	r, err := icrc3.DecodeGetBlocksResult(raw)
	if err != nil {
		return 0, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: method, Msg: fmt.Sprintf("blocks %d..%d", g, b), Err: err}
	}
	c.CountBlocks(len(r.Blocks))
	n, ok := r.LogLength.Uint64()
	if !ok {
		return 0, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: method, Msg: "log_length exceeds 64 bits"}
	}
	c.observeLength(n)
	if err := contiguous(r.Blocks, c.ledger, method); err != nil {
		return 0, err
	}
	ch.putAll(r.Blocks)
	for _, ab := range r.Archived {
		for _, rg := range ab.Args {
			ar := archiveRange{cb: ab.Callback, start: rg.Start, end: rg.Start + rg.Length, icrc3: true}
			if err := c.followArchived(ctx, s, method, ar, g, b, ch); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// followArchived learns where a reply placed archived blocks and reads from
// that archive the part of them in [g, b).
func (c *Client) followArchived(ctx context.Context, s *slot, method string, ar archiveRange, g, b uint64, ch *chunk) error {
	if ar.end < ar.start {
		return &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: method, Msg: "archived range overflows"}
	}
	c.learn(ar)
	if lo, hi := max(ar.start, g), min(ar.end, b); lo < hi {
		return c.fetchArchive(ctx, s, ar, lo, hi, ch)
	}
	return nil
}

// ledgerLegacy is ledgerICRC3 for the legacy get_blocks endpoint, whose
// blocks are numbered from first_index.
func (c *Client) ledgerLegacy(ctx context.Context, s *slot, g, b uint64, ch *chunk) (uint64, error) {
	const method = "get_blocks"
	raw, err := c.pageQuery(ctx, s, c.ledger, method, encodeLegacyGetBlocksArgs(g, b-g))
	if err != nil {
		return 0, fmt.Errorf("icrc3: get blocks %d..%d: %w", g, b, err)
	}
	r, err := icrc3.DecodeLegacyGetBlocks(raw)
	if err != nil {
		return 0, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: method, Msg: fmt.Sprintf("blocks %d..%d", g, b), Err: err}
	}
	c.CountBlocks(len(r.Blocks))
	c.observeLength(r.ChainLength)
	for i := range r.Blocks {
		if r.Blocks[i].Index != r.FirstIndex+uint64(i) {
			return 0, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: method,
				Msg: fmt.Sprintf("block %d of the reply is numbered %d, first_index is %d", i, r.Blocks[i].Index, r.FirstIndex)}
		}
	}
	ch.putAll(r.Blocks)
	for _, lr := range r.Archived {
		ar := archiveRange{cb: lr.Callback, start: lr.Start, end: lr.Start + lr.Length}
		if err := c.followArchived(ctx, s, method, ar, g, b, ch); err != nil {
			return 0, err
		}
	}
	return r.ChainLength, nil
}

// fetchArchive reads [lo, hi) from an archive, re-asking for the rest of
// each prefix reply. Failing to reach the archive is E_ARCHIVE_UNREACHABLE;
// an archive that answers without the block asked for is E_CHAIN.
func (c *Client) fetchArchive(ctx context.Context, s *slot, ar archiveRange, lo, hi uint64, ch *chunk) error {
	cb := ar.cb
	for lo < hi {
		var bl []icrc3.Block
		var arg []byte
		if ar.icrc3 {
			arg = encodeGetBlocksArgs(icrc3.BlockRange{Start: lo, Length: hi - lo})
		} else {
			arg = encodeLegacyGetBlocksArgs(lo, hi-lo)
		}
		raw, err := c.pageQuery(ctx, s, cb.Canister, cb.Method, arg)
		if err != nil {
			var e *icrc3.Error
			if errors.As(err, &e) && (e.Kind == icrc3.KindTransport || e.Kind == icrc3.KindReject) && ctx.Err() == nil {
				return &icrc3.Error{Kind: icrc3.KindArchiveUnreachable, Code: e.Code, ICErrorCode: e.ICErrorCode, Canister: cb.Canister, Method: cb.Method,
					Index: idx(lo), Msg: fmt.Sprintf("blocks %d..%d", lo, hi), Err: err}
			}
			return fmt.Errorf("icrc3: archive blocks %d..%d: %w", lo, hi, err)
		}
		if ar.icrc3 {
			r, err := icrc3.DecodeGetBlocksResult(raw)
			if err != nil {
				return &icrc3.Error{Kind: icrc3.KindDecode, Canister: cb.Canister, Method: cb.Method, Msg: fmt.Sprintf("blocks %d..%d", lo, hi), Err: err}
			}
			bl = r.Blocks
		} else {
			bl, err = icrc3.DecodeLegacyBlockRange(raw, lo)
			if err != nil {
				return &icrc3.Error{Kind: icrc3.KindDecode, Canister: cb.Canister, Method: cb.Method, Msg: fmt.Sprintf("blocks %d..%d", lo, hi), Err: err}
			}
		}
		c.CountBlocks(len(bl))
		if len(bl) == 0 || bl[0].Index != lo {
			return &icrc3.Error{Kind: icrc3.KindChain, Canister: cb.Canister, Method: cb.Method, Index: idx(lo),
				Msg: fmt.Sprintf("archive reply for %d..%d does not start with block %d", lo, hi, lo)}
		}
		if err := contiguous(bl, cb.Canister, cb.Method); err != nil {
			return err
		}
		if last := bl[len(bl)-1].Index; last >= hi {
			return &icrc3.Error{Kind: icrc3.KindDecode, Canister: cb.Canister, Method: cb.Method,
				Msg: fmt.Sprintf("archive reply for %d..%d holds block %d", lo, hi, last)}
		}
		ch.putAll(bl)
		lo += uint64(len(bl))
	}
	return nil
}

// contiguous checks that a reply's blocks are numbered without gaps: a node
// that drops a block from a page must not go unnoticed.
func contiguous(bl []icrc3.Block, canister principal.Principal, method string) error {
	for i := 1; i < len(bl); i++ {
		if bl[i].Index != bl[i-1].Index+1 {
			return &icrc3.Error{Kind: icrc3.KindChain, Canister: canister, Method: method, Index: idx(bl[i-1].Index + 1),
				Msg: fmt.Sprintf("reply skips from block %d to %d", bl[i-1].Index, bl[i].Index)}
		}
	}
	return nil
}

// learnArchives finds where [start, end) is archived. A legacy get_blocks
// reply lists every archived range it touches (they are not capped); its
// blocks are dropped. For icrc3 ledgers, icrc3_get_archives lists the
// archives, whose own icrc3_get_blocks serves their ranges. What is learnt
// is only a routing hint: every block is still proven by the chain, and a
// failed direct read falls back to asking the ledger.
func (c *Client) learnArchives(ctx context.Context, f icrc3.Features, start, end uint64) error {
	if f.Endpoint == icrc3.EndpointLegacy {
		raw, err := c.Query(ctx, c.ledger, "get_blocks", encodeLegacyGetBlocksArgs(start, end-start), c.verify == icrc3.VerifyQueries)
		if err != nil {
			return fmt.Errorf("icrc3: locate blocks %d..%d: %w", start, end, err)
		}
		r, err := icrc3.DecodeLegacyGetBlocks(raw)
		if err != nil {
			return &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: "get_blocks", Err: err}
		}
		c.CountBlocks(len(r.Blocks))
		c.observeLength(r.ChainLength)
		for _, lr := range r.Archived {
			if lr.Start+lr.Length >= lr.Start {
				c.learn(archiveRange{cb: lr.Callback, start: lr.Start, end: lr.Start + lr.Length})
			}
		}
		return nil
	}
	const method = "icrc3_get_archives"
	raw, err := c.Query(ctx, c.ledger, method, candidGetArchivesArgs, c.verify == icrc3.VerifyQueries)
	if err != nil {
		if icagent.MethodMissing(err) {
			return nil // pages go through the ledger
		}
		return fmt.Errorf("icrc3: locate blocks %d..%d: %w", start, end, err)
	}
	var archives []struct {
		CanisterID principal.Principal `ic:"canister_id"`
		Start      idl.Nat             `ic:"start"`
		End        idl.Nat             `ic:"end"`
	}
	if err := icrc1.UnmarshalReply(raw, &archives); err != nil {
		return &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: method, Err: err}
	}
	for _, a := range archives {
		s, e := a.Start.BigInt(), a.End.BigInt()
		if !s.IsUint64() || !e.IsUint64() || e.Uint64() == ^uint64(0) || s.Uint64() > e.Uint64() {
			continue // not a range of a 64-bit chain; ignore the hint
		}
		c.learn(archiveRange{cb: icrc3.Callback{Canister: a.CanisterID, Method: "icrc3_get_blocks"},
			start: s.Uint64(), end: e.Uint64() + 1, icrc3: true})
	}
	return nil
}

// listArchives asks the ledger once for its whole archive list, so that
// later small reads of archived blocks cost one query, not two. The list is
// only a routing hint: a ledger without the method, or an archive that
// moved, falls back to asking the ledger where the blocks are.
func (c *Client) listArchives(ctx context.Context, ep icrc3.Endpoint) error {
	c.archMu.Lock()
	done := c.listed
	c.listed = true
	c.archMu.Unlock()
	if done {
		return nil
	}
	// Only a list actually read routes long reads (listedSince).
	read := func() {
		c.archMu.Lock()
		c.listedAt = c.now()
		c.archMu.Unlock()
	}
	if ep == icrc3.EndpointICRC3 {
		err := c.learnArchives(ctx, icrc3.Features{Endpoint: ep}, 0, 0)
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			read()
		}
		return nil
	}
	raw, err := c.Query(ctx, c.ledger, "archives", icrc1.NoArgs, c.verify == icrc3.VerifyQueries)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return nil
	}
	var archives []struct {
		CanisterID principal.Principal `ic:"canister_id"`
		Start      idl.Nat             `ic:"block_range_start"`
		End        idl.Nat             `ic:"block_range_end"`
	}
	if err := icrc1.UnmarshalReply(raw, &archives); err != nil {
		return nil // a hint we cannot read is no hint
	}
	for _, a := range archives {
		s, e := a.Start.BigInt(), a.End.BigInt()
		if !s.IsUint64() || !e.IsUint64() || e.Uint64() == ^uint64(0) || s.Uint64() > e.Uint64() {
			continue
		}
		c.learn(archiveRange{cb: icrc3.Callback{Canister: a.CanisterID, Method: "get_blocks"},
			start: s.Uint64(), end: e.Uint64() + 1})
	}
	read()
	return nil
}

const maxArchiveRanges = 1024

// archiveListAge is how long the archive list read at detection routes long
// reads without asking the ledger about their range first. A stale list
// costs round trips only (an archive that does not hold a page sends the
// read to the ledger), never a block: every block is proven by the chain.
const archiveListAge = 10 * time.Minute

// listedSince reports whether the archive list was read at or after t.
func (c *Client) listedSince(t time.Time) bool {
	c.archMu.Lock()
	defer c.archMu.Unlock()
	return c.listed && !c.listedAt.IsZero() && !c.listedAt.Before(t)
}

func (c *Client) learn(ar archiveRange) {
	if ar.start >= ar.end {
		return
	}
	c.archMu.Lock()
	defer c.archMu.Unlock()
	for i, x := range c.archives {
		if x.cb.Canister.Equal(ar.cb.Canister) && x.cb.Method == ar.cb.Method && x.icrc3 == ar.icrc3 &&
			ar.start <= x.end && x.start <= ar.end {
			c.archives[i].start, c.archives[i].end = min(x.start, ar.start), max(x.end, ar.end)
			return
		}
	}
	if len(c.archives) >= maxArchiveRanges {
		c.archives = c.archives[1:]
	}
	c.archives = append(c.archives, ar)
}

func (c *Client) archiveFor(a, b uint64) (archiveRange, bool) {
	c.archMu.Lock()
	defer c.archMu.Unlock()
	for _, x := range c.archives {
		if x.start <= a && b <= x.end {
			return x, true
		}
	}
	return archiveRange{}, false
}

func idx(i uint64) *uint64 { return &i }
