package reconcile_test

import (
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
)

// An ingress_expiry before S − D (a wrong value: no envelope with these
// bytes could have executed under it) must not close the window: the call
// can still execute afterwards, so a final absent would make someone pay
// twice. It is an invalid intent.
func TestExpiryInvalidNeverDecidedAbsent(t *testing.T) {
	e := newEnv(t, envOpt{})
	alice, bob := principalN(1), principalN(2)
	e.fund(acct(alice, nil), 1_000_000)
	stamp := e.srv.Now()
	exp := stamp - uint64(3*time.Minute)
	ti := transferIntent{id: "early-exp", caller: alice, to: acct(bob, nil), amount: 5, stamp: stamp, ingressEx: &exp}
	in := e.intent(ti.json(e.ledger.ID()))
	v := e.decide(in)
	if v.Status != reconciled.StatusInvalid || !v.Final || v.Reason == nil || v.Reason.Code != matcher.CodeBadExpiry ||
		v.Reason.Field != "ingress_expiry" {
		t.Fatalf("expiry before S−D decided %s final=%t reason %+v, want invalid %s", v.Status, v.Final, v.Reason, matcher.CodeBadExpiry)
	}
	if v.IntentHash != in.HashHex() || v.Window == nil || v.Window.NarrowedBy != "" {
		t.Fatalf("invalid verdict %+v: want its intent_hash and the unnarrowed window", v)
	}
	// The call the intent describes can indeed still execute.
	if _, err := e.ledger.Transfer(alice, ti.arg()); err != nil {
		t.Fatalf("the original executes after the verdict: %v", err)
	}
}

// A narrower window than the ledger family's could close before the
// original executed: the engine decides nothing with it unless the
// configuration says the ledger's own window is that narrow.
func TestLedgerConfigNarrowWindowUnreadable(t *testing.T) {
	for _, c := range []struct {
		cfg  reconcile.LedgerConfig
		want reconciled.Status
	}{
		{reconcile.LedgerConfig{TW: time.Hour}, reconciled.StatusUnreadable},
		{reconcile.LedgerConfig{Drift: 10 * time.Second}, reconciled.StatusUnreadable},
		{reconcile.LedgerConfig{TW: time.Hour, AllowNarrowWindow: true}, reconciled.StatusNotYet},
		{reconcile.LedgerConfig{TW: matcher.FamilyTW, Drift: matcher.FamilyDrift}, reconciled.StatusNotYet},
	} {
		e := newEnv(t, envOpt{cfg: c.cfg})
		alice := principalN(1)
		e.fund(acct(alice, nil), 1_000)
		in := e.intent(transferIntent{id: "cfg", caller: alice, to: acct(principalN(2), nil), amount: 5, stamp: e.srv.Now()}.json(e.ledger.ID()))
		v := e.decide(in)
		if v.Status != c.want || (c.want == reconciled.StatusUnreadable && v.Reason.Code != "E_LEDGER_CONFIG") {
			t.Errorf("%+v: %s %+v, want %s", c.cfg, v.Status, v.Reason, c.want)
		}
	}
}
