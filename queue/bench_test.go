package queue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
)

func benchSetup(b *testing.B) *Conn {
	b.Helper()
	return benchSetupRetention(b, jetstream.LimitsPolicy)
}

// benchSetupRetention starts with an intent stream of the given retention,
// as EnsureStreams finds one created before limits retention.
func benchSetupRetention(b *testing.B, retention jetstream.RetentionPolicy) *Conn {
	b.Helper()
	e, err := StartEmbedded(EmbeddedConfig{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Shutdown)
	c, err := Connect(context.Background(), ConnConfig{Embedded: e})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	if _, err := c.JetStream().CreateStream(context.Background(), c.intentsConfig(retention)); err != nil {
		b.Fatal(err)
	}
	if err := c.EnsureStreams(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c
}

var benchBody = []byte(`{"intent_id":"p1-3f2a","canister_id":"mxzaz-hqaaa-aaaar-qaada-cai","method":"icrc1_transfer","caller":"k2t6j-2nvnp-4zjm3-25dtz-6xhaa-c7boj-5gayf-oj3xs-i43lp-teztq-6ae","args":{"to":"2vxsx-fae","amount":"150000000","memo":"6c756e6368","created_at_time":"1791547201000000000"},"after":"Err.TooOld"}`)

func BenchmarkPublishIntent(b *testing.B) {
	c := benchSetup(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.PublishIntent(ctx, canister, fmt.Sprintf("b-%d", i), benchBody, matcher.IntentHash(benchBody)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIntake measures pull, handler and confirmed ack per intent with
// the default four handlers in flight.
func BenchmarkIntake(b *testing.B) {
	c := benchSetup(b)
	ctx := context.Background()
	for i := range b.N {
		if _, err := c.PublishIntent(ctx, canister, fmt.Sprintf("b-%d", i), benchBody, matcher.IntentHash(benchBody)); err != nil {
			b.Fatal(err)
		}
	}
	done := make(chan struct{}, b.N)
	b.ResetTimer()
	in, err := c.ConsumeIntents(ctx, IntakeConfig{}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			b.Error(err)
		}
		done <- struct{}{}
	})
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		<-done
	}
	b.StopTimer()
	in.Stop()
	_ = in.Wait(ctx)
}

func BenchmarkPublishVerdict(b *testing.B) {
	c := benchSetup(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if err := c.PublishVerdict(ctx, verdict(fmt.Sprintf("v-%d", i%100), uint64(i), reconciled.StatusNotYet)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLastVerdict(b *testing.B) {
	c := benchSetup(b)
	ctx := context.Background()
	for i := range 100 {
		if err := c.PublishVerdict(ctx, verdict(fmt.Sprintf("v-%d", i), 1, reconciled.StatusNotYet)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.LastVerdict(ctx, fmt.Sprintf("v-%d", i%100)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFollowVerdicts measures catch-up of a new store: one verdict
// outstanding at a time, acked after the callback.
func BenchmarkFollowVerdicts(b *testing.B) {
	c := benchSetup(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range b.N {
		if err := c.PublishVerdict(ctx, verdict(fmt.Sprintf("v-%d", i%100), uint64(i), reconciled.StatusNotYet)); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	done := make(chan error, 1)
	b.ResetTimer()
	go func() {
		done <- c.FollowVerdicts(ctx, FollowConfig{Durable: "bench"}, func(reconciled.Verdict) error {
			n++
			if n == b.N {
				cancel()
			}
			return nil
		})
	}()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkIntentStreamCeiling is what the intent stream alone allows a
// burst: 16 publishers publish intents while the intake, 256 in flight,
// acks each at once (no decision, no verdict). With SyncAlways every
// publish is an fsync on the stream's file, one at a time; under
// work-queue retention so is every ack (it removes the message, and the
// file store writes a tombstone for each removal), while under limits
// retention an ack writes nothing to the stream and the intake purges
// acknowledged intents in ranges, at most once a second. This bounds
// intents per second through any daemon on the same disk; the two
// sub-benchmarks measure both retentions side by side.
func BenchmarkIntentStreamCeiling(b *testing.B) {
	for _, r := range []struct {
		name      string
		retention jetstream.RetentionPolicy
	}{{"limits", jetstream.LimitsPolicy}, {"workqueue", jetstream.WorkQueuePolicy}} {
		b.Run(r.name, func(b *testing.B) { benchIntentStreamCeiling(b, r.retention) })
	}
}

func benchIntentStreamCeiling(b *testing.B, retention jetstream.RetentionPolicy) {
	c := benchSetupRetention(b, retention)
	ctx := context.Background()
	acked := make(chan struct{}, b.N)
	in, err := c.ConsumeIntents(ctx, IntakeConfig{MaxInFlight: 256}, func(ctx context.Context, d *Delivery) {
		if err := d.Ack(ctx); err != nil {
			b.Error(err)
		}
		acked <- struct{}{}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		in.Stop()
		_ = in.Wait(ctx)
	}()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, err := c.PublishIntent(ctx, canister, fmt.Sprintf("c-%d", i), benchBody, matcher.IntentHash(benchBody)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	for range b.N {
		<-acked
	}
	b.StopTimer()
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "intents/s")
}
