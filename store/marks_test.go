package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reconciled/reconciled"
)

// outboxRows reads the outbox table as it is committed, without applying
// queued marks first (as Outbox does).
func outboxRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.r.GetContext(context.Background(), &n, `SELECT COUNT(*) FROM outbox`); err != nil {
		t.Fatal(err)
	}
	return n
}

// A queued mark rides in the next group commit: no commit of its own.
func TestMarkPublishedLaterRidesInNextCommit(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.AppendDecided(ctx, verdict("l1", 1, reconciled.StatusFound), nil); err != nil {
		t.Fatal(err)
	}
	before := s.group.commits.Load()
	s.MarkPublishedLater("l1", 1)
	if err := s.AppendDecided(ctx, verdict("l2", 1, reconciled.StatusFound), nil); err != nil {
		t.Fatal(err)
	}
	if n := s.group.commits.Load() - before; n != 1 {
		t.Fatalf("%d commits for a write and a queued mark, want 1", n)
	}
	if n := outboxRows(t, s); n != 1 {
		t.Fatalf("%d outbox rows, want l2's only", n)
	}
}

// Without other writes a queued mark is committed within markDelay.
func TestMarkPublishedLaterCommitsOnItsOwn(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.AppendDecided(ctx, verdict("l1", 1, reconciled.StatusFound), nil); err != nil {
		t.Fatal(err)
	}
	s.MarkPublishedLater("l1", 1)
	deadline := time.Now().Add(10 * time.Second)
	for outboxRows(t, s) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("queued mark never committed")
		}
		time.Sleep(time.Millisecond)
	}
}

// Reads of the outbox see queued marks, and Close commits them.
func TestMarkPublishedLaterSeenByOutboxAndClose(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c1", "c2"} {
		if err := s.AppendDecided(ctx, verdict(id, 1, reconciled.StatusFound), nil); err != nil {
			t.Fatal(err)
		}
	}
	s.MarkPublishedLater("c1", 1)
	if es, err := s.Outbox(ctx); err != nil || len(es) != 1 || es[0].IntentID != "c2" {
		t.Fatalf("outbox %+v %v, want c2 only", es, err)
	}
	s.MarkPublishedLater("c2", 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.MarkPublishedLater("c2", 1) // after Close: ignored, not a panic
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := outboxRows(t, s); n != 0 {
		t.Fatalf("%d outbox rows after Close, want 0", n)
	}
}

// A timer's flush that fails (the database is locked by another process
// past the busy timeout) leaves its marks queued, and the next mark arms a
// new timer that commits them all.
func TestMarkPublishedLaterAfterAFailedFlush(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	s, err := OpenWith(ctx, path, Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"f1", "f2"} {
		if err := s.AppendDecided(ctx, verdict(id, 1, reconciled.StatusFound), nil); err != nil {
			t.Fatal(err)
		}
	}
	other, err := sqlx.Open("sqlite", dsn(path, 50*time.Millisecond, true))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetMaxOpenConns(1)
	lock, err := other.BeginTxx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, `INSERT INTO probe (id, at) VALUES (1, 0) ON CONFLICT (id) DO UPDATE SET at = 0`); err != nil {
		t.Fatal(err)
	}
	s.MarkPublishedLater("f1", 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.marks.mu.Lock()
		tried := s.marks.tried
		s.marks.mu.Unlock()
		if tried > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the timer's flush never ran")
		}
		time.Sleep(time.Millisecond)
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := outboxRows(t, s); n != 2 {
		t.Fatalf("%d outbox rows after the failed flush, want 2", n)
	}
	s.MarkPublishedLater("f2", 1)
	for outboxRows(t, s) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("queued marks never committed after the failed flush")
		}
		time.Sleep(time.Millisecond)
	}
}
