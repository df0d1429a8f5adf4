package queue

import (
	"context"
	"strings"
	"testing"

	"github.com/reconciled/reconciled/matcher"
)

// A different body under an intent id the stream has just taken must still
// reach a daemon, which refuses it with E_INTENT_CONFLICT; only identical
// bodies are duplicates.
func TestConflictingBodyReachesDaemonThroughTheStream(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	first := []byte(`{"intent_id":"c-1","amount":"1"}`)
	other := []byte(`{"intent_id":"c-1","amount":"2"}`)
	if dup, err := c.PublishIntent(ctx, canister, "c-1", first, matcher.IntentHash(first)); err != nil || dup {
		t.Fatalf("first publish: duplicate=%v err=%v", dup, err)
	}
	if dup, err := c.PublishIntent(ctx, canister, "c-1", other, matcher.IntentHash(other)); err != nil || dup {
		t.Fatalf("another body under the same id within the dedup window: duplicate=%v err=%v", dup, err)
	}
	if dup, err := c.PublishIntent(ctx, canister, "c-1", first, matcher.IntentHash(first)); err != nil || !dup {
		t.Fatalf("the first body again: duplicate=%v err=%v", dup, err)
	}
	got := make(chan *Delivery, 4)
	consume(t, c, IntakeConfig{}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
		got <- d
	})
	seen := map[string]string{}
	for range 2 {
		d := recv(t, got, "intent")
		seen[string(d.Data)] = d.MsgID
	}
	for _, body := range [][]byte{first, other} {
		id, ok := seen[string(body)]
		if !ok {
			t.Fatalf("body %s never delivered; delivered %v", body, seen)
		}
		if want := IntentMsgID("c-1", matcher.IntentHash(body)); id != want || !strings.HasPrefix(id, "c-1:") {
			t.Errorf("body %s delivered with Nats-Msg-Id %q, want %q", body, id, want)
		}
	}
}
