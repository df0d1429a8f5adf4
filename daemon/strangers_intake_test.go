package daemon_test

import (
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/reconcile"
)

// An intent published on one ledger's subject whose body names another
// ledger is a final invalid, and neither ledger is read for it.
func TestIntakeSubjectMismatchIsFinalInvalid(t *testing.T) {
	r := daemontest.New(t, daemontest.Options{Seed: 43})
	l, err := r.Replica.NewLedger(ledgertest.LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	other := r.Replica.NewCanisterID()
	r.Publish(other.Encode(), "mm-1", transferBody("mm-1", l.ID().Encode(), 1))
	v := r.Wait("mm-1", func(reconciled.Verdict) bool { return true })
	if v.Status != reconciled.StatusInvalid || !v.Final || v.Reason == nil || v.Reason.Code != "E_SUBJECT_MISMATCH" {
		t.Fatalf("verdict %s final=%t reason %+v; want a final invalid E_SUBJECT_MISMATCH", v.Status, v.Final, v.Reason)
	}
	st := r.Replica.Stats()
	if n := st.ReadStates(l.ID()) + st.ReadStates(other); n != 0 {
		t.Fatalf("%d read_state requests for a refused intent", n)
	}
}

// Under strict ledgers an intent for an unconfigured canister is a final
// invalid E_UNKNOWN_LEDGER decided at intake: no IC request, no client, no
// watch entry, no lease.
func TestIntakeStrictLedgersRefuseUnconfiguredFinal(t *testing.T) {
	r := daemontest.New(t, daemontest.Options{Seed: 44, NoDaemon: true})
	known, err := r.Replica.NewLedger(ledgertest.LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := r.Replica.NewLedger(ledgertest.LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	d := r.Start(daemontest.Options{Tune: func(c *daemon.Config, _ *daemon.Options) {
		c.StrictLedgers = true
		c.Ledgers[known.ID().Encode()] = reconcile.LedgerConfig{ID: known.ID()}
	}})
	r.Publish(stranger.ID().Encode(), "st-1", transferBody("st-1", stranger.ID().Encode(), 1))
	v := r.Wait("st-1", func(reconciled.Verdict) bool { return true })
	if v.Status != reconciled.StatusInvalid || !v.Final || v.Reason == nil || v.Reason.Code != "E_UNKNOWN_LEDGER" {
		t.Fatalf("verdict %s final=%t reason %+v; want a final invalid E_UNKNOWN_LEDGER", v.Status, v.Final, v.Reason)
	}
	d.FollowUpNow()
	if ws, err := d.Store().WatchedLedgers(r.Ctx); err != nil || len(ws) != 0 {
		t.Fatalf("watch list %v %v", ws, err)
	}
	if c := d.Client(stranger.ID().Encode()); c != nil {
		t.Fatal("a client was made for an unconfigured canister")
	}
	st := r.Replica.Stats()
	if n := st.ReadStates(stranger.ID()) + st.Queries(stranger.ID(), ""); n != 0 {
		t.Fatalf("%d IC requests for an unconfigured canister", n)
	}
	testutil.Eventually(t, 5*time.Second, "no lease", func() (bool, string) {
		return len(d.Leases().Held()) == 0, "leases held"
	})
}
