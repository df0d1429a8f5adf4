package support

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/reason"
	"github.com/reconciled/reconciled/store"
)

// Ledger is a ledger's display units.
type Ledger struct {
	Decimals uint8  `json:"decimals"`
	Symbol   string `json:"symbol"`
}

// IntentItem is one intent in a listing or a search result.
type IntentItem struct {
	IntentID   string    `json:"intent_id"`
	CanisterID string    `json:"canister_id"`
	Caller     string    `json:"caller"`
	Method     string    `json:"method"`
	FirstSeen  time.Time `json:"first_seen"`
	// Status is the latest verdict's status; "" before the first verdict.
	Status    reconciled.Status `json:"status"`
	Final     bool              `json:"final"`
	LatestSeq uint64            `json:"latest_seq"`
	// UpdatedAt is when this instance last recorded a change to the
	// intent. A detail (which reads the verdicts) gives the latest
	// verdict's decided_at instead.
	UpdatedAt time.Time `json:"updated_at"`
	// HasBody is false for an intent known only from verdicts another
	// sidecar decided.
	HasBody bool    `json:"has_body"`
	Ledger  *Ledger `json:"ledger,omitempty"`

	// What the customer knows, read from the body: accounts in ICRC-1
	// text, the amount, the memo, and the stamp (created_at_time) in UTC.
	// Empty when the body is not stored or the matcher refused it.
	Amount  *Amount    `json:"amount,omitempty"`
	From    string     `json:"from,omitempty"`
	To      string     `json:"to,omitempty"`
	Spender string     `json:"spender,omitempty"`
	Memo    *Memo      `json:"memo,omitempty"`
	Stamp   *time.Time `json:"stamp,omitempty"`
	// DecidedAt is the latest verdict's decided_at.
	DecidedAt *time.Time `json:"decided_at,omitempty"`
}

func (it *IntentItem) setPayment(p payment) {
	it.Amount, it.From, it.To, it.Spender, it.Memo, it.Stamp = p.amount, p.from, p.to, p.spender, p.memo, p.stamp
}

// ListReply is GET /api/v1/intents.
type ListReply struct {
	Intents []IntentItem `json:"intents"`
	// NextCursor continues the listing with the same filter; "" after the
	// last page.
	NextCursor string `json:"next_cursor"`
}

// CountsReply is GET /api/v1/counts. Counts has every status, plus "none"
// for intents without a verdict yet.
type CountsReply struct {
	Counts map[string]int `json:"counts"`
	Total  int            `json:"total"`
	Open   int            `json:"open"`
}

// SearchReply is GET /api/v1/search.
type SearchReply struct {
	Query string      `json:"query"`
	Hits  []SearchHit `json:"hits"`
	// Readings says what the query was taken as ("intent id", "account",
	// "amount 40.25 ICP", ...).
	Readings []string `json:"readings"`
	// NextCursor continues the search; "" after the last page. Truncated
	// is NextCursor != "".
	NextCursor string `json:"next_cursor"`
	Truncated  bool   `json:"truncated"`
}

// SearchHit is an intent and why it matched: "intent_id", "block" (its
// verdict names the block), "near_miss" (the block is one of its near
// misses), "caller", "from", "to", "spender", "canister", "amount", "memo".
type SearchHit struct {
	Matches []string   `json:"matches"`
	Intent  IntentItem `json:"intent"`
}

