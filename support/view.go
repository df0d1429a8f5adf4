package support

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/reconciled/reconciled/reconcile"
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
	Status    reconcile.Status `json:"status"`
	Final     bool             `json:"final"`
	LatestSeq uint64           `json:"latest_seq"`
	// UpdatedAt is when this instance last recorded a change to the
	// intent. A detail (which reads the verdicts) gives the latest
	// verdict's decided_at instead.
	UpdatedAt time.Time `json:"updated_at"`
	// HasBody is false for an intent known only from verdicts another
	// sidecar decided.
	HasBody bool    `json:"has_body"`
	Ledger  *Ledger `json:"ledger,omitempty"`
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
	// Scanned counts intents examined for block and account matches.
	// Truncated says the search stopped early, at the scan limit or at
	// more hits than the reply's limit, so further intents may match.
	Scanned   int  `json:"scanned"`
	Truncated bool `json:"truncated"`
}

// SearchHit is an intent and why it matched: "intent_id", "block" (its
// verdict names the block), "near_miss" (the block is one of its near
// misses), "caller", "account" (an account in its args), "canister".
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
	// Advice is what the tool layer should tell the person.
	Advice     string               `json:"advice"`
	Amount     *Amount              `json:"amount,omitempty"`
	Block      *BlockView           `json:"block"`
	Window     *WindowView          `json:"window"`
	Evidence   *EvidenceView        `json:"evidence"`
	NearMisses []reconcile.NearMiss `json:"near_misses"`
	Reason     *reconcile.Reason    `json:"reason"`
	Verdicts   []reconcile.Verdict  `json:"verdicts"`
}

// Amount is the intent's amount in raw units and, when the ledger is known,
// in tokens.
type Amount struct {
	Units   string `json:"units"`
	Display string `json:"display"`
}

// BlockView is the matched block with its ledger time in UTC.
type BlockView struct {
	reconcile.BlockRef
	Time *time.Time `json:"time,omitempty"`
}

// WindowView is the window with its ends in UTC.
type WindowView struct {
	reconcile.Window
	From *time.Time `json:"from,omitempty"`
	To   *time.Time `json:"to,omitempty"`
}

// EvidenceView is the evidence with the certified time in UTC.
type EvidenceView struct {
	reconcile.Evidence
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
	return IntentItem{
		IntentID: s.IntentID, CanisterID: s.CanisterID, Caller: s.Caller, Method: s.Method,
		FirstSeen: s.FirstSeen, Status: s.Status, Final: s.Final, LatestSeq: s.LatestSeq,
		UpdatedAt: s.UpdatedAt, HasBody: s.HasBody, Ledger: h.ledger(s.CanisterID),
	}
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

// Advice is what the tool layer should tell the person for verdict v; nil
// means no verdict yet.
func Advice(v *reconcile.Verdict) string {
	if v == nil {
		return "No verdict yet; do not pay again until there is one."
	}
	switch v.Status {
	case reconcile.StatusFound:
		if v.Block != nil {
			return fmt.Sprintf("The payment went through in block %d — do not pay again.", v.Block.Index)
		}
		return "The payment went through — do not pay again."
	case reconcile.StatusAbsent:
		return "It did not happen and can no longer happen — safe to pay again with a new stamp."
	case reconcile.StatusNotYet:
		if v.Window != nil {
			if t := LedgerTime(uint64(v.Window.ToTS)); t != nil {
				return fmt.Sprintf("Not yet known; the window closes at %s; do not pay again before then.",
					t.Format(time.RFC3339))
			}
		}
		return "Not yet known; the window has not closed; do not pay again before it does."
	case reconcile.StatusUnreadable:
		return "The ledger's history could not be read or verified; we keep trying. Do not pay again yet."
	case reconcile.StatusInvalid:
		msg := "no reason given"
		if v.Reason != nil {
			msg = v.Reason.Message
			if v.Reason.Field != "" {
				msg = v.Reason.Field + ": " + msg
			}
			if v.Reason.Code != "" {
				msg += " (" + v.Reason.Code + ")"
			}
		}
		return "The request could not be read: " + msg + "."
	}
	return "Unknown status " + string(v.Status) + "; do not pay again."
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

func (h *handler) detail(rec *store.IntentRecord, sum IntentItem, vs []reconcile.Verdict) Detail {
	d := Detail{IntentItem: sum, Verdicts: vs, NearMisses: []reconcile.NearMiss{}}
	if d.Verdicts == nil {
		d.Verdicts = []reconcile.Verdict{}
	}
	if rec != nil {
		d.Intent = rec.Body
		d.Amount = h.amount(rec)
	} else {
		d.Intent = json.RawMessage("null")
	}
	var latest *reconcile.Verdict
	if len(vs) > 0 {
		latest = &vs[len(vs)-1]
	}
	d.Advice = Advice(latest)
	if latest == nil {
		return d
	}
	d.Status, d.Final, d.LatestSeq = latest.Status, latest.Final, latest.Seq
	if latest.Block != nil {
		d.Block = &BlockView{BlockRef: *latest.Block, Time: LedgerTime(uint64(latest.Block.TS))}
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
	if latest.NearMisses != nil {
		d.NearMisses = latest.NearMisses
	}
	d.Reason = latest.Reason
	return d
}

// amount reads args.amount from the stored body. The body is shown as
// received, so this reads it loosely: an intent refused as invalid may have
// no readable amount, and then there is none to show.
func (h *handler) amount(rec *store.IntentRecord) *Amount {
	var body struct {
		Args struct {
			Amount string `json:"amount"`
		} `json:"args"`
	}
	if json.Unmarshal(rec.Body, &body) != nil || body.Args.Amount == "" ||
		strings.Trim(body.Args.Amount, "0123456789") != "" {
		return nil
	}
	a := &Amount{Units: body.Args.Amount, Display: body.Args.Amount + " units"}
	if l := h.ledger(rec.CanisterID); l != nil {
		a.Display = FormatAmount(body.Args.Amount, l.Decimals, l.Symbol)
	}
	return a
}
