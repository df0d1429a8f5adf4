package icphistory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icagent"
	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// Page is the ICP ledger's and archives' largest reply.
const Page = 2000

// History is one ICP ledger's history. It is safe for concurrent use.
type History struct {
	c      *icagent.Conn
	ledger principal.Principal
	conc   int

	// mint is the minting account, kept once certified.
	mint icrc1.Minting

	mu sync.Mutex
	// probed: query_encoded_blocks was seen answering with a reply that
	// decodes, so Detect need not ask again.
	probed bool
	// tipProbe is that answer, a query_encoded_blocks(0, 0) reply: the
	// first Tip within a second uses it instead of asking again.
	tipProbe   []byte
	tipProbeAt time.Time

	archMu   sync.Mutex
	archives []archiveRange // where replies last placed archived blocks
}

// archiveRange is an archive callback and the blocks [start, end) a
// reply said it holds: a routing hint only, every block is still chained.
type archiveRange struct {
	cb         icrc3.Callback
	start, end uint64
}

// New reads the ledger conn names through conn, concurrency pages at once
// (0: as many as legacy ICRC pages, which are as large).
func New(conn *icagent.Conn, concurrency int) *History {
	return &History{c: conn, ledger: conn.Ledger(), conc: concurrency}
}

// NetworkKey and Mode identify the chain with the canister id.
func (h *History) NetworkKey() string     { return h.c.NetworkKey() }
func (h *History) Mode() icrc3.VerifyMode { return icrc3.VerifyChain }

// Forget drops where archives were seen to hold blocks: the ledger's
// history changed.
func (h *History) Forget() {
	h.archMu.Lock()
	h.archives = nil
	h.archMu.Unlock()
}

// Detect checks that the ledger serves query_encoded_blocks (the ICP
// ledger's history endpoint) and reads its minting account; only a
// certified minting account is kept. No lock is held across a request.
func (h *History) Detect(ctx context.Context) (icrc3.Features, error) {
	h.mu.Lock()
	probed := h.probed
	h.mu.Unlock()
	if !probed {
		raw, err := h.c.Query(ctx, h.ledger, "query_encoded_blocks", icp.EncodeBlocksArgs(0, 0), true)
		if err != nil {
			var e *icrc3.Error
			if errors.As(err, &e) && e.Kind == icrc3.KindReject {
				return icrc3.Features{}, &icrc3.Error{Kind: icrc3.KindUnsupported, Canister: h.ledger,
					Method: "query_encoded_blocks", Msg: "the ledger serves no ICP block endpoint", Err: err}
			}
			return icrc3.Features{}, err
		}
		if _, err := icp.DecodeEncodedBlocks(raw); err != nil {
			return icrc3.Features{}, &icrc3.Error{Kind: icrc3.KindDecode, Canister: h.ledger, Method: "query_encoded_blocks", Err: err}
		}
		h.mu.Lock()
		h.probed = true
		h.mu.Unlock()
	}
	m, certified, err := h.mint.Get(ctx, h.c)
	if err != nil {
		return icrc3.Features{}, err
	}
	return icrc3.Features{MintingAccount: m, MintingCertified: certified, PageSize: Page}, nil
}

// IsICP reports whether the ledger answers query_encoded_blocks with a
// reply that decodes: the ICP ledger's own endpoint, which ICRC-3 ledgers
// do not serve. A reject is false; a reply that does not decode is an
// error (one node's garbage proves nothing either way).
func IsICP(ctx context.Context, c *icagent.Conn) (bool, error) {
	ok, _, err := probeICP(ctx, c)
	return ok, err
}

// Probe asks the ledger conn names whether it is the ICP ledger (IsICP)
// and, when it is, returns its History, whose first tip is the probe's own
// verified reply (no second query). It returns nil, nil when the ledger
// rejected query_encoded_blocks: not the ICP ledger, as far as this read
// can tell.
func Probe(ctx context.Context, conn *icagent.Conn, concurrency int) (*History, error) {
	ok, raw, err := probeICP(ctx, conn)
	if err != nil || !ok {
		return nil, err
	}
	h := New(conn, concurrency)
	h.probed, h.tipProbe, h.tipProbeAt = true, raw, conn.Now()
	return h, nil
}

// probeICP is IsICP with the reply, a query_encoded_blocks(0, 0): the
// tip's own query.
func probeICP(ctx context.Context, c *icagent.Conn) (bool, []byte, error) {
	raw, err := c.Query(ctx, c.Ledger(), "query_encoded_blocks", icp.EncodeBlocksArgs(0, 0), true)
	var e *icrc3.Error
	switch {
	case err == nil:
		if _, err := icp.DecodeEncodedBlocks(raw); err != nil {
			return false, nil, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.Ledger(), Method: "query_encoded_blocks", Err: err}
		}
		return true, raw, nil
	case errors.As(err, &e) && e.Kind == icrc3.KindReject:
		return false, nil, nil
	}
	return false, nil, err
}

