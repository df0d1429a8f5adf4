package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// Re-publishing an intent (same id and body, even re-encoded) gives one
// verdict history and scans nothing; a different body under the same id is
// refused on the rejects subject and changes nothing stored.
func TestIntakeDuplicateAndConflictingIntents(t *testing.T) {
	r := newRig(t, rigOpts{NoDaemon: true})
	l := r.ledger(ledgertest.LedgerConfig{InitialBalances: payerFunds()})
	d := r.instance("solo", t.TempDir(), time.Hour, nil)
	defer daemontest.Stop(d, time.Second)

	pay := payment{stamp: r.srv.Now(), amount: 1234, memo: "dup"}
	if _, err := l.Transfer(payer, pay.arg()); err != nil {
		t.Fatal(err)
	}
	doc := transferIntent("dup-1", l, pay)
	first := r.ask(doc, toollayer.FinalVerdict)
	if first.Status != reconciled.StatusFound || first.Seq != 1 {
		t.Fatalf("first verdict %+v", first)
	}
	served := l.Counters().BlocksServed

	// Past the stream's dedup window a publisher would send it again: a
	// different message id gets it past JetStream's deduplication, and the
	// body is re-encoded (other key order, "after" changed).
	var m map[string]any
	_ = json.Unmarshal(doc.JSON(), &m)
	m["after"] = "unknown"
	again, _ := json.Marshal(m)
	republish := func(body []byte, msgID string) {
		t.Helper()
		r.Publish(doc.Canister, msgID, body)
	}
	republish(again, "dup-1-again")

	// A conflicting body: another amount under the same id.
	rejects := make(chan queue.Reject, 1)
	if err := r.tool.SubscribeRejects(r.ctx, "dup-1", func(rj queue.Reject) { rejects <- rj }); err != nil {
		t.Fatal(err)
	}
	other := doc
	other.Args = map[string]any{}
	for k, v := range doc.Args {
		other.Args[k] = v
	}
	other.Args["amount"] = "4321"
	republish(other.JSON(), "dup-1-conflict")
	select {
	case rj := <-rejects:
		if rj.Code != "E_INTENT_CONFLICT" {
			t.Fatalf("reject %+v", rj)
		}
	case <-r.ctx.Done():
		t.Fatal("no reject for the conflicting body")
	}
	// The re-publication was handled before the conflict (one stream, in
	// order, and the reject proves the conflict was handled).
	testutil.Eventually(t, 30*time.Second, "both re-publications settled", func() (bool, string) {
		n := d.Metrics().Get(reconcile.MetricIntentOutcomes, "ack")
		return n >= 3, fmt.Sprint(n, " acks")
	})
	if vs := storedHistory(t, d.Store(), "dup-1"); len(vs) != 1 || vs[0].Status != reconciled.StatusFound {
		t.Fatalf("history after duplicates: %s", describe(vs))
	}
	if n := r.streamCount("dup-1"); n != 1 {
		t.Fatalf("verdict stream holds %d verdicts of dup-1, want 1", n)
	}
	if got := l.Counters().BlocksServed; got != served {
		t.Fatalf("a known intent was scanned again: %d blocks served, was %d", got, served)
	}
	rec, err := d.Store().Intent(r.ctx, "dup-1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rec.Body), "4321") || !strings.Contains(string(rec.Body), "1234") {
		t.Fatalf("stored body changed: %s", rec.Body)
	}
}

