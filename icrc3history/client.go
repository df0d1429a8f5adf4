package icrc3history

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icagent"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// Default page requests in flight per endpoint family, and the most a
// client sends at once however configured: more only queues at one
// boundary node.
const (
	ConcurrencyLegacy = 12
	ConcurrencyICRC3  = 16
	MaxConcurrency    = 32
)

// concurrency is the page requests in flight for endpoint ep.
func (c *Client) concurrency(ep icrc3.Endpoint) int {
	switch {
	case c.conc > 0:
		return c.conc
	case ep == icrc3.EndpointICRC3:
		return ConcurrencyICRC3
	}
	return ConcurrencyLegacy
}

// ClientConfig configures a Client for one ledger.
type ClientConfig struct {
	Agent  *agent.Agent
	Ledger principal.Principal
	// RootKey is the DER BLS root key tip certificates are checked against;
	// nil takes the agent's own.
	RootKey []byte
	// MaxCertAge bounds the age of a tip certificate's /time (default 5 min).
	MaxCertAge time.Duration
	// Concurrency bounds the page requests in flight: by default 12 on
	// legacy 2000-block pages and 16 on 100-block icrc3 pages, at most
	// MaxConcurrency, chosen by a sweep at mainnet round-trip times
	// (docs/benchmarks.md#concurrency): on legacy pages a long walk is
	// bound by the client's CPU past 12, and more in flight only reads
	// more pages past a match and holds more memory; icrc3 pages stay
	// round-trip-bound, so they take more.
	Concurrency int
	// Verify: VerifyChain (default) or VerifyQueries.
	Verify icrc3.VerifyMode
	// Endpoint forces a block endpoint family; the default prefers legacy
	// get_blocks for its larger page when the ledger serves it.
	Endpoint icrc3.Endpoint
	// PageSize overrides the page size of the chosen endpoint (tests).
	PageSize uint64
	// Now is the clock certificates' ages are measured against (default
	// time.Now).
	Now func() time.Time
	// MintingWait bounds how long Detect waits for the certified
	// icrc1_minting_account call before it serves the node's answer as
	// uncertain (default icrc1.DefaultMintingWait); the call goes on.
	MintingWait time.Duration
}

// Client reads and verifies one ledger's block history, from the ledger and
// its archives. It is safe for concurrent use.
type Client struct {
	// Conn sends the queries and calls and checks the certificates; its
	// ledger and clock are the client's.
	*icagent.Conn
	ledger principal.Principal
	conc   int
	verify icrc3.VerifyMode
	want   icrc3.Endpoint
	page   uint64
	now    func() time.Time

	// No lock is held across a network call: detection and the minting
	// account are read by one Shared read at a time, and only what they
	// settle is kept under the locks.
	featMu sync.Mutex
	// feat is the ledger's endpoints once detected (the minting fields
	// unset), at featAt; detecting is the detection in flight.
	feat      *icrc3.Features
	featAt    time.Time
	detecting icagent.Shared[icrc3.Features]
	// tipProbe is detection's tip reply, served to the first Tip call made
	// soon after (a tip is as good as the moment it was certified).
	tipProbe   []byte
	tipProbeAt time.Time

	// mint is the minting account, kept once certified.
	mint icrc1.Minting

	// known is the highest chain length any reply or tip has shown. A later
	// reply claiming fewer blocks comes from a lagging replica; it never
	// shrinks what is known to exist.
	known atomic.Uint64

	archMu   sync.Mutex
	archives []archiveRange // where blocks were last seen archived
	// listed: the ledger's archive list was asked for once, so small reads
	// (the engine's single-block search probes) go straight to an archive
	// instead of through the ledger and then the archive.
	listed   bool
	listedAt time.Time // when the list was read; zero while unread
}

type archiveRange struct {
	cb         icrc3.Callback
	start, end uint64 // [start, end)
	icrc3      bool   // the callback speaks icrc3_get_blocks, else legacy BlockRange
}

