package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled/matcher"
)

func TestEnsureStreamsIdempotentAcrossConnections(t *testing.T) {
	e := startServer(t, t.TempDir())
	a, b := connect(t, e), connect(t, e)
	ctx := testCtx(t)

	// Two instances starting together on an empty server.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range []*Conn{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.EnsureStreams(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("instance %d: ensure streams: %v", i, err)
		}
	}
	// And again, sequentially.
	for i := 0; i < 2; i++ {
		if err := a.EnsureStreams(ctx); err != nil {
			t.Fatalf("second ensure: %v", err)
		}
	}

	in := streamInfo(t, a, IntentsStream).Config
	if in.Retention != jetstream.LimitsPolicy || in.Storage != jetstream.FileStorage ||
		in.Duplicates < 2*time.Minute || len(in.Subjects) != 1 || in.Subjects[0] != "reconcile.intents.>" {
		t.Errorf("intents stream config: %+v", in)
	}
	vd := streamInfo(t, a, VerdictsStream).Config
	if vd.Retention != jetstream.LimitsPolicy || !vd.AllowDirect || !vd.AllowAtomicPublish || vd.MaxAge != 30*24*time.Hour ||
		vd.MaxMsgsPerSubject != 1000 || vd.Duplicates <= 0 || vd.Subjects[0] != "reconcile.verdicts.>" {
		t.Errorf("verdicts stream config: %+v", vd)
	}

	// A newer instance with a compatible change updates the stream in place.
	c := connect(t, e, func(cfg *ConnConfig) {
		cfg.Streams.VerdictMaxAge = 7 * 24 * time.Hour
		cfg.Streams.IntentDuplicates = 5 * time.Minute
	})
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatalf("ensure with changed limits: %v", err)
	}
	if got := streamInfo(t, a, VerdictsStream).Config.MaxAge; got != 7*24*time.Hour {
		t.Errorf("verdict MaxAge after update = %s", got)
	}
	if got := streamInfo(t, a, IntentsStream).Config.Duplicates; got != 5*time.Minute {
		t.Errorf("intent Duplicates after update = %s", got)
	}
}

func TestStreamsConfigRefusesShortIntentDedup(t *testing.T) {
	if _, err := (StreamsConfig{IntentDuplicates: time.Minute}).withDefaults(); err == nil {
		t.Fatal("a 1 min intent dedup window was accepted")
	}
	if _, err := (StreamsConfig{VerdictMaxAge: time.Minute}).withDefaults(); err == nil {
		t.Fatal("a verdict dedup window longer than MaxAge was accepted")
	}
}

func TestEmbeddedRestartKeepsStreamsAndMessages(t *testing.T) {
	dir := t.TempDir()
	e, err := StartEmbedded(EmbeddedConfig{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Connect(testCtx(t), ConnConfig{Embedded: e})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"i-1", "i-2"} {
		if _, err := c.PublishIntent(ctx, "ryjl3-tyaaa-aaaaa-aaaba-cai", id, []byte(`{"intent_id":"`+id+`"}`), matcher.IntentHash([]byte(`{"intent_id":"`+id+`"}`))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PublishVerdict(ctx, verdict("i-1", 1, "not_yet")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.Shutdown()

	e2 := startServer(t, dir)
	c2 := connect(t, e2)
	if got := streamInfo(t, c2, IntentsStream).State.Msgs; got != 2 {
		t.Fatalf("intents after restart = %d, want 2", got)
	}
	v, err := c2.LastVerdict(ctx, "i-1")
	if err != nil || v.Seq != 1 {
		t.Fatalf("last verdict after restart = %+v, %v", v, err)
	}
	// The dedup state survives too: a retry of i-1 is still a duplicate.
	dup, err := c2.PublishIntent(ctx, "ryjl3-tyaaa-aaaaa-aaaba-cai", "i-1", []byte(`{"intent_id":"i-1"}`), matcher.IntentHash([]byte(`{"intent_id":"i-1"}`)))
	if err != nil || !dup {
		t.Fatalf("republish after restart: duplicate=%v err=%v", dup, err)
	}
	got := make(chan string, 4)
	consume(t, c2, IntakeConfig{}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
		got <- d.IntentID()
	})
	seen := map[string]bool{recv(t, got, "first intent"): true, recv(t, got, "second intent"): true}
	if !seen["i-1"] || !seen["i-2"] {
		t.Fatalf("delivered after restart: %v", seen)
	}
}
