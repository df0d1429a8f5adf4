package support

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/reason"
)

// tell is what support staff read out to the customer for verdict v: the
// outcome and what to do, in words a customer knows. Block numbers, retry
// schedules and reasons are for engineering (Advice keeps them).
func tell(v *reconciled.Verdict, x adviceContext) string {
	if v == nil {
		return "There is no answer yet; do not pay again until there is one."
	}
	switch v.Status {
	case reconciled.StatusFound:
		if v.Block != nil && strings.Contains(v.Block.Kind, "approve") {
			return "The approval is in place; no tokens moved. Do not approve again."
		}
		if v.Block != nil {
			if t := LedgerTime(uint64(v.Block.TS)); t != nil {
				return "The payment went through at " + utcText(*t) + " — do not pay again."
			}
		}
		return "The payment went through — do not pay again."
	case reconciled.StatusAbsent:
		if x.similar != "" {
			return "It did not happen as asked, and can no longer happen. " + strings.ToUpper(x.similar[:1]) + x.similar[1:] +
				" — check it before paying again."
		}
		if len(v.NearMisses) > 0 {
			return "It did not happen as asked, and can no longer happen. But a similar payment from your account differs only in " +
				strings.Join(v.NearMisses[0].Differs, ", ") + " — check it before paying again."
		}
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
		return "We cannot see the outcome yet: the ledger's history could not be read. We keep trying — do not pay again yet."
	case reconciled.StatusInvalid:
		if v.Reason != nil {
			switch v.Reason.Code {
			case string(reason.NoSuchCanister), string(reason.NotALedger):
				return "The payment was asked of a ledger that does not exist, so no payment went through it. " +
					"Tell us which token you paid with and we will check again before you pay again."
			case string(reason.UnknownLedger):
				return "We do not check payments on that ledger, so we cannot tell whether this one went through. " +
					"Check your wallet's history on that ledger before paying again."
			}
		}
		return "The request could not be checked, so the outcome is unknown. We pass it to our engineers; " +
			"do not pay again until they answer."
	}
	return "The outcome is not known; do not pay again."
}

// afterOf is what the tool layer saw of the payment (the intent's after),
// read loosely: "" when the body has none.
func afterOf(body []byte) string {
	var b struct {
		After any `json:"after"`
	}
	if json.Unmarshal(body, &b) != nil || b.After == nil {
		return ""
	}
	if s, ok := b.After.(string); ok {
		return s
	}
	out, _ := json.Marshal(b.After)
	return string(out)
}

// bodyShown bounds the body as shown: a body is any JSON a tool layer
// sent, and an invalid one may be huge or nested thousands deep.
const (
	bodyShown  = 64 << 10
	bodyIndent = 12 // deeper bodies are shown as received, not indented
)

// bodyText is the body as a person reads it: indented when it is small and
// shallow, else as received; cut at bodyShown bytes (cut reports it).
func bodyText(body []byte) (text string, cut bool) {
	if len(body) <= bodyShown && depth(body) <= bodyIndent {
		var b bytes.Buffer
		if json.Indent(&b, body, "", "  ") == nil && b.Len() <= bodyShown {
			return b.String(), false
		}
	}
	if len(body) <= bodyShown {
		return string(body), false
	}
	n := bodyShown
	for n > 0 && !utf8.RuneStart(body[n]) {
		n--
	}
	return string(body[:n]), true
}

// depth is how deep arrays and objects nest in the JSON text b.
func depth(b []byte) int {
	d, most, inStr, esc := 0, 0, false, false
	for _, c := range b {
		switch {
		case inStr && esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case inStr && c == '"':
			inStr = false
		case inStr:
		case c == '"':
			inStr = true
		case c == '[' || c == '{':
			d++
			most = max(most, d)
		case c == ']' || c == '}':
			d--
		}
	}
	return most
}

// watchView is the follow-up of an open intent as it truly runs. The
// watch list's next check of a not_yet intent stays at the time it was
// scheduled, which is due at every round: its real next check is one
// follow-up interval after its last one. The last check is the later of
// the one the follow-up recorded and the latest verdict (a check too).
func (h *handler) watchView(attempts int, next, checked time.Time, latest *reconciled.Verdict, now time.Time) *WatchView {
	w := &WatchView{Attempts: attempts, NextCheck: next.UTC()}
	last := checked
	if latest != nil && latest.DecidedAt.After(last) {
		last = latest.DecidedAt
	}
	if !last.IsZero() {
		l := last.UTC()
		w.LastCheck = &l
	}
	if every := h.cfg.FollowUpEvery; every > 0 {
		w.EverySeconds = every.Seconds()
		if !last.IsZero() && !next.After(last) {
			w.NextCheck = last.Add(every).UTC()
		}
		// A round is late past one more interval: say so rather than
		// show a next check in the past as if it were to come.
		w.Late = now.After(w.NextCheck.Add(every))
	} else if !next.After(now) {
		w.AtNextRound = true
	}
	return w
}