// NewClient checks cfg and applies defaults. It makes no request.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Agent == nil {
		return nil, fmt.Errorf("icrc3: new client: no agent")
	}
	if len(cfg.Ledger.Raw) == 0 {
		return nil, fmt.Errorf("icrc3: new client: no ledger id")
	}
	conn, err := icagent.New(icagent.Config{Agent: cfg.Agent, Ledger: cfg.Ledger, RootKey: cfg.RootKey, MaxCertAge: cfg.MaxCertAge, Now: cfg.Now})
	if err != nil {
		return nil, fmt.Errorf("icrc3: new client: %w", err)
	}
	c := &Client{
		Conn:   conn,
		ledger: cfg.Ledger,
		conc:   cfg.Concurrency,
		verify: cfg.Verify,
		want:   cfg.Endpoint,
		page:   cfg.PageSize,
		now:    conn.Now,
	}
	c.mint.Wait = cfg.MintingWait
	c.conc = min(c.conc, MaxConcurrency)
	switch c.verify {
	case "":
		c.verify = icrc3.VerifyChain
	case icrc3.VerifyChain, icrc3.VerifyQueries:
	default:
		return nil, fmt.Errorf("icrc3: new client: unknown verify mode %q", cfg.Verify)
	}
	switch c.want {
	case icrc3.EndpointAuto, icrc3.EndpointICRC3, icrc3.EndpointLegacy:
	default:
		return nil, fmt.Errorf("icrc3: new client: unknown endpoint %q", cfg.Endpoint)
	}
	return c, nil
}

// Mode is the client's verification mode.
func (c *Client) Mode() icrc3.VerifyMode { return c.verify }

// Forget drops what the client learnt about the chain (its length, where
// archives hold blocks, a cached tip reply): the ledger's history changed,
// and a shorter new chain must not be taken for a lagging replica.
func (c *Client) Forget() {
	c.known.Store(0)
	c.archMu.Lock()
	c.archives, c.listed, c.listedAt = nil, false, time.Time{}
	c.archMu.Unlock()
	c.featMu.Lock()
	c.tipProbe = nil
	c.featMu.Unlock()
}

// KnownLength is the highest chain length seen so far.
func (c *Client) KnownLength() uint64 { return c.known.Load() }

func (c *Client) observeLength(n uint64) {
	for {
		cur := c.known.Load()
		if n <= cur || c.known.CompareAndSwap(cur, n) {
			return
		}
	}
}

// Detect probes the ledger's endpoints once and caches the answer, and
// reads its minting account alongside. Probes run with signed-query
// verification on. A ledger with no block endpoint is an E_UNSUPPORTED
// error. While the minting account is only one node's word, every Detect
// asks the subnet again, and waits for its answer at most MintingWait.
// Tip and page reads wait for the endpoints only, never for the minting
// account's replicated call.
func (c *Client) Detect(ctx context.Context) (icrc3.Features, error) {
	// Read beside the probes, so that a cold client pays one probe's round
	// trips, not the sum. Which account mints decides whether a transfer
	// must appear as xfer, mint or burn, so one node's query reply must
	// not decide it: only a certified answer is kept.
	type minted struct {
		acc       *icrc3.Account
		certified bool
		err       error
	}
	mc := make(chan minted, 1)
	go func() {
		acc, certified, err := c.mint.Get(ctx, c.Conn)
		mc <- minted{acc, certified, err}
	}()
	f, err := c.features(ctx)
	if err != nil {
		return icrc3.Features{}, err
	}
	m := <-mc
	if m.err != nil {
		return icrc3.Features{}, m.err
	}
	f.MintingAccount, f.MintingCertified = m.acc, m.certified
	return f, nil
}

// redetectEvery bounds how long features that name no tip endpoint serve
// before the ledger is asked again: that a method is missing is one
// node's reject, and taken for good it would leave a certified ledger
// unreadable (E_UNCERTIFIED) for the life of the process.
const redetectEvery = time.Minute

// features is the ledger's endpoints, detected on first use: what the
// client's own reads need. Concurrent first uses share one detection, and
// each waits for it only as long as its own ctx allows. Features with a
// tip endpoint are kept; others are detected again after redetectEvery.
func (c *Client) features(ctx context.Context) (icrc3.Features, error) {
	c.featMu.Lock()
	if f := c.feat; f != nil && (f.ICRC3Tip || f.LegacyTip || c.now().Sub(c.featAt) < redetectEvery) {
		c.featMu.Unlock()
		return *f, nil
	}
	c.featMu.Unlock()
	f, err := c.detecting.Do(ctx, func(ctx context.Context) (icrc3.Features, error) {
		f, err := c.detect(ctx)
		if err == nil {
			c.featMu.Lock()
			c.feat, c.featAt = &f, c.now()
			c.featMu.Unlock()
		}
		return f, err
	})
	if err != nil {
		return icrc3.Features{}, c.waitErr(ctx, err, "detect")
	}
	return f, nil
}

