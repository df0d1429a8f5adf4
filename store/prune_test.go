package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

// rowsOf counts the rows of every per-intent table that name id.
func rowsOf(t *testing.T, s *Store, id string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"intents", "intent_facts", "intent_keys", "verdicts", "watch", "outbox"} {
		var n int
		if err := s.r.GetContext(context.Background(), &n, "SELECT count(*) FROM "+table+" WHERE intent_id = ?", id); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

func decidedAt(v reconciled.Verdict, at time.Time) reconciled.Verdict {
	v.DecidedAt = at
	return v
}

func TestPruneFinalsKeepsOpenUnpublishedAndYoung(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	old := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	young := old.Add(48 * time.Hour)
	cutoff := old.Add(24 * time.Hour)

	// old-found: final long ago, published: pruned, every row of it.
	mustPut(t, s, intent("old-found", 1))
	if err := s.AppendVerdict(ctx, decidedAt(verdict("old-found", 1, reconciled.StatusNotYet), old.Add(-time.Hour)), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendVerdict(ctx, decidedAt(verdict("old-found", 2, reconciled.StatusFound), old), nil); err != nil {
		t.Fatal(err)
	}
	// old-unpublished: final long ago, its verdict still in the outbox.
	mustPut(t, s, intent("old-unpublished", 1))
	if err := s.AppendDecided(ctx, decidedAt(verdict("old-unpublished", 1, reconciled.StatusAbsent), old), nil); err != nil {
		t.Fatal(err)
	}
	// old-open: not final, decided long ago and still watched.
	mustPut(t, s, intent("old-open", 1))
	w := reconciled.Watch{IntentID: "old-open", CanisterID: ledgerA, NextCheck: young}
	if err := s.AppendVerdict(ctx, decidedAt(verdict("old-open", 1, reconciled.StatusNotYet), old), &w); err != nil {
		t.Fatal(err)
	}
	// young-found: final after the cutoff.
	mustPut(t, s, intent("young-found", 1))
	if err := s.AppendVerdict(ctx, decidedAt(verdict("young-found", 1, reconciled.StatusFound), young), nil); err != nil {
		t.Fatal(err)
	}
	// imported-found: known only from the stream (no body), final long ago.
	if err := s.AppendVerdict(ctx, decidedAt(verdict("imported-found", 1, reconciled.StatusFound), old), nil); err != nil {
		t.Fatal(err)
	}
	if n := rowsOf(t, s, "old-found")["intent_keys"]; n == 0 {
		t.Fatal("old-found has no search keys to prune")
	}

	// Batches of one: the round goes on until a batch falls short.
	r, err := s.PruneFinalsBefore(ctx, cutoff, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Intents != 2 || r.Batches != 2 || s.Pruned() != 2 {
		t.Fatalf("round %+v, Pruned %d; want 2 intents in 2 batches", r, s.Pruned())
	}
	for _, id := range []string{"old-found", "imported-found"} {
		for table, n := range rowsOf(t, s, id) {
			if n != 0 {
				t.Errorf("%s: %d rows left in %s", id, n, table)
			}
		}
		if _, err := s.LatestVerdict(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: LatestVerdict after prune: %v", id, err)
		}
	}
	for _, id := range []string{"old-unpublished", "old-open", "young-found"} {
		if got := rowsOf(t, s, id); got["intents"] != 1 || got["verdicts"] == 0 {
			t.Errorf("%s pruned: %v", id, got)
		}
	}
	// Once its verdict is published, the unpublished one goes too.
	if err := s.MarkPublishedNow(ctx, "old-unpublished", 1); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneFinals(ctx, cutoff, 0); err != nil || n != 1 {
		t.Fatalf("after publishing: pruned %d, %v", n, err)
	}
	var left int
	if err := s.r.GetContext(ctx, &left, `SELECT count(*) FROM intents`); err != nil || left != 2 {
		t.Fatalf("%d intents left, %v; want old-open and young-found", left, err)
	}
	// A pruned id may be stored afresh (a re-published intent).
	mustPut(t, s, intent("old-found", 1))
}

// The prune's deletes of intent_keys use the index by intent, not a scan
// of the table keyed by term.
func TestPruneUsesIntentKeysIndex(t *testing.T) {
	s := openTest(t)
	var plan []struct {
		ID     int    `db:"id"`
		Parent int    `db:"parent"`
		NotU   int    `db:"notused"`
		Detail string `db:"detail"`
	}
	if err := s.r.SelectContext(context.Background(), &plan, `EXPLAIN QUERY PLAN DELETE FROM intent_keys WHERE intent_id IN (?, ?)`, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if len(plan) == 0 || !strings.Contains(plan[0].Detail, "intent_keys_by_intent") {
		t.Fatalf("plan %+v, want a search of intent_keys_by_intent", plan)
	}
}
