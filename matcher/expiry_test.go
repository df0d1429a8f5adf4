package matcher

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// ingress_expiry "0" is what an unset field serialised as zero looks like:
// taken as an expiry it would close the window at once.
func TestExpiryInvalidZero(t *testing.T) {
	_, err := ParseIntent(transferBody().with("ingress_expiry", "0").json(t))
	var me *Error
	if !errors.As(err, &me) || me.Code != CodeBadExpiry || me.Field != "ingress_expiry" {
		t.Fatalf("ingress_expiry 0: %v, want %s at ingress_expiry", err, CodeBadExpiry)
	}
}

// An expiry before S − D is refused for the ledger's rules: no call with
// these bytes could have executed under it, so it can only be a wrong
// value, and as the window's end it would make a final absent at once.
func TestExpiryInvalidBeforeWindowStart(t *testing.T) {
	for _, r := range []LedgerRules{{}, {Drift: time.Minute}, {TW: 48 * time.Hour, Drift: 10 * time.Minute}} {
		start := stamp - r.drift()
		for _, c := range []struct {
			exp uint64
			ok  bool
		}{{start - 1, false}, {1, false}, {start, true}, {stamp, true}, {stamp + uint64(5*time.Minute), true}} {
			in := mustParse(t, transferBody().with("ingress_expiry", fmt.Sprint(c.exp)))
			err := in.CheckRules(r)
			if c.ok != (err == nil) {
				t.Errorf("drift %s, expiry S%+d: CheckRules = %v, want ok=%t", time.Duration(r.drift()), int64(c.exp)-int64(stamp), err, c.ok)
			}
			if err != nil && (err.Code != CodeBadExpiry || err.Field != "ingress_expiry") {
				t.Errorf("refusal %+v, want %s at ingress_expiry", err, CodeBadExpiry)
			}
		}
	}
	if err := mustParse(t, transferBody()).CheckRules(LedgerRules{}); err != nil {
		t.Errorf("no expiry: %v", err)
	}
}

// Whatever the expiry, the window is never empty: an unchecked expiry can
// cost blocks read, never a window closed before it opened.
func TestExpiryInvalidNeverEmptiesWindow(t *testing.T) {
	for _, exp := range []uint64{1, stamp - uint64(3*time.Minute), stamp - uint64(2*time.Minute) - 1} {
		in := mustParse(t, transferBody())
		in.IngressExpiry = &exp
		w := in.Window(LedgerRules{})
		if w.From > w.To || w.To != stamp+uint64(24*time.Hour+2*time.Minute) || w.NarrowedBy != "" {
			t.Errorf("expiry S%+d: window %+v, want the full window", int64(exp)-int64(stamp), w)
		}
	}
}