// waitErr is a shared read's error, or the caller's own ctx ending while
// it waited, classified as every error of the client is.
func (c *Client) waitErr(ctx context.Context, err error, method string) error {
	if ctx.Err() != nil && err == ctx.Err() {
		return icagent.Classify(err, c.ledger, method)
	}
	return err
}

// probeResult is one detection probe's reply; ok is false when the ledger
// does not export the method.
type probeResult struct {
	raw []byte
	ok  bool
	err error
}

// detect runs the probes, no lock held. Each is a verified query, two
// round trips with its read_state: only those that can change what the
// client reads are made, and every probe whose need is known up front
// runs at once, so a cold client pays one probe's round trips, not the
// sum. Legacy pages are preferred, so icrc3_get_blocks is only probed when
// legacy get_blocks is absent or ICRC-3 is forced, and get_data_certificate
// only when icrc3_get_tip_certificate is absent. The archive list (a hint
// for routing page reads) is fetched alongside when the endpoint is known.
func (c *Client) detect(ctx context.Context) (icrc3.Features, error) {
	var f icrc3.Features
	probe := func(method string, arg []byte) probeResult {
		raw, err := c.Query(ctx, c.ledger, method, arg, true)
		if err != nil {
			if icagent.MethodMissing(err) {
				return probeResult{}
			}
			return probeResult{err: fmt.Errorf("icrc3: detect %s: %w", method, err)}
		}
		return probeResult{raw: raw, ok: true}
	}
	// At most Concurrency probes are in flight, like pages; they start in
	// this order, the archive list (one unverified round trip) last.
	var wg sync.WaitGroup
	slots := make(chan struct{}, c.concurrency(c.want))
	run := func(fn func()) {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			fn()
		}()
	}
	var legacy, icrc3b, tip, types probeResult
	run(func() { tip = probe("icrc3_get_tip_certificate", icrc1.NoArgs) })
	if c.want != icrc3.EndpointICRC3 {
		run(func() { legacy = probe("get_blocks", encodeLegacyGetBlocksArgs(0, 0)) })
	} else {
		run(func() { icrc3b = probe("icrc3_get_blocks", encodeGetBlocksArgs()) })
	}
	run(func() { types = probe("icrc3_supported_block_types", icrc1.NoArgs) })
	// With the endpoint forced, or legacy preferred (a ledger without
	// get_blocks then lists archives its icrc3 way later), the archive
	// list's method is known now.
	listEP := icrc3.EndpointLegacy
	if c.want == icrc3.EndpointICRC3 {
		listEP = icrc3.EndpointICRC3
	}
	run(func() { _ = c.listArchives(ctx, listEP) })
	wg.Wait()

	if legacy.err != nil {
		return icrc3.Features{}, legacy.err
	}
	if legacy.ok {
		r, err := icrc3.DecodeLegacyGetBlocks(legacy.raw)
		if err != nil {
			return icrc3.Features{}, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: "get_blocks", Err: err}
		}
		f.LegacyBlocks = true
		c.observeLength(r.ChainLength)
	}
	if c.want != icrc3.EndpointICRC3 && !f.LegacyBlocks {
		icrc3b = probe("icrc3_get_blocks", encodeGetBlocksArgs())
	}
	if icrc3b.err != nil {
		return icrc3.Features{}, icrc3b.err
	}
	if icrc3b.ok {
		r, err := icrc3.DecodeGetBlocksResult(icrc3b.raw)
		if err != nil {
			return icrc3.Features{}, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: "icrc3_get_blocks", Err: err}
		}
		f.ICRC3Blocks = true
		if n, ok := r.LogLength.Uint64(); ok {
			c.observeLength(n)
		}
	}
	// The tip probe's reply is a real tip: the first Tip call uses it.
	if tip.err != nil {
		return icrc3.Features{}, tip.err
	}
	f.ICRC3Tip = tip.ok
	if !f.ICRC3Tip {
		if tip = probe("get_data_certificate", icrc1.NoArgs); tip.err != nil {
			return icrc3.Features{}, tip.err
		}
		f.LegacyTip = tip.ok
	}
	if tip.ok {
		c.featMu.Lock()
		c.tipProbe, c.tipProbeAt = tip.raw, c.now()
		c.featMu.Unlock()
	}
	if types.err != nil {
		return icrc3.Features{}, types.err
	}
	if types.ok {
		var bt []struct {
			BlockType string `ic:"block_type"`
			URL       string `ic:"url"`
		}
		if err := icrc1.UnmarshalReply(types.raw, &bt); err != nil {
			return icrc3.Features{}, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: "icrc3_supported_block_types", Err: err}
		}
		f.BlockTypes = make([]string, 0, len(bt))
		for _, t := range bt {
			f.BlockTypes = append(f.BlockTypes, t.BlockType)
		}
	}
	switch {
	case c.want == icrc3.EndpointICRC3 && f.ICRC3Blocks, c.want == icrc3.EndpointAuto && f.ICRC3Blocks && !f.LegacyBlocks:
		f.Endpoint, f.PageSize = icrc3.EndpointICRC3, icrc3.PageICRC3
	case c.want == icrc3.EndpointLegacy && f.LegacyBlocks, c.want == icrc3.EndpointAuto && f.LegacyBlocks:
		f.Endpoint, f.PageSize = icrc3.EndpointLegacy, icrc3.PageLegacy
	default:
		msg := "the ledger serves neither icrc3_get_blocks nor get_blocks"
		if c.want != icrc3.EndpointAuto {
			msg = fmt.Sprintf("the ledger does not serve %s", c.want)
		}
		return icrc3.Features{}, &icrc3.Error{Kind: icrc3.KindUnsupported, Canister: c.ledger, Msg: msg}
	}
	if f.Endpoint != listEP {
		// The list was asked of the wrong endpoint family: let the first
		// small read ask again.
		c.archMu.Lock()
		c.listed, c.listedAt = false, time.Time{}
		c.archMu.Unlock()
	}
	if c.page > 0 {
		f.PageSize = c.page
	}
	return f, nil
}

