package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
)

// LedgerConfig is the operator's configuration of one ledger.
type LedgerConfig struct {
	// TW and Drift: the ledger's transaction window and permitted drift
	// (zero: matcher defaults, 24 h and 2 min — wider than the DFINITY
	// ledger's, which only costs blocks).
	TW, Drift time.Duration
	// MintingAccount overrides the one the ledger reports.
	MintingAccount *icrc3.Account
}

// Sources gives the engine a ledger's history; it is called once per ledger
// and the result reused. ok is false for ledgers the daemon does not serve.
type Sources func(ledger string) (h History, cfg LedgerConfig, err error)

// Engine decides intents against verified ledger history.
type Engine struct {
	sources Sources
	cache   BlockCache
	log     *zap.Logger
	now     func() time.Time

	mu     sync.Mutex
	chains map[string]*chain
	hists  map[string]ledgerSource
}

type ledgerSource struct {
	h   History
	cfg LedgerConfig
}

// NewEngine returns an engine reading history through sources and keeping
// verified blocks in cache.
func NewEngine(sources Sources, cache BlockCache, log *zap.Logger) *Engine {
	if log == nil {
		log = zap.NewNop()
	}
	return &Engine{sources: sources, cache: cache, log: log, now: time.Now,
		chains: map[string]*chain{}, hists: map[string]ledgerSource{}}
}

func (e *Engine) source(ledger string) (ledgerSource, *chain, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.hists[ledger]; ok {
		return s, e.chains[ledger], nil
	}
	h, cfg, err := e.sources(ledger)
	if err != nil {
		return ledgerSource{}, nil, err
	}
	s := ledgerSource{h: h, cfg: cfg}
	c := &chain{ledger: ledger, hist: h, cache: e.cache}
	e.hists[ledger], e.chains[ledger] = s, c
	return s, c, nil
}

// Rules returns the matching rules of a ledger: its configuration, with the
// minting account the ledger reports unless the operator overrode it.
func (e *Engine) rules(ctx context.Context, s ledgerSource) (matcher.LedgerRules, uint64, error) {
	r := matcher.LedgerRules{TW: s.cfg.TW, Drift: s.cfg.Drift, MintingAccount: s.cfg.MintingAccount}
	f, err := s.h.Detect(ctx)
	if err != nil {
		return r, 0, err
	}
	if r.MintingAccount == nil {
		r.MintingAccount = f.MintingAccount
	}
	page := f.PageSize
	if page == 0 {
		page = icrc3.PageICRC3
	}
	return r, page, nil
}

// Decision is the engine's answer for one intent: a verdict without its
// sequence number (the service numbers verdicts as it stores them).
type Decision = Verdict

// Decide settles one intent as far as verified history allows, by the
// table of DESIGN §2: found only on a verified match; absent only when the
// window is closed in certified time and every block of the window was read
// and verified; not_yet while it is open; unreadable on any failure. It never
// returns an error: failures are unreadable verdicts with a reason code,
// except a cancelled ctx, reported as ctx.Err() so the caller can retry.
func (e *Engine) Decide(ctx context.Context, in *matcher.Intent) (Verdict, error) {
	ledger := in.Canister.Encode()
	v := Verdict{IntentID: in.ID}
	s, c, err := e.source(ledger)
	if err != nil {
		return e.unreadable(v, err), nil
	}
	rules, page, err := e.rules(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return v, ctx.Err()
		}
		return e.unreadable(v, err), nil
	}
	w := in.Window(rules)
	v.Window = &Window{FromTS: U64(w.From), ToTS: U64(w.To), NarrowedBy: w.NarrowedBy}

	c.mu.Lock()
	defer c.mu.Unlock()

	d := decision{in: in, rules: rules, w: w, seen: map[uint64]bool{}}
	tip, read, err := c.refresh(ctx, d.scan)
	d.read += read
	if err != nil {
		if ctx.Err() != nil {
			return v, ctx.Err()
		}
		return e.unreadable(v, err), nil
	}
	v.Evidence = evidence(tip, s, &d)
	if tip.Empty {
		// No block at all: nothing can hold the original.
		return e.settle(v, &d, tip, w.ClosedAt(tip.Time)), nil
	}
	// Blocks verified earlier (by this or another intent) first.
	if d.match == nil {
		cands, err := c.cache.ByStamp(ctx, ledger, in.Stamp(), c.r.Lo, c.r.Hi)
		if err != nil {
			return e.unreadable(v, err), nil
		}
		d.scan(cands)
	}
	// Then extend the verified range down until it covers the window.
	for round := 0; d.match == nil && !c.covers(w.From); round++ {
		target := uint64(0)
		if c.r.Empty() {
			// Nothing verified yet: one page below the tip settles windows
			// that start after the newest blocks, and anchors the search.
			if c.r.Lo > page {
				target = c.r.Lo - page
			}
		} else {
			t, probes, err := c.locate(ctx, w.From, page)
			d.probes += probes
			if err != nil {
				if ctx.Err() != nil {
					return v, ctx.Err()
				}
				return e.unreadable(v, err), nil
			}
			target = t
		}
		n, _, err := c.extendDown(ctx, target, func(p []icrc3.Block) bool { d.scan(p); return d.match != nil })
		d.read += n
		if err != nil {
			if ctx.Err() != nil {
				return v, ctx.Err()
			}
			return e.unreadable(v, err), nil
		}
		if round > 64 {
			return e.unreadable(v, &chainFault{"window search did not converge"}), nil
		}
	}
	v.Evidence = evidence(tip, s, &d)
	if first, last, ok, err := c.cache.WindowBlocks(ctx, ledger, c.r.Lo, c.r.Hi, w.From, w.To); err == nil && ok {
		f, l := U64(first), U64(last)
		v.Window.FirstBlock, v.Window.LastBlock = &f, &l
	}
	return e.settle(v, &d, tip, w.ClosedAt(tip.Time)), nil
}

