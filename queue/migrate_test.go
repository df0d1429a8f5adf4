package queue

import (
	"context"
	"errors"
	"testing"

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