// Tip reads and verifies the ledger's certified tip. In queries mode a
// ledger without a tip certificate gets a tip read by signed queries.
func (c *Client) Tip(ctx context.Context) (icrc3.Tip, error) {
	f, err := c.features(ctx)
	if err != nil {
		return icrc3.Tip{}, err
	}
	var cert, tree []byte
	var method string
	switch {
	case f.ICRC3Tip:
		method = "icrc3_get_tip_certificate"
		raw, err := c.tipReply(ctx, method)
		if err != nil {
			return icrc3.Tip{}, fmt.Errorf("icrc3: tip: %w", err)
		}
		var out *struct {
			Certificate []byte `ic:"certificate"`
			HashTree    []byte `ic:"hash_tree"`
		}
		if err := icrc1.UnmarshalReply(raw, &out); err != nil {
			return icrc3.Tip{}, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: method, Err: err}
		}
		if out != nil {
			cert, tree = out.Certificate, out.HashTree
		}
	case f.LegacyTip:
		method = "get_data_certificate"
		raw, err := c.tipReply(ctx, method)
		if err != nil {
			return icrc3.Tip{}, fmt.Errorf("icrc3: tip: %w", err)
		}
		var out struct {
			Certificate *[]byte `ic:"certificate"`
			HashTree    []byte  `ic:"hash_tree"`
		}
		if err := icrc1.UnmarshalReply(raw, &out); err != nil {
			return icrc3.Tip{}, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: method, Err: err}
		}
		if out.Certificate != nil {
			cert, tree = *out.Certificate, out.HashTree
		}
	}
	if cert == nil {
		if c.verify == icrc3.VerifyQueries {
			return c.queriesTip(ctx, f)
		}
		msg := "the ledger offers no tip certificate"
		if method != "" {
			msg = method + " returned no certificate"
		}
		return icrc3.Tip{}, &icrc3.Error{Kind: icrc3.KindUncertified, Canister: c.ledger, Method: method, Msg: msg}
	}
	tip, err := icagent.VerifyTipCertificate(c.ledger, c.RootKey(), cert, tree, c.MaxCertAge(), c.now())
	if err != nil {
		if e, ok := err.(*icrc3.Error); ok {
			e.Method = method
		}
		return icrc3.Tip{}, err
	}
	c.observeLength(tip.Len())
	return tip, nil
}

