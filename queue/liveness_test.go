package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
)

// An intent whose handling keeps failing (the verdict stream or the store
// down) is given back again and again, past any delivery count, and never
// purged while it is not settled; once the fault ends it is settled.
func TestTransientFailuresNeverEndAnIntent(t *testing.T) {
	_, c := setup(t)
	const failures = 14
	delivered := make(chan uint64, failures+1)
	acked := make(chan string, 4)
	consume(t, c, IntakeConfig{PurgeEvery: fastPurge}, func(ctx context.Context, d *Delivery) {
		if d.IntentID() != "stuck" || d.NumDelivered > failures {
			if err := d.Ack(ctx); err != nil {
				t.Errorf("ack %s: %v", d.MsgID, err)
			}
			acked <- d.IntentID()
			return
		}
		// What the service answers while the verdict stream is down.
		o := reconciled.Outcome{Kind: reconciled.Nak, Delay: 100 * time.Microsecond, Reason: "read the stream's verdict: nats: timeout"}
		if err := d.Settle(ctx, o); err != nil {
			t.Errorf("settle: %v", err)
		}
		delivered <- d.NumDelivered
	})
	publishIntent(t, c, "stuck", nil) // seq 1
	publishIntent(t, c, "other", nil) // seq 2: its ack lets the purge run
	recv(t, acked, "other intent's ack")
	for n := uint64(1); n <= failures; n++ {
		if got := recv(t, delivered, fmt.Sprintf("delivery %d of the failing intent", n)); got != n {
			t.Fatalf("delivery %d of the failing intent counted %d", n, got)
		}
	}
	if id := recv(t, acked, "the failing intent settled after the fault"); id != "stuck" {
		t.Fatalf("acked %q", id)
	}
	intentSeqs(t, c, 3, 2)
}

// A consumer left by a release that bounded deliveries is updated: the
// bound would end an intent whose handling keeps failing.
func TestExistingConsumerLosesItsDeliveryBound(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	if _, err := c.JetStream().CreateOrUpdateConsumer(ctx, IntentsStream, jetstream.ConsumerConfig{
		Durable: defaultDurable, DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: defaultAckWait, MaxDeliver: 10,
	}); err != nil {
		t.Fatalf("create a bounded consumer: %v", err)
	}
	consume(t, c, IntakeConfig{}, func(ctx context.Context, d *Delivery) { _ = d.Ack(ctx) })
	if got := consumerInfo(t, c, IntentsStream, defaultDurable).Config.MaxDeliver; got != -1 {
		t.Fatalf("intake consumer MaxDeliver %d after start, want -1 (unbounded)", got)
	}
}

// The intent stream refuses, at publish, a message larger than the fleet's
// limit allows, and takes one of the limit with the longest message id.
func TestIntentStreamRefusesOversizedIntent(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	subject, err := c.Subjects().Intent(canister)
	if err != nil {
		t.Fatal(err)
	}
	longID := strings.Repeat("i", maxTokenLen)
	if _, err := c.PublishIntent(ctx, canister, longID, bytes.Repeat([]byte("x"), MaxIntentBytes), matcher.IntentHash(bytes.Repeat([]byte("x"), MaxIntentBytes))); err != nil {
		t.Fatalf("publish an intent of exactly %d bytes: %v", MaxIntentBytes, err)
	}
	// Bypassing the client's own check, as an older or foreign client
	// would.
	max := int(streamInfo(t, c, IntentsStream).Config.MaxMsgSize)
	if max <= 0 {
		t.Fatalf("intent stream max_msg_size %d: the server takes any size", max)
	}
	msg := nats.NewMsg(subject)
	msg.Header.Set(jetstream.MsgIDHeader, "over:1")
	hdrLen := len("NATS/1.0\r\nNats-Msg-Id: over:1\r\n\r\n")
	msg.Data = bytes.Repeat([]byte("x"), max-hdrLen+1)
	if _, err := c.JetStream().PublishMsg(ctx, msg); err == nil {
		t.Fatalf("the stream took a message of %d bytes with headers, over its max_msg_size %d", len(msg.Data)+hdrLen, max)
	}
	msg.Data = msg.Data[:max-hdrLen]
	msg.Header.Set(jetstream.MsgIDHeader, "fits:1")
	if _, err := c.JetStream().PublishMsg(ctx, msg); err != nil {
		t.Fatalf("a message of exactly max_msg_size %d refused: %v", max, err)
	}
}

// An existing intent stream without a size limit gets one.
func TestEnsureStreamsLimitsExistingIntentStream(t *testing.T) {
	e := startServer(t, t.TempDir())
	c := connect(t, e)
	ctx := testCtx(t)
	old := c.intentsConfig(jetstream.LimitsPolicy)
	old.MaxMsgSize = 0
	if _, err := c.JetStream().CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	if got := streamInfo(t, c, IntentsStream).Config.MaxMsgSize; got <= int32(MaxIntentBytes) {
		t.Fatalf("intent stream max_msg_size %d after ensure, want a limit above the body limit %d", got, MaxIntentBytes)
	}
}

