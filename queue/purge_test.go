package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/reconciled/reconciled/internal/testutil"
)

// fastPurge keeps the tests' waits for a purge short.
const fastPurge = 10 * time.Millisecond

// WithPurgeSequence(n) removes every message below n and keeps n: the
// intake purges with floor+1 so that the floor itself, acknowledged by
// everyone, goes and nothing above it does.
func TestPurgeSequenceKeepsItsSequence(t *testing.T) {
	_, c := setup(t)
	for i := range 5 {
		publishIntent(t, c, fmt.Sprintf("seq-%d", i+1), nil)
	}
	ctx := testCtx(t)
	st, err := c.JetStream().Stream(ctx, IntentsStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(3)); err != nil {
		t.Fatal(err)
	}
	if s := streamInfo(t, c, IntentsStream).State; s.FirstSeq != 3 || s.LastSeq != 5 || s.Msgs != 3 {
		t.Fatalf("after purge below 3: seqs %d..%d, %d messages", s.FirstSeq, s.LastSeq, s.Msgs)
	}
}

// Acknowledged intents leave the stream; one still being handled, and
// every intent above it, stay until it is acknowledged too.
func TestIntakePurgesAcknowledgedIntents(t *testing.T) {
	_, c := setup(t)
	held, release := make(chan struct{}), make(chan struct{})
	acked := make(chan string, 8)
	consume(t, c, IntakeConfig{MaxInFlight: 2, PurgeEvery: fastPurge}, func(ctx context.Context, d *Delivery) {
		if d.IntentID() == "held" {
			close(held)
			<-release
		}
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack %s: %v", d.MsgID, err)
		}
		acked <- d.IntentID()
	})
	// Runs before the intake's own cleanup waits for the handler.
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	publishIntent(t, c, "a-1", nil) // seq 1
	recv(t, acked, "first ack")
	publishIntent(t, c, "held", nil) // seq 2
	recv(t, held, "held intent in its handler")
	publishIntent(t, c, "a-3", nil) // seq 3, acked while 2 is in flight
	if id := recv(t, acked, "ack above the held intent"); id != "a-3" {
		t.Fatalf("acked %s", id)
	}
	// The floor is 1 whatever is acked above it: the stream keeps 2 and 3,
	// and purging again changes nothing.
	intentSeqs(t, c, 2, 3)
	res, err := c.PurgeAcknowledgedIntents(testCtx(t), defaultDurable)
	if err != nil || res.Floor != 1 || res.Purged != 0 {
		t.Fatalf("purge with intent 2 in flight: %+v, %v", res, err)
	}
	if s := streamInfo(t, c, IntentsStream).State; s.FirstSeq != 2 || s.Msgs != 2 {
		t.Fatalf("with intent 2 in flight: seqs %d..%d, %d messages", s.FirstSeq, s.LastSeq, s.Msgs)
	}
	letGo()
	recv(t, acked, "held intent's ack")
	intentSeqs(t, c, 4, 3)
}

// Intents published while no instance consumes stay: an intent nobody has
// delivered yet is above every ack floor.
func TestPurgeKeepsUndeliveredIntents(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	if _, err := c.JetStream().CreateOrUpdateConsumer(ctx, IntentsStream, IntakeConfig{}.mustDefaults(t).consumerConfig()); err != nil {
		t.Fatal(err)
	}
	publishIntent(t, c, "waiting-1", nil)
	publishIntent(t, c, "waiting-2", nil)
	res, err := c.PurgeAcknowledgedIntents(ctx, defaultDurable)
	if err != nil || res.Floor != 0 || res.Purged != 0 {
		t.Fatalf("purge before any delivery: %+v, %v", res, err)
	}
	if m := streamInfo(t, c, IntentsStream).State.Msgs; m != 2 {
		t.Fatalf("stream holds %d, want 2", m)
	}
}

