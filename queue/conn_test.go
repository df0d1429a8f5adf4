package queue

import (
	"context"
	"github.com/nats-io/nats.go"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConnOptionsValidation(t *testing.T) {
	bad := []ConnConfig{
		{URL: "nats://127.0.0.1:1", User: "u", Password: "s3cret-pw", Token: "t0ken-value"},
		{URL: "nats://127.0.0.1:1", Token: "t", CredsFile: "x.creds"},
		{URL: "nats://127.0.0.1:1", TLS: TLSConfig{CertFile: "c.pem"}},
		{URL: "nats://127.0.0.1:1", NKeySeedFile: filepath.Join(t.TempDir(), "missing.nk")},
	}
	for i, cfg := range bad {
		if _, err := cfg.options(); err == nil {
			t.Errorf("config %d accepted", i)
		} else if strings.Contains(err.Error(), "s3cret-pw") || strings.Contains(err.Error(), "t0ken-value") {
			t.Errorf("config %d: error leaks a credential: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := Connect(ctx, ConnConfig{}); err == nil {
		t.Error("Connect without URL or embedded server succeeded")
	}
	if _, err := Connect(ctx, ConnConfig{URL: "nats://127.0.0.1:1", Embedded: &Embedded{}}); err == nil {
		t.Error("Connect with both URL and embedded server succeeded")
	}
}

func TestReconnectDelayBounded(t *testing.T) {
	f := reconnectDelay(100*time.Millisecond, 2*time.Second)
	prev := time.Duration(0)
	for a := 1; a <= 50; a++ {
		d := f(a)
		if d < 90*time.Millisecond || d > 2200*time.Millisecond {
			t.Fatalf("attempt %d: delay %s outside [90ms, 2.2s]", a, d)
		}
		if a <= 4 && d < prev*3/2 {
			t.Fatalf("attempt %d: delay %s does not grow from %s", a, d, prev)
		}
		prev = d
	}
}

func TestDrainClosesAfterPending(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	if err := c.PublishVerdict(ctx, verdict("dr-1", 1, "absent")); err != nil {
		t.Fatal(err)
	}
	if err := c.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if !c.NATS().IsClosed() {
		t.Fatal("connection open after drain")
	}
	if err := c.PublishVerdict(ctx, verdict("dr-1", 2, "absent")); err == nil {
		t.Fatal("publish after drain succeeded")
	}
}

func TestReconnectAfterServerRestart(t *testing.T) {
	dir := t.TempDir()
	e, err := StartEmbedded(EmbeddedConfig{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	url := e.ClientURL()
	c := connect(t, nil, func(cfg *ConnConfig) {
		cfg.Embedded, cfg.URL = nil, url
		cfg.ReconnectMin, cfg.ReconnectMax = 20*time.Millisecond, 100*time.Millisecond
	})
	ctx := testCtx(t)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishVerdict(ctx, verdict("rc-1", 1, "not_yet")); err != nil {
		t.Fatal(err)
	}
	reconnected := make(chan struct{}, 1)
	c.NATS().SetReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} })
	e.Shutdown()

	// Same port and store: the client's reconnect loop finds it again.
	startServer2(t, dir, strings.TrimPrefix(url, "nats://"))
	recv(t, reconnected, "reconnect")
	if err := c.PublishVerdict(ctx, verdict("rc-1", 2, "absent")); err != nil {
		t.Fatalf("publish after reconnect: %v", err)
	}
	v, err := c.LastVerdict(ctx, "rc-1")
	if err != nil || v.Seq != 2 {
		t.Fatalf("last verdict after restart: %+v %v", v, err)
	}
	info := streamInfo(t, c, VerdictsStream)
	if info.State.Msgs != 2 {
		t.Fatalf("verdicts after restart: %d, want 2", info.State.Msgs)
	}
}

func startServer2(t *testing.T, dir, listen string) {
	t.Helper()
	e, err := StartEmbedded(EmbeddedConfig{DataDir: dir, Listen: listen})
	if err != nil {
		t.Fatalf("restart on %s: %v", listen, err)
	}
	t.Cleanup(e.Shutdown)
}