// Detail is GET /api/v1/intents/{id}: the intent, the facts of its latest
// verdict made readable, and the whole verdict history.
type Detail struct {
	IntentItem
	// Intent is the intent's JSON as received; null when HasBody is false.
	Intent json.RawMessage `json:"intent"`
	// Advice is what support staff can tell the customer, with the block
	// numbers and retry schedule engineering asks for.
	Advice string `json:"advice"`
	// Tell is the same in words a customer knows, to read out.
	Tell string `json:"tell"`
	// After is what the tool layer saw of the payment (the intent's
	// after: "unknown", "Err.TooOld", ...); "" when not said.
	After string `json:"after,omitempty"`
	// BodyText is the intent as received, as text to show: indented when
	// small and shallow, cut at 64 KiB (BodyTruncated); BodyBytes is its
	// whole size.
	BodyText      string               `json:"body_text"`
	BodyBytes     int                  `json:"body_bytes"`
	BodyTruncated bool                 `json:"body_truncated"`
	Block         *BlockView           `json:"block"`
	Window        *WindowView          `json:"window"`
	Evidence      *EvidenceView        `json:"evidence"`
	NearMisses    []NearMissView       `json:"near_misses"`
	Reason        *reconciled.Reason   `json:"reason"`
	Verdicts      []reconciled.Verdict `json:"verdicts"`
	// Accounts are the intent's accounts, searchable as shown.
	Accounts []AccountView `json:"accounts"`
	// Watch is the follow-up of an open intent; nil when none is
	// scheduled here.
	Watch *WatchView `json:"watch"`
	// AsOf is when this answer was read.
	AsOf time.Time `json:"as_of"`
}

// NearMissView is a near miss with what its block moved made readable;
// Amount, Memo and Time are nil when the verdict predates block values.
type NearMissView struct {
	reconciled.NearMiss
	Amount *Amount    `json:"amount,omitempty"`
	Memo   *Memo      `json:"memo,omitempty"`
	Time   *time.Time `json:"time,omitempty"`
	URL    string     `json:"url,omitempty"`
}

// WatchView is when this instance last checked an open intent against the
// ledger and when it checks again.
type WatchView struct {
	// Attempts counts consecutive unreadable checks.
	Attempts int `json:"attempts"`
	// LastCheck is the last check known: the follow-up's, or the latest
	// verdict's when later; nil when there is neither.
	LastCheck *time.Time `json:"last_check"`
	// NextCheck is when the next check is due: the scheduled time, or for
	// an intent due at every round, one follow-up interval after the last
	// check.
	NextCheck time.Time `json:"next_check"`
	// EverySeconds is the follow-up interval (0: not known here).
	EverySeconds float64 `json:"every_seconds"`
	// AtNextRound: the interval is not known, and the intent is checked at
	// the follow-up's next round.
	AtNextRound bool `json:"at_next_round,omitempty"`
	// Late: no check was recorded for more than an interval past the next
	// check; the follow-up is not running here, or runs late.
	Late bool `json:"late,omitempty"`
}

// Amount is the intent's amount in raw units and, when the ledger is known,
// in tokens.
type Amount struct {
	Units   string `json:"units"`
	Display string `json:"display"`
}

// BlockView is the matched block with its ledger time in UTC.
type BlockView struct {
	reconciled.BlockRef
	Time *time.Time `json:"time,omitempty"`
	// URL is the block on the configured explorer.
	URL string `json:"url,omitempty"`
}

// WindowView is the window with its ends in UTC.
type WindowView struct {
	reconciled.Window
	From *time.Time `json:"from,omitempty"`
	To   *time.Time `json:"to,omitempty"`
}

// EvidenceView is the evidence with the certified time in UTC.
type EvidenceView struct {
	reconciled.Evidence
	CertifiedAt *time.Time `json:"certified_at,omitempty"`
}

func (h *handler) ledger(canister string) *Ledger {
	if h.cfg.Ledgers == nil || canister == "" {
		return nil
	}
	d, sym, ok := h.cfg.Ledgers(canister)
	if !ok {
		return nil
	}
	return &Ledger{Decimals: d, Symbol: sym}
}

func (h *handler) item(s store.IntentSummary) IntentItem {
	it := IntentItem{
		IntentID: s.IntentID, CanisterID: s.CanisterID, Caller: s.Caller, Method: s.Method,
		FirstSeen: s.FirstSeen, Status: s.Status, Final: s.Final, LatestSeq: s.LatestSeq,
		UpdatedAt: s.UpdatedAt, HasBody: s.HasBody, Ledger: h.ledger(s.CanisterID),
	}
	if s.HasBody {
		it.setPayment(h.paymentOf(s.CanisterID, s.Body))
	}
	if !s.DecidedAt.IsZero() {
		t := s.DecidedAt
		it.DecidedAt = &t
	}
	return it
}

