package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// After a NATS server crash a consumer's ack state may be older than its
// acks, so an intent already acknowledged comes again, the very same
// stream message. The daemon answers it from its store: the same verdict,
// no second decision, no new verdict in the stream. The lost ack state is
// made here by deleting the intake consumer while the daemon is stopped;
// an operator's consumer that has read nothing keeps the intent from the
// purge.
func TestAcknowledgedIntentDeliveredAgainKeepsItsVerdict(t *testing.T) {
	w := newWorld(t)
	alice, bob := w.user(1), w.user(2)
	l := w.ledger(ledgertest.LedgerConfig{InitialBalances: funded(alice.Principal())})
	js := w.tool.JetStream()
	if _, err := js.CreateOrUpdateConsumer(w.ctx, queue.IntentsStream, jetstream.ConsumerConfig{
		Durable: "audit", AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	arg := transferArg(bob.Principal(), 77, u64(w.srv.Now()), "again")
	if _, err := l.Transfer(alice.Principal(), arg); err != nil {
		t.Fatal(err)
	}
	doc := toollayer.Transfer("again-1", l.ID(), alice.Principal(), arg)
	dir := t.TempDir()
	d1 := w.daemon("again", dir, time.Hour)
	first := w.ask(doc, toollayer.FinalVerdict)
	if first.Status != reconciled.StatusFound || first.Seq != 1 {
		t.Fatalf("first verdict %+v", first)
	}
	testutil.Eventually(t, 30*time.Second, "the intent acknowledged", func() (bool, string) {
		n := d1.Metrics().Get(reconcile.MetricIntentOutcomes, "ack")
		return n >= 1, fmt.Sprint(n, " acks")
	})
	stop(d1, time.Second)
	served := l.Counters().BlocksServed
	if err := js.DeleteConsumer(w.ctx, queue.IntentsStream, "reconciled"); err != nil {
		t.Fatal(err)
	}

	d2 := w.daemon("again", dir, time.Hour)
	defer stop(d2, time.Second)
	testutil.Eventually(t, 30*time.Second, "the intent delivered again and acknowledged", func() (bool, string) {
		n := d2.Metrics().Get(reconcile.MetricIntentOutcomes, "ack")
		return n >= 1, fmt.Sprint(n, " acks")
	})
	if vs := history(t, d2.Store(), doc.ID); len(vs) != 1 || vs[0].Status != reconciled.StatusFound || vs[0].Block == nil || first.Block == nil || vs[0].Block.Index != first.Block.Index {
		t.Fatalf("history after the second delivery: %s", describe(vs))
	}
	if n := w.streamCount(doc.ID); n != 1 {
		t.Fatalf("verdict stream holds %d verdicts of %s, want 1", n, doc.ID)
	}
	if got := l.Counters().BlocksServed; got != served {
		t.Fatalf("the acknowledged intent was decided again: %d blocks served, was %d", got, served)
	}
	ci, err := js.Consumer(w.ctx, queue.IntentsStream, "reconciled")
	if err != nil {
		t.Fatal(err)
	}
	if info := ci.CachedInfo(); info.Delivered.Stream != 1 || info.AckFloor.Stream != 1 {
		t.Fatalf("recreated intake consumer: delivered %d, ack floor %d", info.Delivered.Stream, info.AckFloor.Stream)
	}
}