// decision accumulates what one intent's scan saw.
type decision struct {
	in     *matcher.Intent
	rules  matcher.LedgerRules
	w      matcher.Window
	match  *icrc3.Block
	near   []NearMiss
	seen   map[uint64]bool
	read   uint64
	probes uint64
}

// scan checks verified blocks against the intent. Only blocks stamped with
// the intent's created_at_time can match or nearly match.
func (d *decision) scan(page []icrc3.Block) {
	stamp := d.in.Stamp()
	for i := range page {
		b := &page[i]
		if b.CreatedAt == nil || *b.CreatedAt != stamp || d.seen[b.Index] {
			continue
		}
		d.seen[b.Index] = true
		r := matcher.Match(d.in, b, d.rules)
		switch {
		case r.Match:
			// The lowest matching index is the original; later ones could
			// only be re-executions the ledger's dedup would have refused.
			if d.match == nil || b.Index < d.match.Index {
				cp := *b
				d.match = &cp
			}
		case r.NearMiss:
			d.near = append(d.near, NearMiss{Index: U64(b.Index), Differs: r.Differs})
		}
	}
}

func evidence(t icrc3.Tip, s ledgerSource, d *decision) *Evidence {
	verified := "certificate+chain"
	if t.Format == icrc3.TipFormatQueries {
		verified = "queries"
	}
	ev := &Evidence{Verified: verified, TipHash: t.Hash.String(), BlocksRead: d.read}
	if !t.Empty {
		i := U64(t.Index)
		ev.TipIndex = &i
	}
	tm := U64(t.Time)
	ev.CertifiedTime = &tm
	return ev
}

func (e *Engine) settle(v Verdict, d *decision, t icrc3.Tip, closed bool) Verdict {
	v.DecidedAt = e.now().UTC()
	v.NearMisses = d.near
	switch {
	case d.match != nil:
		v.Status = StatusFound
		v.Block = &BlockRef{Index: U64(d.match.Index), TS: U64(d.match.TS), Hash: d.match.Hash.String(), Kind: string(d.match.Kind)}
		if d.match.Kind == icrc3.BlockUnknown {
			v.Block.Kind = d.match.BType
		}
	case closed:
		v.Status = StatusAbsent
	default:
		v.Status = StatusNotYet
	}
	v.Final = v.Status.Final()
	return v
}

// unreadable turns a failure into an unreadable verdict with a precise code.
func (e *Engine) unreadable(v Verdict, err error) Verdict {
	v.Status, v.Final, v.DecidedAt = StatusUnreadable, false, e.now().UTC()
	v.Reason = &Reason{Code: ReasonCode(err), Message: err.Error()}
	e.log.Info("history unreadable", zap.String("intent_id", v.IntentID), zap.String("code", v.Reason.Code), zap.Error(err))
	return v
}

// ReasonCode maps a failure to the stable code published in verdicts.
func ReasonCode(err error) string {
	var ie *icrc3.Error
	var cf *chainFault
	var ul *UnknownLedgerError
	switch {
	case errors.As(err, &ie):
		return ie.Kind.Code()
	case errors.As(err, &cf):
		return "E_CHAIN"
	case errors.As(err, &ul):
		return "E_UNKNOWN_LEDGER"
	case errors.Is(err, context.DeadlineExceeded):
		return "E_TIMEOUT"
	}
	return "E_INTERNAL"
}

// UnknownLedgerError is returned by Sources for ledgers the daemon does not
// serve.
type UnknownLedgerError struct{ Ledger string }

func (e *UnknownLedgerError) Error() string {
	return fmt.Sprintf("reconcile: ledger %s is not configured", e.Ledger)
}
