package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/store"
)

// instance starts a daemon named name on the rig's replica and NATS
// server, on dir (reused across a restart), with the follow-up period poll
// (long: tests trigger rounds themselves) and 32 intake handlers; cc, when
// set, adjusts every ledger client's config. Unlike newRig's own daemon it
// keeps serve's backoff and has no gauges: it is an instance as deployed,
// one of a fleet sharing the intake consumer and the verdict stream.
func (r *rig) instance(name, dir string, poll time.Duration, cc func(*icrc3history.ClientConfig)) *daemon.Daemon {
	r.t.Helper()
	return r.Start(daemontest.Options{Instance: name, DataDir: dir, Poll: poll, MaxInflight: 32,
		Tune: func(_ *daemon.Config, o *daemon.Options) { o.ClientConfig = cc }})
}

// ledger makes a ledger on the rig's replica.
func (r *rig) ledger(cfg ledgertest.LedgerConfig) *ledgertest.Ledger {
	r.t.Helper()
	l, err := r.srv.NewLedger(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return l
}

// payerFunds is the initial balance of a ledger payer pays from.
func payerFunds() []ledgertest.Balance {
	return []ledgertest.Balance{{Account: icrc3.Account{Owner: payer}, Amount: icrc3.NatFromUint64(1_000_000_000_000)}}
}

// transferIntent is the tool layer's intent of p on ledger l, as payer's
// icrc1_transfer call sent it.
func transferIntent(id string, l *ledgertest.Ledger, p payment) toollayer.Intent {
	return toollayer.Transfer(id, l.ID(), payer, p.arg())
}

// ask publishes doc and waits for its first verdict satisfying until.
func (r *rig) ask(doc toollayer.Intent, until func(reconciled.Verdict) bool) reconciled.Verdict {
	r.t.Helper()
	v, err := toollayer.PublishAndWait(r.ctx, r.tool, doc.Canister, doc.ID, doc.JSON(), until)
	if err != nil {
		r.t.Fatal(err)
	}
	return v
}

// storedHistory returns an intent's verdicts in a running daemon's store
// and checks their seqs run 1..n without gaps.
func storedHistory(t *testing.T, st *store.Store, id string) []reconciled.Verdict {
	t.Helper()
	vs, err := st.Verdicts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if v.Seq != uint64(i+1) {
			t.Fatalf("%s: verdict #%d has seq %d: %s", id, i+1, v.Seq, describe(vs))
		}
	}
	return vs
}

// streamCount counts the messages the verdict stream holds for an intent.
func (r *rig) streamCount(id string) uint64 {
	r.t.Helper()
	st, err := r.tool.JetStream().Stream(r.ctx, queue.VerdictsStream)
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := st.Info(r.ctx, jetstream.WithSubjectFilter("reconcile.verdicts."+id))
	if err != nil {
		r.t.Fatal(err)
	}
	return info.State.Subjects["reconcile.verdicts."+id]
}
