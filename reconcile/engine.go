package reconcile

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aviate-labs/agent-go/principal"
	"go.uber.org/zap"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reason"
)

// LedgerConfig is the operator's configuration of one ledger, the one type
// the command line, the ledgers file, the daemon and the engine share. It
// is what the operator said, not what a match uses: the engine derives a
// matcher.LedgerRules from it per decision (Engine.rules), resolving the
// minting account from MintingOverride and the ledger's certified one.
type LedgerConfig struct {
	// ID is the ledger's canister; the zero value for an engine whose
	// Sources know their ledgers by other means (tests, benchmarks).
	ID principal.Principal
	// Verify is what makes the ledger's history trustworthy (empty:
	// icrc3.VerifyChain).
	Verify icrc3.VerifyMode
	// TW and Drift: the ledger's transaction window and permitted drift
	// (zero: matcher defaults, 24 h and 2 min — wider than the DFINITY
	// ledger's, which only costs blocks).
	TW, Drift time.Duration
	// MintingOverride is the operator's minting=, which the ledger's
	// certified account must equal (a contradiction is a
	// MintingConflictError, never a verdict read by the wrong account);
	// nil: the ledger's own account decides.
	MintingOverride *icrc3.Account
	// AllowNarrowWindow accepts a TW or Drift narrower than the DFINITY
	// ICRC ledger's (24 h, 60 s), for a ledger whose own window is that
	// narrow. Without it such a configuration is refused (Validate).
	AllowNarrowWindow bool
}

// ConfigError is a ledger configuration the engine refuses to decide with.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return "reconcile: ledger configuration: " + e.Msg }

// Validate refuses a TW or Drift narrower than the ledger family's own
// unless AllowNarrowWindow says the ledger's own window is that narrow: a
// window that closes before the ledger's would publish absent while the
// original can still execute.
func (c LedgerConfig) Validate() error {
	if c.AllowNarrowWindow {
		return nil
	}
	if c.TW > 0 && c.TW < matcher.FamilyTW {
		return &ConfigError{fmt.Sprintf("tw %s is narrower than the DFINITY ICRC ledger's transaction window %s: windows would close before the original could execute; allow_narrow_window only for a ledger whose own window is that narrow", c.TW, matcher.FamilyTW)}
	}
	if c.Drift > 0 && c.Drift < matcher.FamilyDrift {
		return &ConfigError{fmt.Sprintf("drift %s is narrower than the DFINITY ICRC ledger's permitted drift %s: windows would miss calls stamped ahead of ledger time; allow_narrow_window only for a ledger whose own drift is that narrow", c.Drift, matcher.FamilyDrift)}
	}
	return nil
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

	mu       sync.Mutex
	chains   map[string]*chain
	hists    map[string]ledgerSource
	tipReuse time.Duration
	joinAge  time.Duration
	metrics  *Metrics
}

type freshKey struct{}

// FreshTip marks ctx so that decisions under it read a new certified tip
// even when ReuseTips would allow an older one: the follow-up of watched
// intents exists to see ledger time move.
func FreshTip(ctx context.Context) context.Context { return context.WithValue(ctx, freshKey{}, true) }

func wantsFresh(ctx context.Context) bool { v, _ := ctx.Value(freshKey{}).(bool); return v }

// ReuseTips lets a certified tip verified less than d ago serve later
// decisions of its ledger without a new query and BLS check (0, the
// default: every decision reads a fresh tip). A burst of intents then costs
// one tip; answers stay sound because an older tip only knows fewer blocks
// and an older time. Call it before the first decision.
func (e *Engine) ReuseTips(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tipReuse = d
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
	c := &chain{ledger: HistoryKey(h.NetworkKey(), ledger, h.Mode()), hist: h, cache: e.cache, reuse: e.tipReuse, now: e.now}
	c.w = newPageWriter(c)
	c.onChange = func(ch reconciled.HistoryChange) {
		e.log.Warn("ledger history changed: the cached chain is discarded and rebuilt from the certified tip",
			zap.String("canister_id", ledger), zap.String("history", c.ledger), zap.String("reason", ch.Reason),
			zap.Uint64("old_tip_index", uint64(ch.OldTipIndex)), zap.String("old_tip_hash", ch.OldTipHash),
			zap.Uint64("new_tip_index", uint64(ch.NewTipIndex)), zap.String("new_tip_hash", ch.NewTipHash),
			zap.Uint64("blocks_discarded", uint64(ch.BlocksDiscarded)))
		e.mu.Lock()
		m := e.metrics
		e.mu.Unlock()
		m.historyChanged(ch.Reason)
	}
	e.hists[ledger], e.chains[ledger] = s, c
	return s, c, nil
}