// LedgerTime converts ledger nanoseconds to UTC; nil beyond 2262, where
// time.Time's nanosecond range ends.
func LedgerTime(ns uint64) *time.Time {
	if ns > math.MaxInt64 {
		return nil
	}
	t := time.Unix(0, int64(ns)).UTC()
	return &t
}

// Advice is what support staff can tell the person for verdict v; nil
// means no verdict yet. The detail's advice adds what only the store knows
// (near misses' amounts, the follow-up schedule).
func Advice(v *reconciled.Verdict) string { return advice(v, adviceContext{}) }

// adviceContext is what advice says beyond the verdict.
type adviceContext struct {
	// nearMiss describes the first near miss that moved tokens from the
	// person's account ("a similar payment of 2.5 ICP left your account at
	// 07:05 UTC on 30 Nov 2026 (block 2005)"); "" when there is none.
	nearMiss string
	// similar is nearMiss without its block number, to read out.
	similar string
	watch   *WatchView
	// blockTime adds the matched block's ledger time.
	blockTime bool
}

// utcText is a time as a person reads it aloud.
func utcText(t time.Time) string { return t.UTC().Format("15:04 UTC on 2 Jan 2006") }

func utcSeconds(t time.Time) string { return t.UTC().Format("15:04:05 UTC on 2 Jan 2006") }

func advice(v *reconciled.Verdict, x adviceContext) string {
	if v == nil {
		return "No verdict yet; do not pay again until there is one."
	}
	switch v.Status {
	case reconciled.StatusFound:
		if v.Block != nil && strings.Contains(v.Block.Kind, "approve") {
			return fmt.Sprintf("The approval is in place (block %d); no tokens moved. Do not approve again.", v.Block.Index)
		}
		if v.Block != nil {
			at := ""
			if t := LedgerTime(uint64(v.Block.TS)); t != nil && x.blockTime {
				at = " at " + utcText(*t)
			}
			return fmt.Sprintf("The payment went through in block %d%s — do not pay again.", v.Block.Index, at)
		}
		return "The payment went through — do not pay again."
	case reconciled.StatusAbsent:
		if x.nearMiss != "" {
			return "It did not happen as asked, and can no longer happen. " + strings.ToUpper(x.nearMiss[:1]) + x.nearMiss[1:] +
				" — check it before paying again."
		}
		if len(v.NearMisses) > 0 {
			return fmt.Sprintf("It did not happen as asked, and can no longer happen. But block %d has the same stamp and account "+
				"and differs only in %s — check it before paying again.", v.NearMisses[0].Index, strings.Join(v.NearMisses[0].Differs, ", "))
		}
		// "As a new payment": a retry of the same request would be refused as
		// too old, or deduplicated; the person need not know the word stamp.
		return "It did not happen and can no longer happen — it is safe to pay again, as a new payment."
	case reconciled.StatusNotYet:
		if v.Window != nil {
			if t := LedgerTime(uint64(v.Window.ToTS)); t != nil {
				return fmt.Sprintf("Not known yet: the payment can still go through until %s — do not pay again before then.",
					utcText(*t))
			}
		}
		return "Not known yet: the payment can still go through — do not pay again until there is an answer."
	case reconciled.StatusUnreadable:
		msg := "The ledger's history could not be read or verified yet, so the outcome is not known"
		if w := x.watch; w != nil {
			// To the second: retries come seconds apart, and a last try and
			// next retry in the same minute would read as one time.
			last := v.DecidedAt
			if w.LastCheck != nil && w.LastCheck.After(last) {
				last = *w.LastCheck
			}
			msg += fmt.Sprintf(" (%d attempts so far; last try %s; next retry %s)", w.Attempts,
				utcSeconds(last), utcSeconds(w.NextCheck))
		} else {
			msg += fmt.Sprintf(" (last try %s)", utcSeconds(v.DecidedAt))
		}
		if v.Reason != nil && v.Reason.Code == string(reason.UnconfiguredWait) {
			msg = "Not checked yet: the request names a ledger this service is not configured for, and it is already checking as many such ledgers as it may; it is checked once one of them is done"
		}
		if v.Reason != nil && v.Reason.Code == icrc3.KindUnknownCanister.Code() {
			// A boundary node's word, not certified: it may be a lie, so
			// the intent stays open, but it is most often a mistyped id.
			msg += ". The network's gateway says no canister has the ledger id the request names (a claim we cannot verify, so we keep checking): check that the request names the ledger the payment was made on"
		}
		return msg + ". We keep trying — do not pay again yet."
	case reconciled.StatusInvalid:
		if t := ledgerRefusal(v); t != "" {
			return t
		}
		return "The request could not be checked, so the outcome is unknown: escalate to engineering with the intent id, " +
			"and do not pay again until they answer."
	}
	return "Unknown status " + string(v.Status) + "; do not pay again."
}

