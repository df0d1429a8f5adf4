package icrc3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/principal"
)

// VerifyMode says what makes history trustworthy for a ledger.
type VerifyMode string

const (
	// VerifyChain: a certified tip plus the hash chain (the default).
	VerifyChain VerifyMode = "chain"
	// VerifyQueries: node-signed queries only, for ledgers that certify no
	// tip and that the operator accepted as such.
	VerifyQueries VerifyMode = "queries"
)

// Endpoint is a block endpoint family.
type Endpoint string

const (
	EndpointAuto   Endpoint = ""                 // the larger page of those served
	EndpointICRC3  Endpoint = "icrc3_get_blocks" // 100 blocks per page on DFINITY ledgers
	EndpointLegacy Endpoint = "get_blocks"       // 2000 blocks per page
)

// Default page requests in flight per endpoint family, and the most a
// client sends at once however configured: more only queues at one
// boundary node.
const (
	ConcurrencyLegacy = 4
	ConcurrencyICRC3  = 16
	MaxConcurrency    = 32
)

// concurrency is the page requests in flight for endpoint ep.
func (c *Client) concurrency(ep Endpoint) int {
	switch {
	case c.conc > 0:
		return c.conc
	case ep == EndpointICRC3:
		return ConcurrencyICRC3
	}
	return ConcurrencyLegacy
}

// Page sizes of the DFINITY ledger and archives.
const (
	PageICRC3  = 100
	PageLegacy = 2000
)

// ClientConfig configures a Client for one ledger.
type ClientConfig struct {
	Agent  *agent.Agent
	Ledger principal.Principal
	// RootKey is the DER BLS root key tip certificates are checked against;
	// nil takes the agent's own.
	RootKey []byte
	// MaxCertAge bounds the age of a tip certificate's /time (default 5 min).
	MaxCertAge time.Duration
	// Concurrency bounds the page requests in flight: by default 4 on
	// legacy 2000-block pages and 16 on 100-block icrc3 pages, at most
	// MaxConcurrency. Measured at a 100 ms round trip on a 1M-block ledger
	// (2 vCPUs): legacy pages are decode-bound past 4 (a 100k-block walk
	// took no less at 8 or 16), icrc3 pages are round-trip-bound (the same
	// walk took 27 s at 4, 15 s at 8, 11 s at 16).
	Concurrency int
	// Verify: VerifyChain (default) or VerifyQueries.
	Verify VerifyMode
	// Endpoint forces a block endpoint family; the default prefers legacy
	// get_blocks for its larger page when the ledger serves it.
	Endpoint Endpoint
	// PageSize overrides the page size of the chosen endpoint (tests).
	PageSize uint64
	// Now is the clock certificates' ages are measured against (default
	// time.Now).
	Now func() time.Time
}

// Client reads and verifies one ledger's block history, from the ledger and
// its archives. It is safe for concurrent use.
type Client struct {
	agent   *agent.Agent
	ledger  principal.Principal
	rootKey []byte
	maxAge  time.Duration
	conc    int
	verify  VerifyMode
	want    Endpoint
	page    uint64
	now     func() time.Time

	featMu sync.Mutex
	feat   *Features
	// tipProbe is detection's tip reply, served to the first Tip call made
	// soon after (a tip is as good as the moment it was certified).
	tipProbe   []byte
	tipProbeAt time.Time

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

	statMu   sync.Mutex
	stats    Stats
	inflight int
}

