package store

import (
	"context"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

// A memo is found by its text in any case, in a new store and in one
// written before memos were indexed folded (migration 0012); the folding
// in SQL and in Go agree on bytes beyond ASCII.
func TestMemoFoldedSearch(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "recon.db")
	s := openAt(t, path)
	mustPut(t, s, payment(t, "upper", "1", "ORDER-7", searchStamp))
	mustPut(t, s, payment(t, "mixed", "2", "Order-8 \u00dcber\xff", searchStamp))
	want := func(when string) {
		t.Helper()
		for q, id := range map[string]string{"order-7": "upper", "oRdEr-7": "upper", "ORDER-8 \u00dc": "mixed", "order-8 \u00dcber\xff": "mixed"} {
			got := searchIDs(t, s, ListFilter{Keys: []Key{MemoFoldKey(q)}})
			if len(got) != 1 || got[id] == nil {
				t.Errorf("%s: memo %q found %v, want %s", when, q, got, id)
			}
		}
		if got := searchIDs(t, s, ListFilter{Keys: []Key{MemoFoldKey("order-9")}}); len(got) != 0 {
			t.Errorf("%s: order-9 found %v", when, got)
		}
	}
	want("new store")
	var terms []string
	if err := s.r.SelectContext(ctx, &terms, `SELECT term FROM intent_keys WHERE term >= 'mf:' AND term < 'mf;' ORDER BY term`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM intent_keys WHERE term >= 'mf:' AND term < 'mf;';
		DELETE FROM schema_version WHERE version = 12`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	want("migrated store")
	var again []string
	if err := s.r.SelectContext(ctx, &again, `SELECT term FROM intent_keys WHERE term >= 'mf:' AND term < 'mf;' ORDER BY term`); err != nil {
		t.Fatal(err)
	}
	if len(terms) != 2 || len(again) != 2 || terms[0] != again[0] || terms[1] != again[1] {
		t.Errorf("folded terms written %q, backfilled %q", terms, again)
	}
	if got, want := MemoFoldKey("ORDER-7").Term, "mf:"+hex.EncodeToString([]byte("order-7")); got != want {
		t.Errorf("MemoFoldKey: %s, want %s", got, want)
	}
}

// RecordChecks keeps the latest check time of watched intents only, and a
// watch rescheduled keeps it.
func TestRecordChecks(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	for _, id := range []string{"w-1", "w-2"} {
		mustPut(t, s, payment(t, id, "1", id, searchStamp))
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := s.Watch(ctx, reconciled.Watch{IntentID: "w-1", CanisterID: ledgerA, NextCheck: t0}); err != nil {
		t.Fatal(err)
	}
	checked := func() time.Time {
		t.Helper()
		w, err := s.WatchOf(ctx, "w-1")
		if err != nil {
			t.Fatal(err)
		}
		return w.CheckedAt
	}
	if c := checked(); !c.IsZero() {
		t.Fatalf("never checked, yet checked at %v", c)
	}
	if err := s.RecordChecks(ctx, []string{"w-1", "w-2"}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordChecks(ctx, []string{"w-1"}, t0); err != nil {
		t.Fatal(err)
	}
	if c := checked(); !c.Equal(t0.Add(time.Minute)) {
		t.Errorf("checked at %v, want the later %v", c, t0.Add(time.Minute))
	}
	if _, err := s.WatchOf(ctx, "w-2"); err == nil {
		t.Error("a check of an unwatched intent made a watch")
	}
	if err := s.Watch(ctx, reconciled.Watch{IntentID: "w-1", CanisterID: ledgerA, NextCheck: t0.Add(time.Hour), Attempts: 2,
		LastStatus: reconciled.StatusUnreadable}); err != nil {
		t.Fatal(err)
	}
	if c := checked(); !c.Equal(t0.Add(time.Minute)) {
		t.Errorf("after rescheduling, checked at %v", c)
	}
}
