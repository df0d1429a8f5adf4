package daemon

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/store"
)

const corruptMsg = "is corrupt: move it away; the daemon rebuilds it from the stream"

// damagedStore writes, in dir, a store of 40 intents whose index
// intents_by_first_seen has its cells run off their page: listings through
// it fail with "database disk image is malformed", while the start, which
// does not use the index, succeeds once quick_check is skipped.
func damagedStore(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "reconciled.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		body := fmt.Sprintf(`{"intent_id":"i%02d","method":"icrc1_transfer"}`, i)
		if _, err := s.PutIntent(ctx, reconciled.IntentRecord{IntentID: fmt.Sprintf("i%02d", i), CanisterID: "ryjl3-tyaaa-aaaaa-aaaba-cai",
			Method: "icrc1_transfer", Body: []byte(body), Hash: sha256.Sum256([]byte(body))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	var root, pageSize int
	if err := db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = 'intents_by_first_seen'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := root*pageSize - 196; i < root*pageSize; i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStartRefusesCorruptStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	path := damagedStore(t, dir)
	d, err := New(ctx, Config{Instance: "t", DataDir: dir}, Options{})
	if err == nil {
		d.Shutdown(ctx)
		t.Fatal("started on a corrupt store")
	}
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "store "+path+" "+corruptMsg) {
		t.Fatalf("err %v, want ErrCorrupt saying %q", err, corruptMsg)
	}
}

// Damage met after the start (here: the check skipped) makes the daemon
// unready and ends it, with the same message.
func TestCorruptStoreEndsDaemon(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	path := damagedStore(t, dir)
	d, err := New(ctx, Config{Instance: "t", DataDir: dir}, Options{Store: store.Options{CheckTimeout: -1}})
	if err != nil {
		t.Fatalf("start with the check skipped: %v", err)
	}
	defer d.Shutdown(ctx)
	if err := d.Ready(ctx); err != nil {
		t.Fatalf("not ready before any read met the damage: %v", err)
	}
	if _, _, err := d.Store().ListIntents(ctx, store.ListFilter{Limit: 100}); err == nil {
		t.Fatal("listing over the damaged index succeeded")
	}
	if err := d.Ready(ctx); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Ready %v after a malformed read, want ErrCorrupt", err)
	}
	select {
	case <-d.Failed():
	case <-ctx.Done():
		t.Fatal("the daemon runs on over a corrupt store: Done never closed")
	}
	if err := d.FailedErr(); !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "store "+path+" "+corruptMsg) {
		t.Fatalf("Err %v", err)
	}
}

func TestStoreRecoverMovesCorruptStoreAside(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	damagedStore(t, dir)
	d, err := New(ctx, Config{Instance: "t", DataDir: dir, StoreRecover: true}, Options{})
	if err != nil {
		t.Fatalf("start with StoreRecover: %v", err)
	}
	defer d.Shutdown(ctx)
	if !d.Store().Created() {
		t.Error("the store after recovery is not a new one")
	}
	moved, _ := filepath.Glob(filepath.Join(dir, "reconciled.db.corrupt-*"))
	if len(moved) != 1 {
		t.Errorf("moved aside: %q, want one file", moved)
	}
	if err := d.Ready(ctx); err != nil {
		t.Errorf("not ready after recovery: %v", err)
	}
}
