package queue

import (
	"context"
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