// Tip reads the certified tip: the data certificate of a non-replicated
// query_encoded_blocks, verified (BLS, delegation, canister range, /time
// age), whose certified_data is the hash of the last block. The index is
// the reply's chain_length - 1: not certified, it is the position the
// certified block takes in the chain the walk down proves.
func (h *History) Tip(ctx context.Context) (icrc3.Tip, error) {
	h.mu.Lock()
	raw, at := h.tipProbe, h.tipProbeAt
	h.tipProbe = nil
	h.mu.Unlock()
	if raw == nil || h.c.Now().Sub(at) >= time.Second {
		var err error
		if raw, err = h.c.Query(ctx, h.ledger, "query_encoded_blocks", icp.EncodeBlocksArgs(0, 0), false); err != nil {
			return icrc3.Tip{}, err
		}
	}
	res, err := icp.DecodeEncodedBlocks(raw)
	if err != nil {
		return icrc3.Tip{}, &icrc3.Error{Kind: icrc3.KindDecode, Canister: h.ledger, Method: "query_encoded_blocks", Err: err}
	}
	if res.Certificate == nil {
		return icrc3.Tip{}, &icrc3.Error{Kind: icrc3.KindUncertified, Canister: h.ledger, Method: "query_encoded_blocks",
			Msg: "the reply carries no certificate"}
	}
	data, t, err := icagent.VerifyDataCertificate(h.ledger, h.c.RootKey(), res.Certificate, h.c.MaxCertAge(), h.c.Now())
	if err != nil {
		return icrc3.Tip{}, err
	}
	switch {
	case len(data) == 0 && res.ChainLength == 0:
		// The ledger never certified a block hash: it has no blocks.
		return icrc3.Tip{Empty: true, Time: t, Format: icrc3.TipFormatICP}, nil
	case len(data) != 32 || res.ChainLength == 0:
		return icrc3.Tip{}, &icrc3.Error{Kind: icrc3.KindUncertified, Canister: h.ledger, Method: "query_encoded_blocks",
			Msg: fmt.Sprintf("certified_data of %d bytes beside chain_length %d: not a block hash", len(data), res.ChainLength)}
	}
	var hash icrc3.Hash
	copy(hash[:], data)
	return icrc3.Tip{Index: res.ChainLength - 1, Hash: hash, Time: t, Format: icrc3.TipFormatICP}, nil
}

