package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/reconciled/reconciled"
)

// tinyFS is a 5 MiB tmpfs of its own at dir, so that filling it fails
// real writes with ENOSPC. Where mounting is not permitted it falls back
// to failing the store's commits with an injected ENOSPC instead
// (Options.WriteFault): every write but the probe's, as a full disk does
// to writes that need more room than the WAL has left.
type tinyFS struct {
	t        *testing.T
	dir      string
	injected bool
	full     atomic.Bool
}

// mountTiny mounts the file system at dir (created); it is detached when
// the test ends, after everything opened later has been closed.
func mountTiny(t *testing.T, dir string) *tinyFS {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=5m"); err != nil {
		t.Logf("mount a 5 MiB tmpfs at %s: %v; injecting ENOSPC into the store's commits instead", dir, err)
		return &tinyFS{t: t, dir: dir, injected: true}
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return &tinyFS{t: t, dir: dir}
}

// fault is the store's WriteFault: nil unless injecting.
func (f *tinyFS) fault() func(WritePath) error {
	if !f.injected {
		return nil
	}
	return func(p WritePath) error {
		if p != PathProbe && f.full.Load() {
			return fmt.Errorf("write %s: %w", f.dir, syscall.ENOSPC)
		}
		return nil
	}
}

// fill writes a file until the file system has no space left.
func (f *tinyFS) fill() {
	f.t.Helper()
	if f.injected {
		f.full.Store(true)
		return
	}
	w, err := os.Create(filepath.Join(f.dir, "filler"))
	if err != nil {
		f.t.Fatal(err)
	}
	defer w.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := w.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			f.t.Fatalf("fill %s: %v", f.dir, err)
		}
	}
}

// free gives the space back.
func (f *tinyFS) free() {
	f.t.Helper()
	if f.injected {
		f.full.Store(false)
		return
	}
	if err := os.Remove(filepath.Join(f.dir, "filler")); err != nil {
		f.t.Fatal(err)
	}
}

// bigIntent is an intent whose body takes about n bytes: its write needs
// that many pages more in the WAL.
func bigIntent(id string, n int) reconciled.IntentRecord {
	body := fmt.Sprintf(`{"intent_id":%q,"method":"icrc1_transfer","pad":%q}`, id, strings.Repeat("x", n))
	return reconciled.IntentRecord{IntentID: id, CanisterID: ledgerA, Caller: "2vxsx-fae", Method: "icrc1_transfer",
		Body: json.RawMessage(body), Hash: sha256.Sum256([]byte(body))}
}

// TestWritableReportsFailingRealWrites fills the disk under a store whose
// WAL has room left for a small write but not for a large one: the state
// in which a probe rewriting one row succeeds while the daemon's real
// writes fail. Writable (what readiness asks) must fail from the first
// failed real write until a real write of the same kind commits again.
func TestWritableReportsFailingRealWrites(t *testing.T) {
	ctx := context.Background()
	fs := mountTiny(t, filepath.Join(t.TempDir(), "data"))
	s, err := OpenWith(ctx, filepath.Join(fs.dir, "recon.db"), Options{ReadConns: 2, WriteFault: fs.fault()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	for i := range 20 {
		if _, err := s.PutIntent(ctx, intent(fmt.Sprintf("warm-%02d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	// The WAL keeps its size, and the next write starts again at its
	// beginning: small writes need no new space.
	if _, err := s.w.ExecContext(ctx, `PRAGMA wal_checkpoint(RESTART)`); err != nil {
		t.Fatal(err)
	}
	fs.fill()
	if err := s.Writable(ctx); err != nil {
		t.Fatalf("a one-row write with room in the WAL: %v", err)
	}
	if _, err := s.PutIntent(ctx, bigIntent("big-1", 2<<20)); !storageErr(err) {
		t.Fatalf("a 2 MiB intent on a full disk: %v, want the disk full", err)
	}
	if err := s.Writable(ctx); err == nil {
		t.Fatal("Writable() = nil after a real write failed with the disk full")
	} else if !strings.Contains(err.Error(), "intents writes failing") {
		t.Fatalf("Writable() after a failed real write: %v; want it to name the failing intent writes", err)
	}
	if f := s.WriteFailures(); len(f) != 1 || f[0].Path != PathIntents || f[0].Failures == 0 || f[0].Since.IsZero() {
		t.Fatalf("write failures: %+v", f)
	}
	if n := s.WriteErrors()[PathIntents]; n == 0 {
		t.Fatalf("intent write errors counted: %d", n)
	}
	// A commit that changes nothing writes no page: it is no evidence.
	// (An injected fault fails it too.)
	if res, err := s.PutIntent(ctx, intent("warm-00", 1)); !fs.injected && (err != nil || res != reconciled.PutExisting) {
		t.Fatalf("a duplicate intent: %v %v", res, err)
	}
	if f := s.WriteFailures(); len(f) != 1 {
		t.Fatalf("write failures after a commit that changed nothing: %+v", f)
	}
	fs.free()
	if err := s.Writable(ctx); err == nil {
		t.Fatal("Writable() = nil with space back but no real write succeeded since the failure")
	}
	if _, err := s.PutIntent(ctx, bigIntent("big-1", 2<<20)); err != nil {
		t.Fatalf("the intent again with space back: %v", err)
	}
	if err := s.Writable(ctx); err != nil {
		t.Fatalf("Writable() after a real write succeeded again: %v", err)
	}
}
