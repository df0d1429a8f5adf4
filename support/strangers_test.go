package support

import (
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/reconcile"
)

// An intent refused for its canister is final: its advice must say what
// is true of the payment, not "do not pay again" until an answer that will
// never come.
func TestAdviceForRefusedCanisters(t *testing.T) {
	for _, tc := range []struct {
		code       string
		advice     string // in Advice
		tell       string // in what is read out
		notForEver bool
	}{
		{reconcile.CodeNoSuchCanister, "does not exist on the Internet Computer", "does not exist", true},
		{reconcile.CodeNotALedger, "no code installed", "does not exist", true},
		{reconcile.CodeUnknownLedger, "not one it is configured for", "We do not check payments on that ledger", true},
		{reconcile.CodeSubjectMismatch, "sent for one ledger but names another", "could not be checked", false},
	} {
		v := &reconciled.Verdict{IntentID: "x", Status: reconciled.StatusInvalid, Final: true,
			Reason: &reconciled.Reason{Code: tc.code}, DecidedAt: time.Unix(1_800_000_000, 0)}
		a, p := Advice(v), tell(v, adviceContext{})
		if !strings.Contains(a, tc.advice) {
			t.Errorf("%s: advice %q lacks %q", tc.code, a, tc.advice)
		}
		if !strings.Contains(p, tc.tell) {
			t.Errorf("%s: told %q lacks %q", tc.code, p, tc.tell)
		}
		if tc.notForEver && (strings.Contains(a, "do not pay again until") || strings.Contains(p, "do not pay again until")) {
			t.Errorf("%s: %q / %q waits for an answer that never comes", tc.code, a, p)
		}
	}
	w := &reconciled.Verdict{IntentID: "z", Status: reconciled.StatusUnreadable, Reason: &reconciled.Reason{Code: reconcile.CodeUnconfiguredWait},
		DecidedAt: time.Unix(1_800_000_000, 0)}
	if a := Advice(w); !strings.Contains(a, "not configured for") || !strings.Contains(a, "We keep trying") {
		t.Errorf("unreadable %s: %q", reconcile.CodeUnconfiguredWait, a)
	}
	u := &reconciled.Verdict{IntentID: "y", Status: reconciled.StatusUnreadable, Reason: &reconciled.Reason{Code: "E_UNKNOWN_CANISTER"},
		DecidedAt: time.Unix(1_800_000_000, 0)}
	if a := Advice(u); !strings.Contains(a, "check that the request names the ledger") || !strings.Contains(a, "We keep trying") {
		t.Errorf("unreadable E_UNKNOWN_CANISTER: %q", a)
	}
}