// Forget drops what the engine keeps of a ledger (its source and verified
// chain; the block cache is the store's): a daemon evicts ledgers nobody
// configured once their last open intent ends, so that such canisters do
// not cost memory for ever. A decision running on the ledger keeps what it
// holds; the next one asks Sources again.
func (e *Engine) Forget(ledger string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.hists, ledger)
	delete(e.chains, ledger)
}

// rules derives the matching rules of a ledger from its configuration: TW
// and Drift as configured, and the minting account resolved, the
// operator's MintingOverride when given (checked against the certified
// one), else the one the ledger reports.
//
// certain is false when the minting account is only one node's word (the
// certified read failed and the operator configured none): a verdict may
// then not depend on it.
func (e *Engine) rules(ctx context.Context, s ledgerSource) (r matcher.LedgerRules, page uint64, certain bool, err error) {
	r = matcher.LedgerRules{TW: s.cfg.TW, Drift: s.cfg.Drift, MintingAccount: s.cfg.MintingOverride}
	f, err := s.h.Detect(ctx)
	if err != nil {
		return r, 0, false, err
	}
	if m, c := r.MintingAccount, f.MintingAccount; m != nil && f.MintingCertified && c != nil && !m.Equal(*c) {
		// The ledger decides mint, burn or transfer by its own account;
		// an operator's account that contradicts the certified one would
		// read its blocks wrong.
		return r, 0, false, &MintingConflictError{Configured: *m, Certified: *c}
	}
	certain = r.MintingAccount != nil || f.MintingCertified
	if r.MintingAccount == nil {
		r.MintingAccount = f.MintingAccount
	}
	page = f.PageSize
	if page == 0 {
		page = icrc3.PageICRC3
	}
	return r, page, certain, nil
}

// Decide settles one intent as far as verified history allows, by the
// table of docs/design.md#statuses: found only on a verified match; absent only when the
// window is closed in certified time and every block of the window was read
// and verified; not_yet while it is open; unreadable on any failure. It
// returns an error only when ctx ends, so the caller can retry later;
// every other failure is an unreadable verdict with a reason code.
func (e *Engine) Decide(ctx context.Context, in *matcher.Intent) (reconciled.Verdict, error) {
	vs, err := e.DecideMany(ctx, []*matcher.Intent{in})
	if err != nil {
		return reconciled.Verdict{}, err
	}
	return vs[0], nil
}

