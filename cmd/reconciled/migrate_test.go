package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

func TestMigrateIntentsRefusesOpenIntentsThenMoves(t *testing.T) {
	e, err := queue.StartEmbedded(queue.EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := queue.Connect(ctx, queue.ConnConfig{URL: e.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	js := c.JetStream()
	// The intent stream as created before limits retention.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: queue.IntentsStream, Subjects: []string{"reconcile.intents.>"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PublishIntent(ctx, "mxzaz-hqaaa-aaaar-qaada-cai", "open-1", []byte(`{"intent_id":"open-1"}`), matcher.IntentHash([]byte(`{"intent_id":"open-1"}`))); err != nil {
		t.Fatal(err)
	}
	migrate := func() (int, string, string) {
		var out, errOut bytes.Buffer
		code := run([]string{"migrate-intents", "--nats-url", e.ClientURL()}, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	retention := func() jetstream.RetentionPolicy {
		st, err := js.Stream(ctx, queue.IntentsStream)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config.Retention
	}
	if code, _, stderr := migrate(); code != 1 || !strings.Contains(stderr, "not yet settled: 1") {
		t.Fatalf("with an open intent: exit %d, stderr %q", code, stderr)
	}
	if r := retention(); r != jetstream.WorkQueuePolicy {
		t.Fatalf("retention after the refusal: %v", r)
	}

	cons, err := js.CreateOrUpdateConsumer(ctx, queue.IntentsStream, jetstream.ConsumerConfig{Durable: "reconciled", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := migrate(); code != 0 || !strings.Contains(stdout, "now has limits retention") {
		t.Fatalf("settled work queue: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if r := retention(); r != jetstream.LimitsPolicy {
		t.Fatalf("retention after the move: %v", r)
	}
	if code, stdout, _ := migrate(); code != 0 || !strings.Contains(stdout, "nothing to do") {
		t.Fatalf("second run: exit %d, stdout %q", code, stdout)
	}
}