func (cfg IntakeConfig) mustDefaults(t *testing.T) IntakeConfig {
	t.Helper()
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// An operator's own consumer on the intent stream keeps what it has not
// acknowledged, however far the intake is ahead.
func TestSecondConsumerFloorHoldsPurge(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	audit, err := c.JetStream().CreateOrUpdateConsumer(ctx, IntentsStream, jetstream.ConsumerConfig{
		Durable: "audit", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		t.Fatalf("a second consumer on the intent stream: %v", err)
	}
	acked := make(chan string, 8)
	consume(t, c, IntakeConfig{PurgeEvery: fastPurge}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack %s: %v", d.MsgID, err)
		}
		acked <- d.IntentID()
	})
	for i := range 4 {
		publishIntent(t, c, fmt.Sprintf("audited-%d", i+1), nil)
	}
	for range 4 {
		recv(t, acked, "intake ack")
	}
	batch, err := audit.Fetch(2, jetstream.FetchMaxWait(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 || batch.Error() != nil {
		t.Fatalf("audit consumer read %d (%v)", n, batch.Error())
	}
	// The intake's floor is 4; the audit consumer's, 2.
	intentSeqs(t, c, 3, 4)
	res, err := c.PurgeAcknowledgedIntents(ctx, defaultDurable)
	if err != nil || res.Floor != 2 || res.HeldBy != "audit" || res.Kept != 2 {
		t.Fatalf("purge: %+v, %v", res, err)
	}
	if s := streamInfo(t, c, IntentsStream).State; s.FirstSeq != 3 || s.Msgs != 2 {
		t.Fatalf("audit floor 2: stream seqs %d..%d, %d messages", s.FirstSeq, s.LastSeq, s.Msgs)
	}
	// Once the audit consumer has read the rest, the next purge takes it.
	batch, err = audit.Fetch(2, jetstream.FetchMaxWait(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := c.PurgeAcknowledgedIntents(ctx, defaultDurable); err != nil || res.Floor != 4 || res.Purged != 2 {
		t.Fatalf("purge after the audit consumer caught up: %+v, %v", res, err)
	}
	intentSeqs(t, c, 5, 4)
}

// An intent terminated as bad input moves the ack floor past it: it does
// not hold the purge forever. One given back for a failure holds it, however
// often it comes back, until it is settled.
func TestFloorPassesTerminatedIntentsOnly(t *testing.T) {
	_, c := setup(t)
	terminated := advisories(t, c, "MSG_TERMINATED", defaultDurable)
	acked := make(chan string, 4)
	retried := make(chan uint64, 64)
	release := make(chan struct{})
	consume(t, c, IntakeConfig{PurgeEvery: fastPurge}, func(ctx context.Context, d *Delivery) {
		var err error
		switch d.IntentID() {
		case "failing":
			select {
			case <-release:
				err = d.Ack(ctx)
				acked <- d.IntentID()
			default:
				err = d.Nak(time.Millisecond)
				retried <- d.NumDelivered
			}
		case "bad":
			err = d.Term("bad input")
		default:
			err = d.Ack(ctx)
			acked <- d.IntentID()
		}
		if err != nil {
			t.Errorf("settle %s: %v", d.MsgID, err)
		}
	})
	publishIntent(t, c, "failing", nil) // seq 1
	publishIntent(t, c, "bad", nil)     // seq 2
	recv(t, terminated, "termination advisory")
	publishIntent(t, c, "good", nil) // seq 3
	recv(t, acked, "good intent's ack")
	for recv(t, retried, "a redelivery of the failing intent") < 12 {
	}
	if st := streamInfo(t, c, IntentsStream).State; st.FirstSeq != 1 {
		t.Fatalf("the failing intent was purged: stream holds %d..%d", st.FirstSeq, st.LastSeq)
	}
	close(release)
	if id := recv(t, acked, "the failing intent's ack"); id != "failing" {
		t.Fatalf("acked %q", id)
	}
	intentSeqs(t, c, 4, 3)
	if ci := consumerInfo(t, c, IntentsStream, defaultDurable); ci.AckFloor.Stream != 3 || ci.NumAckPending != 0 {
		t.Fatalf("intake consumer: ack floor %d, ack pending %d", ci.AckFloor.Stream, ci.NumAckPending)
	}
}

// A stream created before limits retention keeps its work-queue retention
// (the server refuses to change it), every instance still starts, two at
// once included, and intents still go through it.
func TestEnsureStreamsKeepsExistingWorkQueue(t *testing.T) {
	e := startWithWorkQueue(t)
	ctx := testCtx(t)
	core, logs := observer.New(zap.WarnLevel)
	a := connect(t, e, func(cfg *ConnConfig) { cfg.Logger = zap.New(core) })
	b := connect(t, e, func(cfg *ConnConfig) { cfg.Streams.IntentDuplicates = 3 * time.Minute })
	var wg sync.WaitGroup
	for _, c := range []*Conn{a, b} {
		wg.Go(func() {
			if err := c.EnsureStreams(ctx); err != nil {
				t.Errorf("ensure streams on a work-queue stream: %v", err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if err := a.EnsureStreams(ctx); err != nil {
		t.Fatalf("ensure streams again: %v", err)
	}
	cfg := streamInfo(t, a, IntentsStream).Config
	if cfg.Retention != jetstream.WorkQueuePolicy || cfg.Subjects[0] != "reconcile.intents.>" || cfg.Storage != jetstream.FileStorage {
		t.Fatalf("intent stream after ensure: %+v", cfg)
	}
	if warned := logs.FilterMessageSnippet("work-queue retention").Len(); warned != 2 {
		t.Errorf("%d work-queue warnings for two starts, want one each", warned)
	}

	acked := make(chan string, 4)
	consume(t, a, IntakeConfig{PurgeEvery: fastPurge}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
		acked <- d.IntentID()
	})
	publishIntent(t, b, "wq-1", nil)
	publishIntent(t, b, "wq-2", nil)
	recv(t, acked, "first intent")
	recv(t, acked, "second intent")
	// The work queue removes each on ack; the purge leaves it alone.
	intentSeqs(t, a, 3, 2)
	if res, err := a.PurgeAcknowledgedIntents(ctx, defaultDurable); err != nil || res != (PurgeResult{}) {
		t.Fatalf("purge of a work queue: %+v, %v", res, err)
	}
	if logs.FilterMessageSnippet("purge").Len() != 0 {
		t.Errorf("purge failures logged: %v", logs.FilterMessageSnippet("purge").All())
	}
}

// What was acknowledged since the last purge is purged when the intake
// stops, however long the purge interval.
func TestIntakeStopPurges(t *testing.T) {
	_, c := setup(t)
	acked := make(chan string, 4)
	in, err := c.ConsumeIntents(context.Background(), IntakeConfig{PullWait: 100 * time.Millisecond, PurgeEvery: time.Hour},
		func(ctx context.Context, d *Delivery) {
			if err := d.Ack(ctx); err != nil {
				t.Errorf("ack: %v", err)
			}
			acked <- d.IntentID()
		})
	if err != nil {
		t.Fatal(err)
	}
	publishIntent(t, c, "before-1", nil)
	recv(t, acked, "first ack")
	intentSeqs(t, c, 2, 1) // the first purge; the next is an hour away
	publishIntent(t, c, "before-2", nil)
	recv(t, acked, "second ack")
	in.Stop()
	if err := in.Wait(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s := streamInfo(t, c, IntentsStream).State; s.Msgs != 0 || s.FirstSeq != 3 {
		t.Fatalf("after stop: seqs %d..%d, %d messages", s.FirstSeq, s.LastSeq, s.Msgs)
	}
}

// An intake purges at its start what was acknowledged before it, e.g. by
// an instance killed right after its last ack.
func TestIntakeStartPurges(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	cons, err := c.JetStream().CreateOrUpdateConsumer(ctx, IntentsStream, IntakeConfig{}.mustDefaults(t).consumerConfig())
	if err != nil {
		t.Fatal(err)
	}
	publishIntent(t, c, "earlier-1", nil)
	publishIntent(t, c, "earlier-2", nil)
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if m := streamInfo(t, c, IntentsStream).State.Msgs; m != 2 {
		t.Fatalf("stream holds %d before the intake starts, want 2", m)
	}
	consume(t, c, IntakeConfig{PurgeEvery: time.Hour}, func(ctx context.Context, d *Delivery) {
		t.Errorf("acknowledged intent %s delivered again", d.MsgID)
	})
	if s := streamInfo(t, c, IntentsStream).State; s.Msgs != 0 || s.FirstSeq != 3 {
		t.Fatalf("after the intake's start: seqs %d..%d, %d messages", s.FirstSeq, s.LastSeq, s.Msgs)
	}
}

// The intake's own consumer is briefly absent (deleted by an operator, its
// state lost, about to be recreated by the intake) while another consumer
// (an audit one) has read further. A purge in that window must not remove
// the intents the intake never settled.
func TestPurgeWaitsForTheIntakeConsumer(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	cfg := IntakeConfig{}.mustDefaults(t)
	intake, err := c.JetStream().CreateOrUpdateConsumer(ctx, IntentsStream, cfg.consumerConfig())
	if err != nil {
		t.Fatal(err)
	}
	audit, err := c.JetStream().CreateOrUpdateConsumer(ctx, IntentsStream, jetstream.ConsumerConfig{
		Durable: "audit", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		publishIntent(t, c, fmt.Sprintf("i-%d", i+1), nil)
	}
	ackN := func(cons jetstream.Consumer, n int) {
		b, err := cons.Fetch(n, jetstream.FetchMaxWait(testTimeout))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	ackN(intake, 1) // the intake settled intent 1 only
	ackN(audit, 3)  // the audit consumer read all three
	if err := c.JetStream().DeleteConsumer(ctx, IntentsStream, cfg.Durable); err != nil {
		t.Fatal(err)
	}
	res, err := c.PurgeAcknowledgedIntents(ctx, defaultDurable)
	t.Logf("purge while the intake consumer is absent: %+v %v", res, err)
	// The intake recreates its consumer (Intake.recreate does exactly this).
	again, err := c.JetStream().CreateOrUpdateConsumer(ctx, IntentsStream, cfg.consumerConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, err := again.Fetch(3, jetstream.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for m := range b.Messages() {
		md, _ := m.Metadata()
		got = append(got, md.Sequence.Stream)
	}
	if len(got) < 2 {
		t.Fatalf("intents 2 and 3 were never settled by the intake, yet the recreated intake consumer gets %v: lost", got)
	}
}

// A consumer that stopped reading, holding many intents in the stream, is
// named in a warning, once per holdWarnEvery; the intake's own floor holds
// the purge without one.
func TestIntakeWarnsOfAConsumerHoldingThePurge(t *testing.T) {
	e, _ := setup(t)
	core, logs := observer.New(zap.WarnLevel)
	c := connect(t, e, func(cfg *ConnConfig) { cfg.Logger = zap.New(core) })
	ctx := testCtx(t)
	at, every := holdWarnAt, holdWarnEvery
	holdWarnAt, holdWarnEvery = 3, time.Hour
	t.Cleanup(func() { holdWarnAt, holdWarnEvery = at, every })
	if _, err := c.JetStream().CreateOrUpdateConsumer(ctx, IntentsStream, jetstream.ConsumerConfig{
		Durable: "idle-audit", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	acked := make(chan string, 8)
	consume(t, c, IntakeConfig{PurgeEvery: fastPurge}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
		acked <- d.IntentID()
	})
	for i := range 5 {
		publishIntent(t, c, fmt.Sprintf("held-%d", i+1), nil)
		recv(t, acked, "intent acked")
	}
	testutil.Eventually(t, testTimeout, "a warning of the idle consumer", func() (bool, string) {
		return logs.FilterMessageSnippet("holds the purge").Len() > 0, fmt.Sprint(logs.All())
	})
	for i := range 3 {
		publishIntent(t, c, fmt.Sprintf("more-%d", i+1), nil)
		recv(t, acked, "intent acked")
	}
	w := logs.FilterMessageSnippet("holds the purge").All()
	if len(w) != 1 || w[0].ContextMap()["consumer"] != "idle-audit" {
		t.Fatalf("warnings: %+v", w)
	}
	intentSeqs(t, c, 1, 8)
}
