package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
)

const canister = "mxzaz-hqaaa-aaaar-qaada-cai"

func publishIntent(t *testing.T, c *Conn, id string, body []byte) {
	t.Helper()
	if body == nil {
		body = []byte(`{"intent_id":"` + id + `"}`)
	}
	dup, err := c.PublishIntent(testCtx(t), canister, id, body, matcher.IntentHash(body))
	if err != nil {
		t.Fatalf("publish intent %s: %v", id, err)
	}
	if dup {
		t.Fatalf("publish intent %s: unexpected duplicate", id)
	}
}

// advisories subscribes to a consumer advisory kind (MAX_DELIVERIES,
// MSG_TERMINATED, ...) of the intake consumer.
func advisories(t *testing.T, c *Conn, kind, durable string) <-chan *nats.Msg {
	t.Helper()
	ch := make(chan *nats.Msg, 16)
	sub, err := c.NATS().ChanSubscribe(fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.%s.%s.%s", kind, IntentsStream, durable), ch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := c.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestCompetingInstancesEachIntentOnce(t *testing.T) {
	e, a := setup(t)
	b := connect(t, e)
	const n = 40
	var mu sync.Mutex
	count := map[string]int{}
	byInstance := [2]int{}
	done := make(chan struct{}, n)
	for i, c := range []*Conn{a, b} {
		consume(t, c, IntakeConfig{MaxInFlight: 2}, func(ctx context.Context, d *Delivery) {
			if d.CanisterID() != canister {
				t.Errorf("canister id %q", d.CanisterID())
			}
			if err := d.Ack(ctx); err != nil {
				t.Errorf("ack %s: %v", d.MsgID, err)
			}
			mu.Lock()
			count[d.MsgID]++
			byInstance[i]++
			mu.Unlock()
			done <- struct{}{}
		})
	}
	for i := range n {
		publishIntent(t, a, fmt.Sprintf("p-%d", i), nil)
	}
	for range n {
		recv(t, done, "delivery")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(count) != n {
		t.Fatalf("%d distinct intents delivered, want %d", len(count), n)
	}
	for id, k := range count {
		if k != 1 {
			t.Errorf("intent %s delivered %d times", id, k)
		}
	}
	// Acks were confirmed, so the server's view is final: nothing pending,
	// nothing redelivered, and the acknowledged intents are purged.
	ci := consumerInfo(t, a, IntentsStream, defaultDurable)
	if ci.NumPending != 0 || ci.NumAckPending != 0 || ci.NumRedelivered != 0 || ci.Delivered.Consumer != n {
		t.Errorf("consumer state: pending %d ack-pending %d redelivered %d delivered %d",
			ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.Delivered.Consumer)
	}
	intentSeqs(t, a, n+1, n)
	t.Logf("split between instances: %v", byInstance)
}

func TestDuplicateIntentWithinWindow(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	body := []byte(`{"intent_id":"dup-1"}`)
	if dup, err := c.PublishIntent(ctx, canister, "dup-1", body, matcher.IntentHash(body)); err != nil || dup {
		t.Fatalf("first publish: duplicate=%v err=%v", dup, err)
	}
	if dup, err := c.PublishIntent(ctx, canister, "dup-1", body, matcher.IntentHash(body)); err != nil || !dup {
		t.Fatalf("second publish: duplicate=%v err=%v", dup, err)
	}
	if m := streamInfo(t, c, IntentsStream).State.Msgs; m != 1 {
		t.Fatalf("stream holds %d messages, want 1", m)
	}
}

func TestHeartbeatKeepsLongHandlerFromRedelivery(t *testing.T) {
	_, c := setup(t)
	// Long enough that a loaded machine's scheduling and fsync delays do not
	// eat the heartbeat margin (AckWait/3).
	const ackWait = time.Second
	var calls sync.WaitGroup
	calls.Add(1)
	deliveries := make(chan uint64, 4)
	consume(t, c, IntakeConfig{AckWait: ackWait, MaxInFlight: 2}, func(ctx context.Context, d *Delivery) {
		deliveries <- d.NumDelivered
		if d.NumDelivered > 1 {
			return
		}
		// A long scan: several ack timeouts without the handler touching
		// the delivery. The timer is the workload, not synchronisation.
		<-time.After(5 * ackWait / 2)
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack after long handler: %v", err)
		}
		calls.Done()
	})
	publishIntent(t, c, "long-1", nil)
	if n := recv(t, deliveries, "first delivery"); n != 1 {
		t.Fatalf("first delivery NumDelivered = %d", n)
	}
	calls.Wait()
	select {
	case n := <-deliveries:
		t.Fatalf("redelivered while the handler ran (NumDelivered %d)", n)
	default:
	}
	ci := consumerInfo(t, c, IntentsStream, defaultDurable)
	if ci.NumRedelivered != 0 || ci.Delivered.Consumer != 1 || ci.NumAckPending != 0 {
		t.Fatalf("consumer: redelivered %d delivered %d ack-pending %d", ci.NumRedelivered, ci.Delivered.Consumer, ci.NumAckPending)
	}
}

func TestNakRedeliversWithCount(t *testing.T) {
	_, c := setup(t)
	got := make(chan uint64, 4)
	consume(t, c, IntakeConfig{}, func(ctx context.Context, d *Delivery) {
		got <- d.NumDelivered
		if d.NumDelivered == 1 {
			if err := d.Nak(0); err != nil {
				t.Errorf("nak: %v", err)
			}
			return
		}
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
	})
	publishIntent(t, c, "nak-1", nil)
	if n := recv(t, got, "first delivery"); n != 1 {
		t.Fatalf("first NumDelivered = %d", n)
	}
	if n := recv(t, got, "redelivery"); n != 2 {
		t.Fatalf("redelivery NumDelivered = %d", n)
	}
}

func TestUnsettledDeliveryIsNakedWithBackOff(t *testing.T) {
	_, c := setup(t)
	got := make(chan uint64, 4)
	consume(t, c, IntakeConfig{BackOff: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}},
		func(ctx context.Context, d *Delivery) {
			got <- d.NumDelivered
			if d.NumDelivered >= 2 {
				if err := d.Ack(ctx); err != nil {
					t.Errorf("ack: %v", err)
				}
			}
			// First delivery: return without settling.
		})
	publishIntent(t, c, "forgot-1", nil)
	if n := recv(t, got, "first delivery"); n != 1 {
		t.Fatalf("NumDelivered = %d", n)
	}
	if n := recv(t, got, "redelivery of unsettled"); n != 2 {
		t.Fatalf("NumDelivered = %d", n)
	}
}

