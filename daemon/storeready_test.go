package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/store"
)

// After a real write failed for a reason of storage the daemon is not
// ready until a real write on the same path commits again: the readiness
// probe's own write succeeding (the disk has room for one row again) does
// not make it ready.
func TestNotReadyAfterFailedWriteUntilARealWriteSucceeds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var full atomic.Bool
	fault := func(p store.WritePath) error {
		if full.Load() && p != store.PathProbe {
			return fmt.Errorf("write: %w", syscall.ENOSPC)
		}
		return nil
	}
	d, err := New(ctx, Config{Instance: "t", DataDir: t.TempDir()}, Options{Store: store.Options{WriteFault: fault}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(ctx)
	if err := d.Ready(ctx); err != nil {
		t.Fatalf("not ready at start: %v", err)
	}
	put := func(id string) error {
		body := fmt.Sprintf(`{"intent_id":%q}`, id)
		_, err := d.Store().PutIntent(ctx, reconciled.IntentRecord{IntentID: id, CanisterID: "c", Caller: "x", Method: "icrc1_transfer",
			Body: []byte(body), Hash: sha256.Sum256([]byte(body))})
		return err
	}
	full.Store(true)
	if err := put("w-1"); err == nil {
		t.Fatal("a write with the disk full succeeded")
	}
	storeProblem := func() string {
		var nr *NotReadyError
		if err := d.Ready(ctx); !errors.As(err, &nr) {
			return ""
		}
		for _, p := range nr.Problems {
			if p.Check == "store" {
				return p.Error
			}
		}
		return ""
	}
	if why := storeProblem(); !strings.Contains(why, "intents writes failing") {
		t.Fatalf("after a failed write: store check %q, want the intent writes failing", why)
	}
	full.Store(false)
	if err := d.Store().Writable(ctx); err == nil {
		t.Fatal("Writable with the intent writes failing")
	}
	if why := storeProblem(); why == "" {
		t.Fatal("ready again with no real write succeeded since the failure")
	}
	if err := put("w-2"); err != nil {
		t.Fatal(err)
	}
	if err := d.Ready(ctx); err != nil {
		t.Fatalf("not ready after a real write succeeded: %v", err)
	}
}
