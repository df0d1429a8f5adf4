package reconcile_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// An intent published on another canister's subject is refused as
// invalid: the subject is what per-ledger publish permissions limit, so a
// publisher allowed only on one ledger's subject must not have another
// ledger read through it.
func TestServiceSubjectMismatchIsInvalid(t *testing.T) {
	e := newSvcEnv(t)
	e.dec.set("sm-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	o := e.svc.HandleIntentOn(context.Background(), liveLedger, intentOn("sm-1", hungLedger))
	if o.Kind != reconciled.Ack {
		t.Fatalf("outcome %+v, want ack", o)
	}
	vs, err := e.st.Verdicts(context.Background(), "sm-1")
	if err != nil || len(vs) != 1 {
		t.Fatalf("verdicts %+v %v", vs, err)
	}
	if v := vs[0]; v.Status != reconciled.StatusInvalid || !v.Final || v.Reason == nil || v.Reason.Code != reconcile.CodeSubjectMismatch {
		t.Fatalf("verdict %+v reason %+v, want a final invalid %s", v, v.Reason, reconcile.CodeSubjectMismatch)
	}
	if n := e.dec.calls["sm-1"]; n != 0 {
		t.Fatalf("decided %d times: a refused intent must not reach the ledger", n)
	}
	// The subject naming the body's canister is decided as before.
	e.dec.set("sm-2", reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := e.svc.HandleIntentOn(context.Background(), hungLedger, intentOn("sm-2", hungLedger)); o.Kind != reconciled.Ack {
		t.Fatalf("matching subject: %+v", o)
	}
	if vs, _ := e.st.Verdicts(context.Background(), "sm-2"); len(vs) != 1 || vs[0].Status != reconciled.StatusNotYet {
		t.Fatalf("matching subject: %+v", vs)
	}
}

// With Serves set (strict ledgers), an intent for a ledger the
// configuration does not name is a final invalid at intake: no decision,
// no watch entry.
func TestServiceUnservedLedgerIsFinalAtIntake(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dec := &scriptDecider{script: map[string]func() reconciled.Verdict{}, calls: map[string]int{}}
	dec.set("u-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: dec, Store: st, Sink: newFakeSink(),
		Serves: func(l string) bool { return l == liveLedger }, Now: func() time.Time { return time.Unix(1_800_000_000, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	if o := svc.HandleIntentOn(context.Background(), hungLedger, intentOn("u-1", hungLedger)); o.Kind != reconciled.Ack {
		t.Fatalf("outcome %+v", o)
	}
	vs, err := st.Verdicts(context.Background(), "u-1")
	if err != nil || len(vs) != 1 {
		t.Fatalf("verdicts %+v %v", vs, err)
	}
	if v := vs[0]; v.Status != reconciled.StatusInvalid || !v.Final || v.Reason == nil || v.Reason.Code != reconcile.CodeUnknownLedger {
		t.Fatalf("verdict %+v reason %+v, want a final invalid %s", v, v.Reason, reconcile.CodeUnknownLedger)
	}
	if dec.calls["u-1"] != 0 {
		t.Fatal("an unserved ledger's intent was decided")
	}
	if ls, err := st.WatchedLedgers(context.Background()); err != nil || len(ls) != 0 {
		t.Fatalf("watched ledgers %v %v: an unserved ledger must cost no lease", ls, err)
	}
}