func TestOversizedIntentTerminated(t *testing.T) {
	_, c := setup(t)
	terminated := advisories(t, c, "MSG_TERMINATED", defaultDurable)
	handled := make(chan string, 4)
	consume(t, c, IntakeConfig{MaxMsgBytes: 64}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
		handled <- d.IntentID()
	})
	publishIntent(t, c, "huge", bytes.Repeat([]byte("x"), 65))
	adv := recv(t, terminated, "termination advisory")
	var a struct {
		StreamSeq uint64 `json:"stream_seq"`
		Reason    string `json:"reason"`
	}
	if err := json.Unmarshal(adv.Data, &a); err != nil || a.StreamSeq != 1 || a.Reason == "" {
		t.Fatalf("advisory %s (%v)", adv.Data, err)
	}
	publishIntent(t, c, "small", nil)
	if id := recv(t, handled, "small intent"); id != "small" {
		t.Fatalf("handler saw %q", id)
	}
	ci := consumerInfo(t, c, IntentsStream, defaultDurable)
	if ci.NumAckPending != 0 || ci.NumRedelivered != 0 {
		t.Fatalf("consumer: ack-pending %d redelivered %d", ci.NumAckPending, ci.NumRedelivered)
	}
}

func TestStopWaitDrainsAndHandsBack(t *testing.T) {
	e, a := setup(t)
	b := connect(t, e)
	started := make(chan struct{})
	in, err := a.ConsumeIntents(context.Background(), IntakeConfig{PullWait: 100 * time.Millisecond}, func(ctx context.Context, d *Delivery) {
		close(started)
		<-ctx.Done() // grace period over: give it back
		if err := d.Nak(0); err != nil {
			t.Errorf("nak on abort: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	publishIntent(t, a, "drain-1", nil)
	recv(t, started, "handler start")
	in.Stop()
	grace, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := in.Wait(grace); err == nil {
		t.Fatal("Wait returned nil although the handler outlived the grace period")
	}
	// The other instance gets it at once (well before the 30 s ack wait).
	got := make(chan uint64, 1)
	consume(t, b, IntakeConfig{}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
		got <- d.NumDelivered
	})
	// The stopped instance's last pull request may still take it once and
	// give it back, which counts as a delivery.
	if n := recv(t, got, "handed-back intent"); n != 2 && n != 3 {
		t.Fatalf("NumDelivered = %d, want 2 or 3", n)
	}
}

func TestStopWaitLetsHandlerFinish(t *testing.T) {
	_, c := setup(t)
	started, release := make(chan struct{}), make(chan struct{})
	in, err := c.ConsumeIntents(context.Background(), IntakeConfig{PullWait: 100 * time.Millisecond}, func(ctx context.Context, d *Delivery) {
		close(started)
		<-release
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	publishIntent(t, c, "finish-1", nil)
	recv(t, started, "handler start")
	in.Stop()
	waited := make(chan error, 1)
	go func() { waited <- in.Wait(testCtx(t)) }()
	select {
	case err := <-waited:
		t.Fatalf("Wait returned (%v) while a handler was running", err)
	default:
	}
	close(release)
	if err := recv(t, waited, "Wait"); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	// The stop purged what was acknowledged up to it.
	if m := streamInfo(t, c, IntentsStream).State.Msgs; m != 0 {
		t.Fatalf("intent stream holds %d after drain", m)
	}
}

func TestStoppedIntakeGivesBackLatePull(t *testing.T) {
	e, a := setup(t)
	b := connect(t, e)
	in, err := a.ConsumeIntents(context.Background(), IntakeConfig{PullWait: 5 * time.Second}, func(ctx context.Context, d *Delivery) {
		t.Errorf("stopped intake handled %s", d.MsgID)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the server holds the intake's pull request.
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	deadline := time.After(testTimeout)
	for consumerInfo(t, a, IntentsStream, defaultDurable).NumWaiting == 0 {
		select {
		case <-poll.C:
		case <-deadline:
			t.Fatal("pull request never reached the server")
		}
	}
	in.Stop()
	// The open request takes this intent after the stop.
	publishIntent(t, a, "late-1", nil)
	if err := in.Wait(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	got := make(chan uint64, 1)
	consume(t, b, IntakeConfig{}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
		got <- d.NumDelivered
	})
	// Given back at once: well before its 30 s ack wait.
	if n := recv(t, got, "late intent"); n != 2 {
		t.Fatalf("NumDelivered = %d, want 2", n)
	}
}

// A retry asked for while the intake is stopping is given back at once: a
// delay meant for a live instance's retry would hold the intent from the
// next instance (or this one restarted) for that long.
func TestSettleNakWhileStoppingIsImmediate(t *testing.T) {
	e, a := setup(t)
	b := connect(t, e)
	started, release := make(chan struct{}), make(chan struct{})
	in, err := a.ConsumeIntents(context.Background(), IntakeConfig{PullWait: 100 * time.Millisecond}, func(ctx context.Context, d *Delivery) {
		close(started)
		<-release
		if err := d.Settle(ctx, reconciled.Outcome{Kind: reconciled.Nak, Delay: time.Hour, Reason: "store busy"}); err != nil {
			t.Errorf("settle: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	publishIntent(t, a, "stop-nak-1", nil)
	recv(t, started, "handler start")
	in.Stop()
	close(release)
	if err := in.Wait(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	consume(t, b, IntakeConfig{}, func(ctx context.Context, d *Delivery) {
		if err := d.Settle(ctx, reconciled.Outcome{Kind: reconciled.Ack}); err != nil {
			t.Errorf("settle ack: %v", err)
		}
		got <- d.IntentID()
	})
	if id := recv(t, got, "intent given back while stopping"); id != "stop-nak-1" {
		t.Fatalf("got %s", id)
	}
}