// ledgerRefusal is the advice for an intent refused because of the
// canister it names ("" for any other invalid verdict): each says what is
// true of the payment, instead of "do not pay again" for an answer that
// will never come.
func ledgerRefusal(v *reconciled.Verdict) string {
	if v.Reason == nil {
		return ""
	}
	switch v.Reason.Code {
	case string(reason.NoSuchCanister):
		return "The request names a ledger that does not exist on the Internet Computer (certified by the network), so no payment " +
			"can have gone through it. If the person paid, it was on another ledger: find out which before paying again."
	case string(reason.NotALedger):
		return "The request names a canister that has no code installed (certified by the network): it is not a ledger, so no " +
			"payment can have gone through it. If the person paid, it was on another ledger: find out which before paying again."
	case string(reason.UnknownLedger):
		return "This service does not check payments on the ledger the request names (it is not one it is configured for), " +
			"so it will never have an answer. Check the payment on that ledger another way, or with engineering, before paying again."
	case string(reason.SubjectMismatch):
		return "The request was sent for one ledger but names another, so it was not checked and never will be: escalate to " +
			"engineering with the intent id, and do not pay again until they answer."
	}
	return ""
}

// FormatAmount renders raw ledger units as tokens ("1.5 ICP") given the
// ledger's decimals and symbol. It works on the decimal string, so amounts
// beyond 64 bits format exactly. A string that is not a decimal natural is
// returned unchanged.
func FormatAmount(units string, decimals uint8, symbol string) string {
	if units == "" || strings.Trim(units, "0123456789") != "" {
		return units
	}
	units = strings.TrimLeft(units, "0")
	d := int(decimals)
	if len(units) <= d {
		units = strings.Repeat("0", d-len(units)+1) + units
	}
	whole, frac := units[:len(units)-d], strings.TrimRight(units[len(units)-d:], "0")
	if whole == "" {
		whole = "0"
	}
	s := whole
	if frac != "" {
		s += "." + frac
	}
	if symbol != "" {
		s += " " + symbol
	}
	return s
}