type archiveRange struct {
	cb         Callback
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
	c := &Client{
		agent:   cfg.Agent,
		ledger:  cfg.Ledger,
		rootKey: cfg.RootKey,
		maxAge:  cfg.MaxCertAge,
		conc:    cfg.Concurrency,
		verify:  cfg.Verify,
		want:    cfg.Endpoint,
		page:    cfg.PageSize,
		now:     cfg.Now,
	}
	if c.rootKey == nil {
		c.rootKey = cfg.Agent.GetRootKey()
	}
	if c.maxAge <= 0 {
		c.maxAge = 5 * time.Minute
	}
	c.conc = min(c.conc, MaxConcurrency)
	switch c.verify {
	case "":
		c.verify = VerifyChain
	case VerifyChain, VerifyQueries:
	default:
		return nil, fmt.Errorf("icrc3: new client: unknown verify mode %q", cfg.Verify)
	}
	switch c.want {
	case EndpointAuto, EndpointICRC3, EndpointLegacy:
	default:
		return nil, fmt.Errorf("icrc3: new client: unknown endpoint %q", cfg.Endpoint)
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.stats.Queries = map[string]uint64{}
	return c, nil
}

// Ledger is the ledger's canister id.
func (c *Client) Ledger() principal.Principal { return c.ledger }

// Mode is the client's verification mode.
func (c *Client) Mode() VerifyMode { return c.verify }

// NetworkKey names the IC network the client reads, by its root key (the
// first 8 bytes of the key's SHA-256, in hex): one canister id on two
// networks is two ledgers.
func (c *Client) NetworkKey() string {
	h := sha256.Sum256(c.rootKey)
	return hex.EncodeToString(h[:8])
}

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

// Stats counts the client's queries, for benchmarks and metrics.
type Stats struct {
	// Queries by "ledger:<method>" or "archive:<method>".
	Queries map[string]uint64
	Total   uint64 // all queries
	Blocks  uint64 // blocks received in block pages (duplicates included)
	// MaxInFlight is the most queries that were outstanding at once.
	MaxInFlight int
}

// Stats returns a snapshot of the counters.
func (c *Client) Stats() Stats {
	c.statMu.Lock()
	defer c.statMu.Unlock()
	s := c.stats
	s.Queries = make(map[string]uint64, len(c.stats.Queries))
	for k, v := range c.stats.Queries {
		s.Queries[k] = v
	}
	return s
}

func (c *Client) enter(canister principal.Principal, method string) {
	role := "archive:"
	if canister.Equal(c.ledger) {
		role = "ledger:"
	}
	c.statMu.Lock()
	c.stats.Queries[role+method]++
	c.stats.Total++
	c.inflight++
	c.stats.MaxInFlight = max(c.stats.MaxInFlight, c.inflight)
	c.statMu.Unlock()
}

func (c *Client) leave() {
	c.statMu.Lock()
	c.inflight--
	c.statMu.Unlock()
}

func (c *Client) countBlocks(n int) {
	c.statMu.Lock()
	c.stats.Blocks += uint64(n)
	c.statMu.Unlock()
}

// query sends one raw query. verify turns agent-go's signed-query
// verification on (an extra read_state and BLS check per signature).
func (c *Client) query(ctx context.Context, canister principal.Principal, method string, arg []byte, verify bool) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, classify(err, canister, method)
	}
	c.enter(canister, method)
	defer c.leave()
	req, err := c.agent.CreateRawAPIRequest(agent.RequestTypeQuery, canister, method, arg)
	if err != nil {
		return nil, &Error{Kind: KindTransport, Canister: canister, Method: method, Msg: "build request", Err: err}
	}
	var out []byte
	if err := rawQuery(ctx, req, &out, !verify); err != nil {
		return nil, classify(err, canister, method)
	}
	return out, nil
}

// rawQuery runs agent-go's query. agent-go panics on a reply whose status
// is neither "replied" nor "rejected" (a garbage body from one node), so
// the panic is turned into a decode error here.
func rawQuery(ctx context.Context, req *agent.RawAPIRequest, out *[]byte, skip bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Kind: KindDecode, Msg: fmt.Sprintf("unreadable query response: %v", p)}
		}
	}()
	return req.QueryWithContext(ctx, out, skip)
}

// methodMissing reports whether a reject says the canister does not export
// the method (as opposed to failing to run it).
func methodMissing(err error) bool {
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindReject {
		return false
	}
	switch e.ICErrorCode {
	case "IC0302", "IC0536":
		return true
	}
	// Without an error_code, only a "destination invalid" reject that
	// names a method says so; "canister not found" must stay an error.
	msg := strings.ToLower(fmt.Sprint(e.Err))
	return e.Code == "3" && strings.Contains(msg, "method")
}

// Features are what a ledger serves, as detected by probing it. Probes
// cost verified queries, so only those that change what the client reads
// are made: icrc3_get_blocks when legacy get_blocks is absent (or ICRC-3 is
// forced), get_data_certificate when icrc3_get_tip_certificate is absent. A
// false flag for an unprobed endpoint means "not needed", not "absent".
type Features struct {
	ICRC3Blocks  bool // icrc3_get_blocks
	LegacyBlocks bool // get_blocks
	ICRC3Tip     bool // icrc3_get_tip_certificate
	LegacyTip    bool // get_data_certificate
	// BlockTypes from icrc3_supported_block_types (nil when not served).
	BlockTypes []string
	// MintingAccount from icrc1_minting_account (nil when none or not served).
	MintingAccount *Account
	// MintingCertified: MintingAccount is the reply of a replicated call
	// whose certificate was verified (or the ledger does not serve the
	// method). When false it is one node's query reply, and Detect asks
	// the subnet again on every call.
	MintingCertified bool
	// Endpoint is the block endpoint family the client reads, and PageSize
	// its page.
	Endpoint Endpoint
	PageSize uint64
}

