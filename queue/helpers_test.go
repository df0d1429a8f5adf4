package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/reconciled/reconciled/internal/testutil"
)

// testTimeout bounds every wait in the tests; it is a failure deadline, not
// a synchronisation delay.
const testTimeout = 10 * time.Second

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func startServer(t *testing.T, dir string) *Embedded {
	t.Helper()
	e, err := StartEmbedded(EmbeddedConfig{DataDir: dir})
	if err != nil {
		t.Fatalf("start embedded: %v", err)
	}
	t.Cleanup(e.Shutdown)
	return e
}

func connect(t *testing.T, e *Embedded, mod ...func(*ConnConfig)) *Conn {
	t.Helper()
	cfg := ConnConfig{Embedded: e, Name: t.Name(), Logger: zaptest.NewLogger(t)}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := Connect(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// startWithWorkQueue starts a server holding the intent stream as it was
// created before limits retention.
func startWithWorkQueue(t *testing.T) *Embedded {
	t.Helper()
	e := startServer(t, t.TempDir())
	c := connect(t, e)
	if _, err := c.JetStream().CreateStream(testCtx(t), c.intentsConfig(jetstream.WorkQueuePolicy)); err != nil {
		t.Fatalf("create a work-queue intent stream: %v", err)
	}
	return e
}

// setup starts a server in a temporary dir and returns a connection with
// both streams in place.
func setup(t *testing.T) (*Embedded, *Conn) {
	t.Helper()
	e := startServer(t, t.TempDir())
	c := connect(t, e)
	if err := c.EnsureStreams(testCtx(t)); err != nil {
		t.Fatalf("ensure streams: %v", err)
	}
	return e, c
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func streamInfo(t *testing.T, c *Conn, name string, opts ...jetstream.StreamInfoOpt) *jetstream.StreamInfo {
	t.Helper()
	ctx := testCtx(t)
	st, err := c.JetStream().Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := st.Info(ctx, opts...)
	if err != nil {
		t.Fatalf("stream %s info: %v", name, err)
	}
	return info
}

func consumerInfo(t *testing.T, c *Conn, stream, durable string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx := testCtx(t)
	cons, err := c.JetStream().Consumer(ctx, stream, durable)
	if err != nil {
		t.Fatalf("consumer %s: %v", durable, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatalf("consumer %s info: %v", durable, err)
	}
	return info
}

// consume starts an intake and stops and drains it at the end of the test.
func consume(t *testing.T, c *Conn, cfg IntakeConfig, h Handler) *Intake {
	t.Helper()
	if cfg.PullWait == 0 {
		// Stopping waits for the open pull request to end; keep that short.
		cfg.PullWait = 100 * time.Millisecond
	}
	in, err := c.ConsumeIntents(context.Background(), cfg, h)
	if err != nil {
		t.Fatalf("consume intents: %v", err)
	}
	t.Cleanup(func() {
		in.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := in.Wait(ctx); err != nil {
			t.Errorf("intake wait: %v", err)
		}
	})
	return in
}

// intentSeqs waits until the intent stream holds exactly the sequences
// first..last (first > last: none), i.e. a purge has reached first.
func intentSeqs(t *testing.T, c *Conn, first, last uint64) {
	t.Helper()
	testutil.Eventually(t, testTimeout, fmt.Sprintf("intent stream holding %d..%d", first, last), func() (bool, string) {
		st := streamInfo(t, c, IntentsStream).State
		want := uint64(0)
		if last >= first {
			want = last - first + 1
		}
		return st.Msgs == want && (want == 0 || st.FirstSeq == first), fmt.Sprintf("holds %d messages, seqs %d..%d", st.Msgs, st.FirstSeq, st.LastSeq)
	})
}
