package store

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/reconcile"
)

// openAtVersion creates a database with the migrations numbered up to v
// applied, as a program of that schema version left it.
func openAtVersion(t *testing.T, path string, v int) *sqlx.DB {
	t.Helper()
	ctx := context.Background()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	var old []migration
	for _, m := range ms {
		if m.version <= v {
			old = append(old, m)
		}
	}
	if err := createFile(path); err != nil {
		t.Fatal(err)
	}
	w, err := sqlx.Open("sqlite", dsn(path, 5*time.Second, true))
	if err != nil {
		t.Fatal(err)
	}
	w.SetMaxOpenConns(1)
	s := &Store{w: w, wst: newStmtCache(w), now: newClock().Now}
	if err := s.applyMigrations(ctx, old); err != nil {
		w.Close()
		t.Fatal(err)
	}
	return w
}

// A store written by schema version 4 migrates through 0005 (its rows
// copied under integer history ids) and 0006, which drops the cached
// blocks with the tips and ranges that describe them (they cannot be
// re-encoded as runs in SQL) and keeps the history ids: afterwards no read
// answers from the old rows, nothing of them stands in the way of the next
// scan's blocks, and the ids still name their histories.
func TestBlockRunsMigrationDropsCache(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "recon.db")
	keyA := reconcile.HistoryKey("8d3e0a1c5f7b9e24", ledgerA, "")
	keyB := reconcile.HistoryKey("8d3e0a1c5f7b9e24", "ryjl3-tyaaa-aaaaa-aaaba-cai", "")
	w := openAtVersion(t, path, 4)
	put := func(key string, bs []CachedBlock) {
		t.Helper()
		for _, b := range bs {
			if _, err := w.ExecContext(ctx, `INSERT INTO blocks (history, idx, ts, hash, raw, stamp) VALUES (?, ?, ?, ?, ?, ?)`,
				key, int64(b.Index), int64(b.TS), b.Hash[:], b.Raw, stampArg(b.Stamp)); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(keyA, blocks(0, 30))
	var otherB []CachedBlock
	for i := uint64(0); i < 30; i += 2 {
		otherB = append(otherB, blockAt(i, testTS(i)+7))
	}
	put(keyB, otherB)
	tipHash := block(29).Hash
	below := block(4).Hash
	if _, err := w.ExecContext(ctx, `INSERT INTO tips (history, idx, hash, certified_time, updated_at) VALUES (?, 29, ?, 77, 1)`,
		keyA, tipHash[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ExecContext(ctx, `INSERT INTO ranges (history, lo, hi, hi_hash, below, lo_ts, hi_ts, tip_time)
		VALUES (?, 5, 29, ?, ?, ?, ?, 77)`, keyA, tipHash[:], below[:], int64(testTS(5)), int64(testTS(29))); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path)
	ids := map[string]int64{}
	for _, key := range []string{keyA, keyB} {
		var id int64
		if err := s.r.GetContext(ctx, &id, `SELECT id FROM histories WHERE key = ?`, key); err != nil {
			t.Fatalf("%s: history id after migration: %v", key, err)
		}
		ids[key] = id
		if got, err := s.CachedBlocks(ctx, key, 0, 30); err != nil || len(got) != 0 {
			t.Fatalf("%s after migration: %d blocks %v, want none", key, len(got), err)
		}
		if _, _, ok, err := s.BlockAt(ctx, key, 10); err != nil || ok {
			t.Fatalf("%s block 10 after migration: %v %v", key, ok, err)
		}
		if got, err := s.ByStamp(ctx, key, testStamp(10), 0, 29); err != nil || len(got) != 0 {
			t.Fatalf("%s by stamp after migration: %+v %v", key, got, err)
		}
		if _, _, ok, err := s.WindowBlocks(ctx, key, 0, 29, testTS(3), testTS(20)); err != nil || ok {
			t.Fatalf("%s window after migration: %v %v", key, ok, err)
		}
	}
	if _, ok, err := s.LoadRange(ctx, keyA); err != nil || ok {
		t.Fatalf("range after migration: %v %v, want none", ok, err)
	}
	if _, err := s.Tip(ctx, keyA); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tip after migration: %v, want ErrNotFound", err)
	}
	// Dropped rows contradict nothing: keyA's index 12 with another ts is
	// stored, where the old row would have been a conflict.
	if err := s.PutBlocks(ctx, keyA, []CachedBlock{blockAt(12, testTS(12)+1)}); err != nil {
		t.Fatalf("block over a dropped one: %v", err)
	}
	if err := s.PutBlocks(ctx, keyB, otherB); err != nil {
		t.Fatal(err)
	}
	// A history first cached after the migration gets an id of its own.
	keyC := reconcile.HistoryKey("0f0f0f0f0f0f0f0f", ledgerA, "")
	if err := s.PutBlocks(ctx, keyC, blocks(0, 3)); err != nil {
		t.Fatal(err)
	}
	for key, n := range map[string]int{keyA: 1, keyB: 15, keyC: 3} {
		if got, err := s.CachedBlocks(ctx, key, 0, 100); err != nil || len(got) != n {
			t.Fatalf("%s: %d blocks %v, want %d", key, len(got), err, n)
		}
	}
	for key, id := range ids {
		var now int64
		if err := s.r.GetContext(ctx, &now, `SELECT id FROM histories WHERE key = ?`, key); err != nil || now != id {
			t.Fatalf("%s: id %d after re-caching, was %d (%v)", key, now, id, err)
		}
	}
}

// Discard forgets a chain's blocks but keeps its history's id: blocks
// cached again under the key are stored and found, the discarded ones are
// neither found nor in the way.
func TestDiscardThenRecache(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.PutBlocks(ctx, ledgerA, blocks(0, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(ctx, ledgerA, reconciled.HistoryChange{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CachedBlocks(ctx, ledgerA, 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("after discard: %d %v", len(got), err)
	}
	// Another history: the same indexes with other timestamps, so hashes
	// differ and only a forgotten chain lets them in.
	var again []CachedBlock
	for i := uint64(0); i < 10; i++ {
		again = append(again, blockAt(i, testTS(i)+5))
	}
	if err := s.PutBlocks(ctx, ledgerA, again); err != nil {
		t.Fatalf("recache after discard: %v", err)
	}
	got, err := s.CachedBlocks(ctx, ledgerA, 0, 10)
	if err != nil || !reflect.DeepEqual(got, again) {
		t.Fatalf("recached: %d %v", len(got), err)
	}
	if h, _, ok, err := s.BlockAt(ctx, ledgerA, 3); err != nil || !ok || h != again[3].Hash {
		t.Fatalf("block 3 after recache: %s %v %v", h, ok, err)
	}
}

// Block cache writes commit at synchronous=NORMAL, and every other write
// finds the writer at FULL again, whether the cache write succeeded, failed
// or had its context cancelled before it committed.
func TestCacheWritesLeaveWriterAtFullSync(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	level := func(q sqlx.QueryerContext) int {
		t.Helper()
		var n int
		if err := sqlx.GetContext(ctx, q, &n, `PRAGMA synchronous`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var inside int
	if err := s.cacheTx(ctx, "probe", func(tx *Tx) error { inside = level(tx); return nil }); err != nil || inside != 1 {
		t.Fatalf("inside a cache write: synchronous %d %v, want 1 (NORMAL)", inside, err)
	}
	h := block(9).Hash
	writes := []struct {
		name string
		run  func() error
		ok   bool
	}{
		{"put", func() error { return s.PutBlocks(ctx, ledgerA, blocks(10, 20)) }, true},
		{"put verified", func() error { return s.PutVerified(ctx, ledgerA, parsedRange(t, 20, 30)) }, true},
		{"save range", func() error {
			return s.SaveRange(ctx, ledgerA, icrc3.VerifiedRange{Lo: 10, Hi: 29, HiHash: block(29).Hash, Below: &h})
		}, true},
		{"conflict", func() error { return s.PutBlocks(ctx, ledgerA, []CachedBlock{blockAt(12, testTS(12)+1)}) }, false},
		{"failing", func() error {
			return s.cacheTx(ctx, "failing", func(*Tx) error { return errors.New("refused") })
		}, false},
		{"cancelled", func() error {
			cctx, cancel := context.WithCancel(ctx)
			return s.cacheTx(cctx, "cancelled", func(*Tx) error { cancel(); return nil })
		}, false},
	}
	for _, w := range writes {
		if err := w.run(); (err == nil) != w.ok {
			t.Fatalf("%s: %v", w.name, err)
		}
		if n := level(s.w); n != 2 {
			t.Fatalf("after %s: writer at synchronous %d, want 2 (FULL)", w.name, n)
		}
	}
	if got, err := s.CachedBlocks(ctx, ledgerA, 0, 100); err != nil || len(got) != 20 {
		t.Fatalf("cached: %d %v", len(got), err)
	}
	if _, err := s.PutIntent(ctx, intent("after-cache", 1)); err != nil {
		t.Fatal(err)
	}
}