// Detect probes the ledger's endpoints once and caches the answer. Probes
// run with signed-query verification on. A ledger with no block endpoint
// is an E_UNSUPPORTED error. While the minting account is only one node's
// word, every Detect asks the subnet again.
func (c *Client) Detect(ctx context.Context) (Features, error) {
	return c.features(ctx, true)
}

// features is Detect for the client's own reads: with retry false a
// cached answer is returned as it is, so one decision (which calls Detect
// once, then reads a tip and pages) asks the subnet for an uncertain
// minting account once, not once per read.
func (c *Client) features(ctx context.Context, retry bool) (Features, error) {
	c.featMu.Lock()
	defer c.featMu.Unlock()
	if c.feat != nil {
		if retry && !c.feat.MintingCertified {
			// Only a node's word so far: ask the subnet again.
			f := *c.feat
			if err := c.readMinting(ctx, &f); err != nil {
				return Features{}, err
			}
			c.feat = &f
		}
		return *c.feat, nil
	}
	f, err := c.detect(ctx)
	if err != nil {
		return Features{}, err
	}
	c.feat = &f
	return f, nil
}

// probeResult is one detection probe's reply; ok is false when the ledger
// does not export the method.
type probeResult struct {
	raw []byte
	ok  bool
	err error
}

// detect runs the probes (featMu held). Each is a verified query, two
// round trips with its read_state: only those that can change what the
// client reads are made, and every probe whose need is known up front
// runs at once, so a cold client pays one probe's round trips, not the
// sum. Legacy pages are preferred, so icrc3_get_blocks is only probed when
// legacy get_blocks is absent or ICRC-3 is forced, and get_data_certificate
// only when icrc3_get_tip_certificate is absent. The archive list (a hint
// for routing page reads) is fetched alongside when the endpoint is known.
func (c *Client) detect(ctx context.Context) (Features, error) {
	var f Features
	probe := func(method string, arg []byte) probeResult {
		raw, err := c.query(ctx, c.ledger, method, arg, true)
		if err != nil {
			if methodMissing(err) {
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
	var mint Features
	var mintErr error
	run(func() { tip = probe("icrc3_get_tip_certificate", candidNoArgs) })
	run(func() { mintErr = c.readMinting(ctx, &mint) })
	if c.want != EndpointICRC3 {
		run(func() { legacy = probe("get_blocks", encodeLegacyGetBlocksArgs(0, 0)) })
	} else {
		run(func() { icrc3b = probe("icrc3_get_blocks", encodeGetBlocksArgs()) })
	}
	run(func() { types = probe("icrc3_supported_block_types", candidNoArgs) })
	// With the endpoint forced, or legacy preferred (a ledger without
	// get_blocks then lists archives its icrc3 way later), the archive
	// list's method is known now.
	listEP := EndpointLegacy
	if c.want == EndpointICRC3 {
		listEP = EndpointICRC3
	}
	run(func() { _ = c.listArchives(ctx, listEP) })
	wg.Wait()

	if legacy.err != nil {
		return Features{}, legacy.err
	}
	if legacy.ok {
		r, err := DecodeLegacyGetBlocks(legacy.raw)
		if err != nil {
			return Features{}, &Error{Kind: KindDecode, Canister: c.ledger, Method: "get_blocks", Err: err}
		}
		f.LegacyBlocks = true
		c.observeLength(r.ChainLength)
	}
	if c.want != EndpointICRC3 && !f.LegacyBlocks {
		icrc3b = probe("icrc3_get_blocks", encodeGetBlocksArgs())
	}
	if icrc3b.err != nil {
		return Features{}, icrc3b.err
	}
	if icrc3b.ok {
		r, err := DecodeGetBlocksResult(icrc3b.raw)
		if err != nil {
			return Features{}, &Error{Kind: KindDecode, Canister: c.ledger, Method: "icrc3_get_blocks", Err: err}
		}
		f.ICRC3Blocks = true
		if n, ok := r.LogLength.Uint64(); ok {
			c.observeLength(n)
		}
	}
	// The tip probe's reply is a real tip: the first Tip call uses it.
	if tip.err != nil {
		return Features{}, tip.err
	}
	f.ICRC3Tip = tip.ok
	if !f.ICRC3Tip {
		if tip = probe("get_data_certificate", candidNoArgs); tip.err != nil {
			return Features{}, tip.err
		}
		f.LegacyTip = tip.ok
	}
	if tip.ok {
		c.tipProbe, c.tipProbeAt = tip.raw, c.now()
	}
	if types.err != nil {
		return Features{}, types.err
	}
	if types.ok {
		var bt []struct {
			BlockType string `ic:"block_type"`
			URL       string `ic:"url"`
		}
		if err := unmarshalCandid(types.raw, &bt); err != nil {
			return Features{}, &Error{Kind: KindDecode, Canister: c.ledger, Method: "icrc3_supported_block_types", Err: err}
		}
		f.BlockTypes = make([]string, 0, len(bt))
		for _, t := range bt {
			f.BlockTypes = append(f.BlockTypes, t.BlockType)
		}
	}
	if mintErr != nil {
		return Features{}, mintErr
	}
	f.MintingAccount, f.MintingCertified = mint.MintingAccount, mint.MintingCertified
	switch {
	case c.want == EndpointICRC3 && f.ICRC3Blocks, c.want == EndpointAuto && f.ICRC3Blocks && !f.LegacyBlocks:
		f.Endpoint, f.PageSize = EndpointICRC3, PageICRC3
	case c.want == EndpointLegacy && f.LegacyBlocks, c.want == EndpointAuto && f.LegacyBlocks:
		f.Endpoint, f.PageSize = EndpointLegacy, PageLegacy
	default:
		msg := "the ledger serves neither icrc3_get_blocks nor get_blocks"
		if c.want != EndpointAuto {
			msg = fmt.Sprintf("the ledger does not serve %s", c.want)
		}
		return Features{}, &Error{Kind: KindUnsupported, Canister: c.ledger, Msg: msg}
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

// readMinting reads icrc1_minting_account as a replicated call whose
// certificate is verified here: which account mints decides whether a
// transfer must appear as xfer, mint or burn, so one node's query reply
// must not decide it. When the call fails, the signed query's answer is
// kept as uncertain (f.MintingCertified false).
func (c *Client) readMinting(ctx context.Context, f *Features) error {
	const method = "icrc1_minting_account"
	raw, err := c.certifiedCall(ctx, method, candidNoArgs)
	certified := err == nil
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("icrc3: detect %s: %w", method, err)
	case err != nil && methodMissing(err):
		// No minting account is the cautious reading: the engine never
		// lets a mint or burn with the intent's stamp end absent.
		f.MintingAccount, f.MintingCertified = nil, true
		return nil
	case err != nil:
		if raw, err = c.query(ctx, c.ledger, method, candidNoArgs, true); err != nil {
			if methodMissing(err) {
				f.MintingAccount, f.MintingCertified = nil, false
				return nil
			}
			return fmt.Errorf("icrc3: detect %s: %w", method, err)
		}
	}
	var acc *CandidAccount
	if err := unmarshalCandid(raw, &acc); err != nil {
		return &Error{Kind: KindDecode, Canister: c.ledger, Method: method, Err: err}
	}
	f.MintingAccount, f.MintingCertified = nil, certified
	if acc != nil {
		a, err := acc.Account()
		if err != nil {
			return &Error{Kind: KindDecode, Canister: c.ledger, Method: method, Err: err}
		}
		f.MintingAccount = &a
	}
	return nil
}

// Tip reads and verifies the ledger's certified tip. In queries mode a
// ledger without a tip certificate gets a tip read by signed queries.
func (c *Client) Tip(ctx context.Context) (Tip, error) {
	f, err := c.features(ctx, false)
	if err != nil {
		return Tip{}, err
	}
	var cert, tree []byte
	var method string
	switch {
	case f.ICRC3Tip:
		method = "icrc3_get_tip_certificate"
		raw, err := c.tipReply(ctx, method)
		if err != nil {
			return Tip{}, fmt.Errorf("icrc3: tip: %w", err)
		}
		var out *struct {
			Certificate []byte `ic:"certificate"`
			HashTree    []byte `ic:"hash_tree"`
		}
		if err := unmarshalCandid(raw, &out); err != nil {
			return Tip{}, &Error{Kind: KindDecode, Canister: c.ledger, Method: method, Err: err}
		}
		if out != nil {
			cert, tree = out.Certificate, out.HashTree
		}
	case f.LegacyTip:
		method = "get_data_certificate"
		raw, err := c.tipReply(ctx, method)
		if err != nil {
			return Tip{}, fmt.Errorf("icrc3: tip: %w", err)
		}
		var out struct {
			Certificate *[]byte `ic:"certificate"`
			HashTree    []byte  `ic:"hash_tree"`
		}
		if err := unmarshalCandid(raw, &out); err != nil {
			return Tip{}, &Error{Kind: KindDecode, Canister: c.ledger, Method: method, Err: err}
		}
		if out.Certificate != nil {
			cert, tree = *out.Certificate, out.HashTree
		}
	}
	if cert == nil {
		if c.verify == VerifyQueries {
			return c.queriesTip(ctx, f)
		}
		msg := "the ledger offers no tip certificate"
		if method != "" {
			msg = method + " returned no certificate"
		}
		return Tip{}, &Error{Kind: KindUncertified, Canister: c.ledger, Method: method, Msg: msg}
	}
	tip, err := VerifyTipCertificate(c.ledger, c.rootKey, cert, tree, c.maxAge, c.now())
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Method = method
		}
		return Tip{}, err
	}
	c.observeLength(tip.Len())
	return tip, nil
}

// tipReply returns detection's tip reply once if it is under a second old,
// else queries the tip.
func (c *Client) tipReply(ctx context.Context, method string) ([]byte, error) {
	c.featMu.Lock()
	raw, at := c.tipProbe, c.tipProbeAt
	c.tipProbe = nil
	c.featMu.Unlock()
	if raw != nil && c.now().Sub(at) < time.Second {
		return raw, nil
	}
	return c.query(ctx, c.ledger, method, candidNoArgs, true)
}

// queriesLag is how far behind the certified state a replica answering
// queries is assumed to be at most: an honest one lags by seconds.
const queriesLag = 30 * time.Second

// queriesTip reads the chain length and the last block with signed
// queries. Its Time is the subnet's certified /time, read by read_state
// before the queries, less queriesLag: the last block's ts would stand
// still while nobody transacts, and no node can move the certified time.
func (c *Client) queriesTip(ctx context.Context, f Features) (Tip, error) {
	now, err := c.CertifiedTime(ctx)
	if err != nil {
		return Tip{}, fmt.Errorf("icrc3: tip by queries: %w", err)
	}
	now = max(now, uint64(queriesLag)) - uint64(queriesLag)
	var n uint64
	if f.Endpoint == EndpointLegacy {
		raw, err := c.query(ctx, c.ledger, "get_blocks", encodeLegacyGetBlocksArgs(0, 0), true)
		if err != nil {
			return Tip{}, fmt.Errorf("icrc3: tip by queries: %w", err)
		}
		r, err := DecodeLegacyGetBlocks(raw)
		if err != nil {
			return Tip{}, &Error{Kind: KindDecode, Canister: c.ledger, Method: "get_blocks", Err: err}
		}
		n = r.ChainLength
	} else {
		raw, err := c.query(ctx, c.ledger, "icrc3_get_blocks", encodeGetBlocksArgs(), true)
		if err != nil {
			return Tip{}, fmt.Errorf("icrc3: tip by queries: %w", err)
		}
		r, err := DecodeGetBlocksResult(raw)
		if err != nil {
			return Tip{}, &Error{Kind: KindDecode, Canister: c.ledger, Method: "icrc3_get_blocks", Err: err}
		}
		var ok bool
		if n, ok = r.LogLength.Uint64(); !ok {
			return Tip{}, &Error{Kind: KindDecode, Canister: c.ledger, Method: "icrc3_get_blocks", Msg: "log_length exceeds 64 bits"}
		}
	}
	if n < c.known.Load() {
		return Tip{}, &Error{Kind: KindLagging, Canister: c.ledger,
			Msg: fmt.Sprintf("chain length %d is below the %d already seen", n, c.known.Load())}
	}
	if n == 0 {
		return Tip{Empty: true, Time: now, Format: TipFormatQueries}, nil
	}
	c.observeLength(n)
	var last *Block
	err = c.blocks(ctx, n-1, n, false, nil, func(page []Block) error {
		last = &page[len(page)-1]
		return nil
	})
	if err != nil {
		return Tip{}, err
	}
	return Tip{Index: last.Index, Hash: last.Hash, Time: now, Format: TipFormatQueries}, nil
}
