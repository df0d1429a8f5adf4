package daemon

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A NATS connection closed for good (here by the client library itself,
// as after repeated authorization violations without RetryAuthErrors)
// ends the daemon with an error naming why; a Shutdown does not.
func TestDaemonStopsWhenNATSClosesForGood(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func() *Daemon {
		d, err := New(ctx, Config{Instance: "t", DataDir: t.TempDir()}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := start()
	defer d.Shutdown(ctx)
	if d.FailedErr() != nil {
		t.Fatalf("Err %v while running", d.FailedErr())
	}
	d.Conn().NATS().Close()
	select {
	case <-d.Failed():
	case <-ctx.Done():
		t.Fatal("the daemon runs on without NATS: Done never closed")
	}
	if err := d.FailedErr(); err == nil || !strings.Contains(err.Error(), "closed for good") {
		t.Fatalf("Err %v", err)
	}

	d2 := start()
	d2.Shutdown(ctx)
	select {
	case <-d2.Failed():
		t.Fatalf("Failed closed by a Shutdown: %v", d2.FailedErr())
	default:
	}
}