// not_yet intents settle by themselves through the follow-up: one is found
// when a retry executes inside its window, another is absent once the
// ledger's certified time passes its window.
func TestFollowUpSettlesNotYet(t *testing.T) {
	r := newRig(t, rigOpts{NoDaemon: true})
	l := r.ledger(ledgertest.LedgerConfig{InitialBalances: payerFunds()})
	d := r.instance("follow", t.TempDir(), 50*time.Millisecond, nil)
	defer daemontest.Stop(d, time.Second)

	retryPay := payment{stamp: r.srv.Now(), amount: 500, memo: "retry-later"}
	neverPay := payment{stamp: r.srv.Now(), amount: 600, memo: "never"}
	retried := transferIntent("will-retry", l, retryPay)
	never := transferIntent("never-sent", l, neverPay)
	for _, doc := range []toollayer.Intent{retried, never} {
		if v := r.ask(doc, toollayer.AnyVerdict); v.Status != reconciled.StatusNotYet || v.Seq != 1 {
			t.Fatalf("%s: first verdict %+v, want not_yet", doc.ID, v)
		}
	}
	// The tool layer's retry (same bytes) executes inside the window.
	idx, err := l.Transfer(payer, retryPay.arg())
	if err != nil {
		t.Fatal(err)
	}
	v := r.wait(retried.ID, toollayer.FinalVerdict)
	if v.Status != reconciled.StatusFound || v.Block == nil || uint64(v.Block.Index) != idx || v.Seq != 2 {
		t.Fatalf("retried: %+v, want found at %d with seq 2", v, idx)
	}
	r.srv.Advance(24*time.Hour + 3*time.Minute)
	v = r.wait(never.ID, toollayer.FinalVerdict)
	if v.Status != reconciled.StatusAbsent || v.Seq != 2 {
		t.Fatalf("never sent: %+v, want absent with seq 2", v)
	}
	for _, id := range []string{retried.ID, never.ID} {
		if vs := storedHistory(t, d.Store(), id); len(vs) != 2 {
			t.Fatalf("%s: %s", id, describe(vs))
		}
	}
	ws, err := d.Store().Watches(r.ctx)
	if err != nil || len(ws) != 0 {
		t.Fatalf("watch list after final verdicts: %v %v", ws, err)
	}
}

// Many intents of one ledger with overlapping windows share one verified
// chain: they fetch about the blocks of one scan.
func TestManyIntentsShareOneScan(t *testing.T) {
	const intents = 1000
	r := newRig(t, rigOpts{NoDaemon: true})
	one, many := r.ledger(ledgertest.LedgerConfig{}), r.ledger(ledgertest.LedgerConfig{})
	for _, l := range []*ledgertest.Ledger{one, many} {
		if err := l.GenerateHistory(4000, 5, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	d := r.instance("many", t.TempDir(), time.Hour, nil)
	defer daemontest.Stop(d, time.Second)

	now := r.srv.Now()
	stamp := func(i int) uint64 { return now - uint64(time.Hour) + uint64(i)*uint64(time.Hour)/intents }
	// One scan: the intent with the earliest window, alone.
	r.ask(transferIntent("single", one, payment{stamp: stamp(0), amount: 1, memo: "x"}), toollayer.AnyVerdict)
	single := one.Counters().BlocksServed

	start := time.Now()
	// Published asynchronously, as a busy tool layer would: each publish
	// waits for the server's fsync otherwise.
	js := r.tool.JetStream()
	for i := range intents {
		doc := transferIntent(fmt.Sprint("many-", i), many, payment{stamp: stamp(i), amount: uint64(i + 1), memo: "x"})
		if _, err := js.PublishAsync("reconcile.intents."+doc.Canister, doc.JSON(), jetstream.WithMsgID(queue.IntentMsgID(doc.ID, matcher.IntentHash(doc.JSON())))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-r.ctx.Done():
		t.Fatal("intents not acknowledged by the stream")
	}
	t.Logf("published %d intents in %s", intents, time.Since(start).Round(time.Millisecond))
	// One consumer over every verdict subject: 1000 watchers would exceed
	// the server's consumer limit.
	cons, err := js.OrderedConsumer(r.ctx, queue.VerdictsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"reconcile.verdicts.>"}})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	seen := map[string]bool{}
	for len(seen) < intents {
		msg, err := it.Next(jetstream.NextContext(r.ctx))
		if err != nil {
			t.Fatalf("after %d verdicts: %v", len(seen), err)
		}
		if id := strings.TrimPrefix(msg.Subject(), "reconcile.verdicts."); strings.HasPrefix(id, "many-") {
			seen[id] = true
		}
	}
	served := many.Counters().BlocksServed
	t.Logf("%d intents: %d blocks served (one scan: %d, ratio %.3f) in %s", intents, served, single,
		float64(served)/float64(single), time.Since(start).Round(time.Millisecond))
	if float64(served) > 1.2*float64(single) {
		t.Fatalf("%d intents fetched %d blocks, more than 1.2 × one scan (%d)", intents, served, single)
	}
}