func (h *handler) detail(rec *reconciled.IntentRecord, sum IntentItem, vs []reconciled.Verdict, watch *WatchView) Detail {
	d := Detail{IntentItem: sum, Verdicts: vs, NearMisses: []NearMissView{}, Accounts: []AccountView{}, Watch: watch,
		AsOf: time.Now().UTC()}
	if d.Verdicts == nil {
		d.Verdicts = []reconciled.Verdict{}
	}
	if rec != nil {
		d.Intent = rec.Body
		d.BodyText, d.BodyTruncated = bodyText(rec.Body)
		d.BodyBytes = len(rec.Body)
		d.After = afterOf(rec.Body)
		p := h.paymentOf(rec.CanisterID, rec.Body)
		d.setPayment(p)
		for _, a := range p.accounts {
			a.URL = h.accountURL(rec.CanisterID, a)
			d.Accounts = append(d.Accounts, a)
		}
	} else {
		d.Intent = json.RawMessage("null")
	}
	var latest *reconciled.Verdict
	if len(vs) > 0 {
		latest = &vs[len(vs)-1]
	}
	if latest == nil {
		d.Advice = advice(nil, adviceContext{})
		d.Tell = tell(nil, adviceContext{})
		return d
	}
	d.Status, d.Final, d.LatestSeq = latest.Status, latest.Final, latest.Seq
	if latest.Block != nil {
		d.Block = &BlockView{BlockRef: *latest.Block, Time: LedgerTime(uint64(latest.Block.TS)),
			URL: h.blockURL(d.CanisterID, uint64(latest.Block.Index))}
	}
	// An unreadable verdict may carry no window though an earlier one
	// located it; the newest known window is still the right one to show.
	for i := len(vs) - 1; i >= 0; i-- {
		if w := vs[i].Window; w != nil {
			d.Window = &WindowView{Window: *w, From: LedgerTime(uint64(w.FromTS)), To: LedgerTime(uint64(w.ToTS))}
			break
		}
	}
	if e := latest.Evidence; e != nil {
		d.Evidence = &EvidenceView{Evidence: *e}
		if e.CertifiedTime != nil {
			d.Evidence.CertifiedAt = LedgerTime(uint64(*e.CertifiedTime))
		}
	}
	x := adviceContext{watch: watch, blockTime: true}
	for _, nm := range latest.NearMisses {
		v := NearMissView{NearMiss: nm, URL: h.blockURL(d.CanisterID, uint64(nm.Index))}
		if b := nm.Block; b != nil {
			v.Amount = h.units(d.CanisterID, b.Amount)
			v.Time = LedgerTime(uint64(b.TS))
			if b.Memo != nil {
				if m, err := hex.DecodeString(*b.Memo); err == nil {
					v.Memo = memoView(m)
				}
			}
			if x.nearMiss == "" && v.Amount != nil && v.Time != nil {
				what := "a similar payment of %s left your account at %s (block %d)"
				if strings.Contains(b.Kind, "approve") {
					what = "a similar approval of %s was given from your account at %s (block %d)"
				}
				x.nearMiss = fmt.Sprintf(what, v.Amount.Display, utcText(*v.Time), nm.Index)
				x.similar = strings.TrimSuffix(fmt.Sprintf(what, v.Amount.Display, utcText(*v.Time), nm.Index),
					fmt.Sprintf(" (block %d)", nm.Index))
			}
		}
		d.NearMisses = append(d.NearMisses, v)
	}
	d.Advice = advice(latest, x)
	d.Tell = tell(latest, x)
	d.Reason = latest.Reason
	return d
}

// amountOf reads args.amount loosely from a body the matcher refused: an
// invalid intent may still name an amount worth showing.
func (h *handler) amountOf(canister string, body []byte) *Amount {
	var b struct {
		Args struct {
			Amount string `json:"amount"`
		} `json:"args"`
	}
	if json.Unmarshal(body, &b) != nil {
		return nil
	}
	return h.units(canister, b.Args.Amount)
}

// blockURL and accountURL fill the configured explorer templates; "" when
// none is configured.
func (h *handler) blockURL(canister string, idx uint64) string {
	return fillURL(h.cfg.ExplorerBlockURL, canister, strconv.FormatUint(idx, 10), "", "")
}

func (h *handler) accountURL(canister string, a AccountView) string {
	return fillURL(h.cfg.ExplorerAccountURL, canister, "", a.Text, a.ICPAccountID)
}

// fillURL replaces {ledger}, {block}, {account} (ICRC-1 text) and
// {account_id} (ICP hex), each path-escaped.
func fillURL(tmpl, ledger, block, account, accountID string) string {
	if tmpl == "" {
		return ""
	}
	return strings.NewReplacer("{ledger}", url.PathEscape(ledger), "{block}", url.PathEscape(block),
		"{account}", url.PathEscape(account), "{account_id}", url.PathEscape(accountID)).Replace(tmpl)
}