// Blocks delivers [start, end) in ascending pages.
func (h *History) Blocks(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	for lo := start; lo < end; lo += Page {
		page, err := h.fetch(ctx, lo, min(end, lo+Page))
		if err != nil {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
	}
	return nil
}

// BlocksDesc delivers [start, end) from the top down, each page ascending,
// reading up to the client's concurrency pages at once.
func (h *History) BlocksDesc(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	return h.blocksDesc(ctx, start, end, nil, fn)
}

// BlocksDescAbove is BlocksDesc for a walk whose end is learnt on the way,
// as the ICRC family's: no page lying wholly below floor() is requested, and
// once the pages requested are delivered and the next lies below floor(),
// the walk ends, possibly above start. Without it the engine could only
// ask for one stretch at a time and pay a round trip per stretch.
func (h *History) BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error {
	return h.blocksDesc(ctx, start, end, floor, fn)
}

// DefaultConcurrency is the pages read at once unless New is told
// otherwise: the bound the ICRC family keeps for its legacy get_blocks
// endpoint, whose pages are as large as these and are served by the same
// boundary nodes.
const DefaultConcurrency = 12

// concurrency is the pages read at once: the client's bound, or
// DefaultConcurrency.
func (h *History) concurrency() int {
	if h.conc > 0 {
		return h.conc
	}
	return DefaultConcurrency
}

func (h *History) blocksDesc(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error {
	if end <= start {
		return nil
	}
	type result struct {
		page []icrc3.Block
		err  error
	}
	conc := h.concurrency()
	below := func(hi uint64) bool { return floor != nil && hi <= floor() }
	// Deferred in this order, an early return cancels the pages still in
	// flight before waiting for them.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hi := end
	for hi > start {
		// One batch of up to conc pages, delivered in order.
		var batch []chan result
		if below(hi) {
			return nil
		}
		for k := 0; k < conc && hi > start && !below(hi); k++ {
			lo := start
			if hi-start > Page {
				lo = hi - Page
			}
			ch := make(chan result, 1)
			batch = append(batch, ch)
			wg.Add(1)
			go func(lo, hi uint64) {
				defer wg.Done()
				p, err := h.fetch(ctx, lo, hi)
				ch <- result{p, err}
			}(lo, hi)
			hi = lo
		}
		for _, ch := range batch {
			r := <-ch
			if r.err != nil {
				return r.err
			}
			if err := fn(r.page); err != nil {
				return err
			}
		}
	}
	return nil
}

// fetch reads exactly [lo, hi) from the ledger and, for archived parts,
// from the archives it names, decoding each block strictly.
func (h *History) fetch(ctx context.Context, lo, hi uint64) ([]icrc3.Block, error) {
	if cb, ok := h.archiveFor(lo, hi); ok {
		// Straight to the archive a reply named for these blocks, or the
		// one holding the blocks just above them; a short or failed answer
		// falls back to asking the ledger. Whichever canister answers, the
		// blocks must chain to the verified ones above.
		if bs, err := h.archive(ctx, cb, lo, hi-lo); err == nil && uint64(len(bs)) == hi-lo {
			h.learnArchives([]icp.EncodedArchivedRange{{Start: lo, Length: hi - lo, Callback: cb}})
			got := make(map[uint64][]byte, len(bs))
			for i, b := range bs {
				got[lo+uint64(i)] = b
			}
			return h.page(lo, hi, got)
		}
	}
	raw, err := h.c.Query(ctx, h.ledger, "query_encoded_blocks", icp.EncodeBlocksArgs(lo, hi-lo), false)
	if err != nil {
		return nil, err
	}
	res, err := icp.DecodeEncodedBlocks(raw)
	if err != nil {
		return nil, &icrc3.Error{Kind: icrc3.KindDecode, Canister: h.ledger, Method: "query_encoded_blocks", Err: err}
	}
	h.c.CountBlocks(len(res.Blocks))
	got := make(map[uint64][]byte, hi-lo)
	for i, b := range res.Blocks {
		got[res.FirstIndex+uint64(i)] = b
	}
	h.learnArchives(res.Archived)
	for _, a := range res.Archived {
		for s := max(a.Start, lo); s < min(a.Start+a.Length, hi); {
			n := min(a.Start+a.Length, hi) - s
			bs, err := h.archive(ctx, a.Callback, s, min(n, Page))
			if err != nil {
				return nil, err
			}
			if len(bs) == 0 {
				break
			}
			for i, b := range bs {
				got[s+uint64(i)] = b
			}
			s += uint64(len(bs))
		}
	}
	return h.page(lo, hi, got)
}

// page decodes the blocks [lo, hi) of got, all of which must be there.
func (h *History) page(lo, hi uint64, got map[uint64][]byte) ([]icrc3.Block, error) {
	page := make([]icrc3.Block, 0, hi-lo)
	for i := lo; i < hi; i++ {
		b, ok := got[i]
		if !ok {
			idx := i
			return nil, &icrc3.Error{Kind: icrc3.KindChain, Canister: h.ledger, Index: &idx,
				Msg: fmt.Sprintf("block %d missing from the replies for [%d, %d)", i, lo, hi)}
		}
		blk, _, err := icp.ToICRC3(i, b)
		if err != nil {
			idx := i
			return nil, &icrc3.Error{Kind: icrc3.KindDecode, Canister: h.ledger, Index: &idx, Err: err}
		}
		page = append(page, blk)
	}
	return page, nil
}

func (h *History) archive(ctx context.Context, cb icrc3.Callback, start, length uint64) ([][]byte, error) {
	raw, err := h.c.Query(ctx, cb.Canister, cb.Method, icp.EncodeBlocksArgs(start, length), false)
	if err == nil {
		var bs [][]byte
		if bs, err = icp.DecodeGetEncodedBlocksResult(raw); err == nil {
			h.c.CountBlocks(len(bs))
			return bs, nil
		}
	}
	idx := start
	return nil, &icrc3.Error{Kind: icrc3.KindArchiveUnreachable, Canister: cb.Canister, Method: cb.Method, Index: &idx,
		Msg: fmt.Sprintf("blocks [%d, %d)", start, start+length), Err: err}
}

func (h *History) learnArchives(rs []icp.EncodedArchivedRange) {
	if len(rs) == 0 {
		return
	}
	h.archMu.Lock()
	defer h.archMu.Unlock()
	for _, r := range rs {
		known := false
		for i := range h.archives {
			a := &h.archives[i]
			if a.cb.Method == r.Callback.Method && a.cb.Canister.Equal(r.Callback.Canister) {
				a.start, a.end, known = min(a.start, r.Start), max(a.end, r.Start+r.Length), true
			}
		}
		if !known {
			h.archives = append(h.archives, archiveRange{cb: r.Callback, start: r.Start, end: r.Start + r.Length})
		}
	}
}

// archiveFor names the archive to ask for [lo, hi): one seen to hold
// those blocks, else the one seen nearest above them. The ledger names an
// archive only for the blocks a query asked about, and a walk goes down
// through an archive's blocks page by page: without the guess every page
// would cost a ledger query first, a serial round trip each. A wrong guess
// costs one (the archive refuses the range, the ledger is asked).
func (h *History) archiveFor(lo, hi uint64) (icrc3.Callback, bool) {
	h.archMu.Lock()
	defer h.archMu.Unlock()
	var above *archiveRange
	for i := range h.archives {
		a := &h.archives[i]
		if a.start <= lo && hi <= a.end {
			return a.cb, true
		}
		if a.start >= hi && (above == nil || a.start < above.start) {
			above = a
		}
	}
	if above != nil {
		return above.cb, true
	}
	return icrc3.Callback{}, false
}