// An intent over the limit that reaches the intake (a stream without a
// size limit, a foreign client) is refused on its rejects subject, not
// only logged, and terminated.
func TestOversizedIntentRejected(t *testing.T) {
	e := startServer(t, t.TempDir())
	c := connect(t, e)
	ctx := testCtx(t)
	old := c.intentsConfig(jetstream.LimitsPolicy)
	old.MaxMsgSize = 0
	if _, err := c.JetStream().CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	// The stream as an older release left it.
	if _, err := c.JetStream().UpdateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	rejects := make(chan Reject, 1)
	if err := c.SubscribeRejects(ctx, "huge", func(r Reject) { rejects <- r }); err != nil {
		t.Fatal(err)
	}
	terminated := advisories(t, c, "MSG_TERMINATED", defaultDurable)
	var mu sync.Mutex
	var handled []string
	reg := prometheus.NewPedanticRegistry()
	consume(t, c, IntakeConfig{Metrics: reg}, func(ctx context.Context, d *Delivery) {
		mu.Lock()
		handled = append(handled, d.IntentID())
		mu.Unlock()
		_ = d.Ack(ctx)
	})
	subject, _ := c.Subjects().Intent(canister)
	body := bytes.Repeat([]byte("x"), MaxIntentBytes+1)
	if _, err := c.JetStream().Publish(ctx, subject, body, jetstream.WithMsgID(IntentMsgID("huge", matcher.IntentHash(body)))); err != nil {
		t.Fatal(err)
	}
	r := recv(t, rejects, "reject of the oversized intent")
	if RejectTooLarge != matcher.CodeTooLarge {
		t.Errorf("RejectTooLarge %q, the parser's code %q", RejectTooLarge, matcher.CodeTooLarge)
	}
	if r.IntentID != "huge" || r.Code != RejectTooLarge || !strings.Contains(r.Message, "limit of 32768 bytes") {
		t.Fatalf("reject %+v", r)
	}
	adv := recv(t, terminated, "termination advisory")
	var a struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(adv.Data, &a); err != nil || a.Reason == "" {
		t.Fatalf("advisory %s (%v)", adv.Data, err)
	}
	if n := metricValue(t, reg, MetricOversized); n != 1 {
		t.Fatalf("%s = %v, want 1", MetricOversized, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != 0 {
		t.Fatalf("handler saw oversized intents %v", handled)
	}
}

// The retry delay doubles with each delivery from what the service asks for
// up to RetryMax, the bound on how long a recovered fault goes unnoticed.
func TestRetryDelayGrowsToItsCap(t *testing.T) {
	cfg, err := IntakeConfig{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RetryMax != 10*time.Second {
		t.Fatalf("default RetryMax %s", cfg.RetryMax)
	}
	var got []time.Duration
	for _, n := range []uint64{1, 2, 3, 4, 5, 1000, 1 << 62} {
		d := &Delivery{NumDelivered: n, retryMax: cfg.RetryMax}
		got = append(got, d.retryDelay(2*time.Second))
	}
	if fmt.Sprint(got) != "[2s 4s 8s 10s 10s 10s 10s]" {
		t.Fatalf("delays %v", got)
	}
	d := &Delivery{NumDelivered: 3, retryMax: cfg.RetryMax}
	if d.retryDelay(0) != 0 || d.retryDelay(time.Minute) != cfg.RetryMax {
		t.Fatalf("zero base %s, base over the cap %s", d.retryDelay(0), d.retryDelay(time.Minute))
	}
	if _, err := (IntakeConfig{RetryMax: -time.Second}).withDefaults(); err == nil {
		t.Fatal("negative RetryMax accepted")
	}
}

// metricValue gathers reg and returns the value of the sample named name
// whose labels include the given pairs (a counter or a gauge).
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	sample:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
				}
				if !found {
					continue sample
				}
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// An intent given back more than StuckAfter times is reported: one warning
// (rate-limited per intent) naming it and the failing step, a counter by
// step, and a gauge of stuck intents that falls back once it is settled.
func TestStuckIntentReported(t *testing.T) {
	e := startServer(t, t.TempDir())
	core, logs := observer.New(zap.InfoLevel)
	c := connect(t, e, func(cfg *ConnConfig) { cfg.Logger = zap.New(core) })
	if err := c.EnsureStreams(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	const step = "read the stream's verdict"
	stuckWhileFailing := make(chan float64, 1)
	acked := make(chan struct{})
	consume(t, c, IntakeConfig{StuckAfter: 3, Metrics: reg}, func(ctx context.Context, d *Delivery) {
		if d.NumDelivered == 9 {
			if err := d.Settle(ctx, reconciled.Outcome{Kind: reconciled.Ack}); err != nil {
				t.Errorf("ack: %v", err)
			}
			close(acked)
			return
		}
		o := reconciled.Outcome{Kind: reconciled.Nak, Delay: 100 * time.Microsecond, Reason: step + ": nats: timeout"}
		if err := d.Settle(ctx, o); err != nil {
			t.Errorf("settle: %v", err)
		}
		if d.NumDelivered == 8 {
			stuckWhileFailing <- metricValue(t, reg, MetricStuckIntents)
		}
	})
	publishIntent(t, c, "stuck-1", nil)
	if n := recv(t, stuckWhileFailing, "the 8th delivery"); n != 1 {
		t.Fatalf("%s = %v while the intent fails, want 1", MetricStuckIntents, n)
	}
	recv(t, acked, "the ack")
	warned := logs.FilterMessageSnippet("keeps failing").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings for deliveries 4..8 of one intent, want 1 (rate-limited)", len(warned))
	}
	f := warned[0].ContextMap()
	if f["intent_id"] != "stuck-1" || f["step"] != step || f["delivered"] != uint64(4) {
		t.Fatalf("warning fields %v", f)
	}
	if n := metricValue(t, reg, MetricStuckRetries); n != 5 {
		t.Fatalf("%s = %v, want 5 (deliveries 4..8)", MetricStuckRetries, n)
	}
	if n := metricValue(t, reg, MetricStuckIntents); n != 0 {
		t.Fatalf("%s = %v after the ack, want 0", MetricStuckIntents, n)
	}
}