// DecideMany decides intents with one certified tip per ledger: the
// follow-up of many watched intents costs one tip query per ledger, not one
// per intent. Verdicts come back in the order of ins.
func (e *Engine) DecideMany(ctx context.Context, ins []*matcher.Intent) ([]reconciled.Verdict, error) {
	out := make([]reconciled.Verdict, len(ins))
	byLedger := map[string][]int{}
	var order []string
	for i, in := range ins {
		l := in.Canister.Encode()
		if _, ok := byLedger[l]; !ok {
			order = append(order, l)
		}
		byLedger[l] = append(byLedger[l], i)
	}
	for _, l := range order {
		idx := byLedger[l]
		group := make([]*matcher.Intent, len(idx))
		for k, i := range idx {
			group[k] = ins[i]
		}
		if err := e.DecideJoining(ctx, l, group, Joins{}, func(k int, v reconciled.Verdict) { out[idx[k]] = v }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// HistoryKey names one verified chain in the block cache: the IC network
// (its root key), the canister and the verify mode. The same canister id on
// another network, or read in another mode, is another chain.
func HistoryKey(network, canister string, mode icrc3.VerifyMode) string {
	if mode == "" {
		mode = icrc3.VerifyChain
	}
	return network + "/" + canister + "/" + string(mode)
}

// Observe makes the engine count what it sees (history changes) on m;
// NewService calls it with the service's metrics.
func (e *Engine) Observe(m *Metrics) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.metrics = m
}

// coldPages bounds the pages a walk from an empty verified range asks for
// before any density is known: the most any client keeps in flight.
const coldPages = 32

// decision accumulates what one intent's scan saw.
type decision struct {
	in    *matcher.Intent
	rules matcher.LedgerRules
	// mintCertain: rules.MintingAccount is certified or configured.
	mintCertain bool
	w           matcher.Window
	match       *icrc3.Block
	// exact: match was compared as the ledger deduplicates (arg_hex).
	exact bool
	// loose: the lowest block matching an arg_hex intent only up to
	// normalisation (another call under the stamp on the DFINITY ledger).
	// It answers the intent only once the window closed with no exact
	// match: then it is found as normalized, never absent.
	loose *icrc3.Block
	near  []reconciled.NearMiss
	seen  map[uint64]bool
	read  uint64
	// mintBurn: a mint or burn block carries the intent's stamp while the
	// ledger's minting account is unknown, so whether it is the intent's
	// own block cannot be told (a mint records no sender).
	mintBurn bool
	// kindDoubt: a block matches the intent in every field but the kind,
	// which only an uncertain minting account decides.
	kindDoubt bool
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
		if d.rules.MintingAccount == nil && (b.Kind == icrc3.BlockMint || b.Kind == icrc3.BlockBurn) {
			d.mintBurn = true
		}
		r := matcher.Match(d.in, b, d.rules)
		if !d.mintCertain {
			r = d.matchUncertain(b, r)
		}
		switch {
		case r.Match:
			// The lowest matching index is the original; later ones could
			// only be re-executions the ledger's dedup would have refused.
			if d.match == nil || b.Index < d.match.Index {
				cp := *b
				d.match, d.exact = &cp, r.Exact
			}
		case r.NearMiss:
			d.near = append(d.near, reconciled.NearMiss{Index: reconciled.U64(b.Index), Differs: r.Differs, Block: nearMissBlock(b)})
			if r.Normalized && (d.loose == nil || b.Index < d.loose.Index) {
				cp := *b
				d.loose = &cp
			}
		}
	}
}

func nearMissBlock(b *icrc3.Block) *reconciled.NearMissBlock {
	nb := &reconciled.NearMissBlock{Kind: string(b.Kind), TS: reconciled.U64(b.TS)}
	acct := func(a *icrc3.Account) string {
		if a == nil {
			return ""
		}
		return a.String()
	}
	nb.From, nb.To, nb.Spender = acct(b.From), acct(b.To), acct(b.Spender)
	if b.Amount != nil {
		nb.Amount = b.Amount.String()
	}
	if f := b.EffectiveFee(); f != nil {
		nb.Fee = f.String()
	}
	if b.HasMemo {
		m := hex.EncodeToString(b.Memo)
		nb.Memo = &m
	}
	return nb
}

// matchUncertain judges a block without trusting the minting account. All
// that account decides is whether the intent's block is a transfer, a mint
// (the caller mints) or a burn (the recipient is the minting account), so
// the block is matched under each of the three. A plain transfer or
// approve block proves its own kind: the ledger writes one only when
// neither party is the minting account. A mint or burn block that matches
// under one reading is the intent's own only if the minting account is
// what that reading says: doubt, never a match and never absent.
func (d *decision) matchUncertain(b *icrc3.Block, reported matcher.Result) matcher.Result {
	plain := d.rules
	plain.MintingAccount = nil
	if b.Kind != icrc3.BlockMint && b.Kind != icrc3.BlockBurn {
		if r := matcher.Match(d.in, b, plain); r.Match {
			return r
		}
	}
	caller := d.in.CallerAccount()
	readings := []*icrc3.Account{nil, &caller}
	if d.in.Args.To != nil {
		readings = append(readings, d.in.Args.To)
	}
	for _, m := range readings {
		alt := d.rules
		alt.MintingAccount = m
		if matcher.Match(d.in, b, alt).Match {
			d.kindDoubt = true
			if reported.Match {
				return matcher.Result{NearMiss: true, Differs: []string{matcher.FieldMethod}}
			}
			break
		}
	}
	if reported.Match {
		// Matched only under the node's account: not evidence.
		return matcher.Result{NearMiss: true, Differs: []string{matcher.FieldMethod}}
	}
	return reported
}

func evidence(t icrc3.Tip, d *decision) *reconciled.Evidence {
	verified := "certificate+chain"
	if t.Format == icrc3.TipFormatQueries {
		verified = "queries"
	}
	ev := &reconciled.Evidence{Verified: verified, TipHash: t.Hash.String(), BlocksRead: d.read}
	if t.Format == icrc3.TipFormatICP {
		ev.IndexSource = reconciled.IndexByChainPosition
	}
	if !t.Empty {
		i := reconciled.U64(t.Index)
		ev.TipIndex = &i
	}
	tm := reconciled.U64(t.Time)
	ev.CertifiedTime = &tm
	return ev
}

func (e *Engine) settle(v reconciled.Verdict, d *decision, closed bool) reconciled.Verdict {
	v.DecidedAt = e.now().UTC()
	v.NearMisses = d.near
	if d.match == nil && closed && d.loose != nil {
		// No block holds the sent bytes and none can any more, but one
		// holds the same transfer up to normalisation: absent would invite
		// paying again for a payment already made.
		d.match, d.exact = d.loose, false
		v.NearMisses = slices.DeleteFunc(slices.Clone(d.near), func(n reconciled.NearMiss) bool { return uint64(n.Index) == d.loose.Index })
		if len(v.NearMisses) == 0 {
			v.NearMisses = nil
		}
	}
	switch {
	case d.match != nil:
		v.Status = reconciled.StatusFound
		v.Block = &reconciled.BlockRef{Index: reconciled.U64(d.match.Index), TS: reconciled.U64(d.match.TS), Hash: d.match.Hash.String(), Kind: string(d.match.Kind), Match: reconciled.MatchNormalized}
		if d.exact {
			v.Block.Match = reconciled.MatchExact
		}
		if d.match.Kind == icrc3.BlockUnknown {
			v.Block.Kind = d.match.BType
		}
	case d.kindDoubt:
		// The block may be the intent's own under the true minting
		// account: absent could make someone pay twice, and not_yet would
		// say no block matches.
		v.Status = reconciled.StatusUnreadable
		v.Reason = &reconciled.Reason{Code: "E_MINTING_UNCERTAIN", Message: "a block matches the intent in every field but its kind, and the ledger's minting account could not be certified; configure minting= for this ledger or wait for the certified read"}
	case closed && d.mintBurn:
		// Without the minting account a mint with this stamp may be the
		// intent's own: absent could make someone pay twice.
		v.Status = reconciled.StatusUnreadable
		v.Reason = &reconciled.Reason{Code: "E_NO_MINTING_ACCOUNT", Message: "a mint or burn block carries the intent's stamp and the ledger reports no minting account; configure minting= for this ledger"}
	case closed:
		v.Status = reconciled.StatusAbsent
	default:
		v.Status = reconciled.StatusNotYet
	}
	v.Final = v.Status.Final()
	return v
}

// unreadable turns a failure into an unreadable verdict with a precise code,
// or into a final invalid one when the failure is a settled fact about the
// canister (Refusal): no later read can make it a ledger.
func (e *Engine) unreadable(v reconciled.Verdict, err error) reconciled.Verdict {
	v.Status, v.Final, v.DecidedAt = reconciled.StatusUnreadable, false, e.now().UTC()
	v.Reason = &reconciled.Reason{Code: ReasonCode(err), Message: err.Error()}
	if Refusal(err) {
		v.Status, v.Final = reconciled.StatusInvalid, true
		e.log.Info("intent refused: its canister is not a ledger this daemon reads", zap.String("intent_id", v.IntentID),
			zap.String("code", v.Reason.Code), zap.Error(err))
		return v
	}
	e.log.Info("history unreadable", zap.String("intent_id", v.IntentID), zap.String("code", v.Reason.Code), zap.Error(err))
	return v
}

// Refusal reports whether err settles for good that the intent's canister
// is not a ledger the daemon reads: the configuration does not name it
// under strict ledgers (UnknownLedgerError), or the IC certified that it
// does not exist or runs no code (NoSuchCanisterError). Such an intent is a
// final invalid; every other failure may pass and leaves it unreadable.
func Refusal(err error) bool {
	var ul *UnknownLedgerError
	var nc *NoSuchCanisterError
	return errors.As(err, &ul) || errors.As(err, &nc)
}

// Reason codes of intents for canisters the daemon does not read, from
// the registry (package reason). They are part of the wire contract (a
// verdict's reason.code).
const (
	// CodeUnknownLedger: the canister is not a configured ledger. Final
	// invalid under strict ledgers (the configuration is trusted local
	// input); otherwise only an undecodable canister id gets it.
	CodeUnknownLedger = string(reason.UnknownLedger)
	// CodeSubjectMismatch: the intent's intake subject names another
	// canister than its body; final invalid.
	CodeSubjectMismatch = string(reason.SubjectMismatch)
	// CodeNoSuchCanister: the IC certifies that no canister has the id;
	// final invalid.
	CodeNoSuchCanister = string(reason.NoSuchCanister)
	// CodeNotALedger: the IC certifies that the canister exists but has
	// no code installed, so no ledger method can answer; final invalid.
	CodeNotALedger = string(reason.NotALedger)
	// CodeUnconfiguredWait: the daemon follows as many unconfigured
	// canisters (or open intents of this one) as it may at once; the
	// intent is stored, unread, and checked once a slot frees. Not final.
	CodeUnconfiguredWait = string(reason.UnconfiguredWait)
)

// ReasonCode maps a failure to the stable code published in verdicts.
func ReasonCode(err error) string {
	var ie *icrc3.Error
	var cf *chainFault
	var ul *UnknownLedgerError
	var hc *HistoryChangedError
	var ce *ConfigError
	var mc *MintingConflictError
	var nc *NoSuchCanisterError
	switch {
	case errors.As(err, &nc):
		if nc.NoModule {
			return CodeNotALedger
		}
		return CodeNoSuchCanister
	case errors.As(err, &ie):
		return ie.Kind.Code()
	case errors.As(err, &cf):
		return "E_CHAIN"
	case errors.As(err, &ul):
		return CodeUnknownLedger
	case errors.As(err, &hc):
		return "E_HISTORY_CHANGED"
	case errors.As(err, &ce):
		return "E_LEDGER_CONFIG"
	case errors.As(err, &mc):
		return "E_MINTING_CONFLICT"
	case errors.Is(err, context.DeadlineExceeded):
		return "E_TIMEOUT"
	}
	return "E_INTERNAL"
}

// MintingConflictError: the operator's minting= contradicts the minting
// account the ledger certifies.
type MintingConflictError struct{ Configured, Certified icrc3.Account }

func (e *MintingConflictError) Error() string {
	return fmt.Sprintf("reconcile: minting=%s contradicts the ledger's certified minting account %s; fix or remove minting=", e.Configured, e.Certified)
}

// NoSuchCanisterError is returned by Sources when the IC certified (a
// certificate valid under the root key, by a subnet whose range covers the
// id) that no canister has the id, or, with NoModule, that the canister
// has no code installed. One node's word never makes one.
type NoSuchCanisterError struct {
	Ledger   string
	NoModule bool
}

func (e *NoSuchCanisterError) Error() string {
	if e.NoModule {
		return fmt.Sprintf("reconcile: canister %s has no code installed (certified): it is not a ledger", e.Ledger)
	}
	return fmt.Sprintf("reconcile: canister %s does not exist (certified)", e.Ledger)
}

// UnknownLedgerError is returned by Sources for ledgers the daemon does not
// serve.
type UnknownLedgerError struct{ Ledger string }

func (e *UnknownLedgerError) Error() string {
	return fmt.Sprintf("reconcile: ledger %s is not configured", e.Ledger)
}