// tipReply returns detection's tip reply once if it is under a second old,
// else queries the tip. The query is not signature-checked: its reply is
// a certificate and a hash tree that Tip verifies against the root key,
// which a node can neither forge nor alter; what one node can do is serve
// an older certificate, as a lagging replica does with its signature too,
// or none (unreadable). Checking the signature would cost a read_state
// round trip and a BLS verification on every tip.
func (c *Client) tipReply(ctx context.Context, method string) ([]byte, error) {
	c.featMu.Lock()
	raw, at := c.tipProbe, c.tipProbeAt
	c.tipProbe = nil
	c.featMu.Unlock()
	if raw != nil && c.now().Sub(at) < time.Second {
		return raw, nil
	}
	return c.Query(ctx, c.ledger, method, icrc1.NoArgs, false)
}

// queriesLag is how far behind the certified state a replica answering
// queries is taken to be at least: the certified time less this bounds a
// queries-mode tip's time from above.
const queriesLag = 30 * time.Second

// queriesTip reads the chain length and the last block with signed
// queries. Its Time is the last block's timestamp: the replica answering
// may lag behind the subnet by any amount, and a window may close only on
// a time that the blocks read cover. Timestamps never decrease along the
// chain, so every block above the tip is at least as late; a window that
// ends before the tip's block holds no block the walk down from it misses.
// An idle ledger's windows therefore wait for its next block. The time is
// also capped by the subnet's certified time (read_state /time), less
// queriesLag, which no node can move: a node's invented timestamp closes
// no window before that. An empty chain, or a last block without a
// timestamp, proves no time (0).
func (c *Client) queriesTip(ctx context.Context, f icrc3.Features) (icrc3.Tip, error) {
	now, err := c.CertifiedTime(ctx)
	if err != nil {
		return icrc3.Tip{}, fmt.Errorf("icrc3: tip by queries: %w", err)
	}
	now = max(now, uint64(queriesLag)) - uint64(queriesLag)
	var n uint64
	if f.Endpoint == icrc3.EndpointLegacy {
		raw, err := c.Query(ctx, c.ledger, "get_blocks", encodeLegacyGetBlocksArgs(0, 0), true)
		if err != nil {
			return icrc3.Tip{}, fmt.Errorf("icrc3: tip by queries: %w", err)
		}
		r, err := icrc3.DecodeLegacyGetBlocks(raw)
		if err != nil {
			return icrc3.Tip{}, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: "get_blocks", Err: err}
		}
		n = r.ChainLength
	} else {
		raw, err := c.Query(ctx, c.ledger, "icrc3_get_blocks", encodeGetBlocksArgs(), true)
		if err != nil {
			return icrc3.Tip{}, fmt.Errorf("icrc3: tip by queries: %w", err)
		}
		r, err := icrc3.DecodeGetBlocksResult(raw)
		if err != nil {
			return icrc3.Tip{}, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: "icrc3_get_blocks", Err: err}
		}
		var ok bool
		if n, ok = r.LogLength.Uint64(); !ok {
			return icrc3.Tip{}, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: "icrc3_get_blocks", Msg: "log_length exceeds 64 bits"}
		}
	}
	if n < c.known.Load() {
		return icrc3.Tip{}, &icrc3.Error{Kind: icrc3.KindLagging, Canister: c.ledger,
			Msg: fmt.Sprintf("chain length %d is below the %d already seen", n, c.known.Load())}
	}
	if n == 0 {
		return icrc3.Tip{Empty: true, Format: icrc3.TipFormatQueries}, nil
	}
	c.observeLength(n)
	var last *icrc3.Block
	err = c.blocks(ctx, n-1, n, false, nil, func(page []icrc3.Block) error {
		last = &page[len(page)-1]
		return nil
	})
	if err != nil {
		return icrc3.Tip{}, err
	}
	return icrc3.Tip{Index: last.Index, Hash: last.Hash, Time: min(last.TS, now), Format: icrc3.TipFormatQueries}, nil
}

// Concurrency is the configured bound on requests in flight (0: each
// endpoint family's default), for a reader of another family on the same
// connection.
func (c *Client) Concurrency() int { return c.conc }
