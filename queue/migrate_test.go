package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A work-queue intent stream moves to limits retention only once it holds
// no intent; a refusal leaves it as it was, taking intents again.
func TestMoveIntentsToLimits(t *testing.T) {
	c := connect(t, startWithWorkQueue(t))
	ctx := testCtx(t)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	publishIntent(t, c, "open-1", nil)

	moved, err := c.MoveIntentsToLimits(ctx)
	if !errors.Is(err, ErrIntentsPending) || moved {
		t.Fatalf("move with an open intent: moved=%v err=%v", moved, err)
	}
	info := streamInfo(t, c, IntentsStream)
	if info.Config.Retention != jetstream.WorkQueuePolicy || info.Config.Subjects[0] != "reconcile.intents.>" || info.State.Msgs != 1 {
		t.Fatalf("after the refusal: %v on %v holding %d", info.Config.Retention, info.Config.Subjects, info.State.Msgs)
	}
	publishIntent(t, c, "open-2", nil)

	acked := make(chan string, 4)
	in := consume(t, c, IntakeConfig{}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
		acked <- d.IntentID()
	})
	recv(t, acked, "first intent")
	recv(t, acked, "second intent")
	in.Stop()
	if err := in.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	if moved, err := c.MoveIntentsToLimits(ctx); err != nil || !moved {
		t.Fatalf("move of a settled work queue: moved=%v err=%v", moved, err)
	}
	info = streamInfo(t, c, IntentsStream)
	if info.Config.Retention != jetstream.LimitsPolicy || info.Config.Subjects[0] != "reconcile.intents.>" || info.State.Msgs != 0 {
		t.Fatalf("after the move: %v on %v holding %d", info.Config.Retention, info.Config.Subjects, info.State.Msgs)
	}
	if moved, err := c.MoveIntentsToLimits(ctx); err != nil || moved {
		t.Fatalf("second move: moved=%v err=%v", moved, err)
	}
	consume(t, c, IntakeConfig{}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
		acked <- d.IntentID()
	})
	publishIntent(t, c, "after-1", nil)
	if id := recv(t, acked, "intent after the move"); id != "after-1" {
		t.Fatalf("delivered %s", id)
	}
}

// The move keeps what the fleet configured: the new intent stream has the
// old one's dedup window (and replicas), and the verdict stream is not
// touched, though the mover runs with default stream settings.
func TestMoveKeepsTheFleetsStreamSettings(t *testing.T) {
	e := startServer(t, t.TempDir())
	fleet := StreamsConfig{IntentDuplicates: 7 * time.Minute, VerdictMaxAge: 48 * time.Hour}
	f := connect(t, e, func(cc *ConnConfig) { cc.Streams = fleet })
	ctx := testCtx(t)
	wq := f.intentsConfig(jetstream.WorkQueuePolicy)
	if _, err := f.JetStream().CreateStream(ctx, wq); err != nil {
		t.Fatal(err)
	}
	if err := f.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	mover := connect(t, e)
	if moved, err := mover.MoveIntentsToLimits(ctx); err != nil || !moved {
		t.Fatalf("move: %v %v", moved, err)
	}
	in := streamInfo(t, mover, IntentsStream).Config
	if in.Retention != jetstream.LimitsPolicy || in.Duplicates != 7*time.Minute || in.Replicas != wq.Replicas {
		t.Fatalf("intent stream after the move: %v, dedup %s, replicas %d", in.Retention, in.Duplicates, in.Replicas)
	}
	if v := streamInfo(t, mover, VerdictsStream).Config; v.MaxAge != 48*time.Hour {
		t.Fatalf("verdict stream after the move: max age %s, want the fleet's 48h", v.MaxAge)
	}
}

// deleteHook runs before just before the stream is deleted.
type deleteHook struct {
	jetstream.JetStream
	before func()
}

func (h deleteHook) DeleteStream(ctx context.Context, name string) error {
	h.before()
	return h.JetStream.DeleteStream(ctx, name)
}

// An instance (a pod restarted by its controller) starting while
// migrate-intents has taken the stream off its subjects is refused: had
// its EnsureStreams put the stream back, an intent could be accepted and
// then deleted with the stream.
func TestMoveRefusesAnInstanceStartingMeanwhile(t *testing.T) {
	e := startWithWorkQueue(t)
	c := connect(t, e)
	other := connect(t, e)
	ctx := testCtx(t)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	published := false
	c.js = deleteHook{JetStream: c.js, before: func() {
		if err := other.EnsureStreams(ctx); err != nil {
			t.Logf("instance start refused: %v", err)
			return
		}
		publishIntent(t, other, "during-move", nil)
		published = true
	}}
	moved, err := c.MoveIntentsToLimits(ctx)
	info := streamInfo(t, other, IntentsStream)
	t.Logf("moved=%v err=%v; stream now %v holding %d", moved, err, info.Config.Retention, info.State.Msgs)
	if published && info.State.Msgs == 0 {
		t.Fatal("intent accepted (publish acknowledged) during the move is gone")
	}
	if published || !moved || err != nil || info.Config.Retention != jetstream.LimitsPolicy {
		t.Fatalf("move with an instance starting meanwhile: moved %v, %v, published %v", moved, err, published)
	}
}
