package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

// The stream's body and verdicts take the place of what the store holds
// under the id, in one transaction: intent, verdicts, outbox rows, watch
// entry and search keys of the other body go; first_seen stays.
func TestReplaceIntentTakesTheStreamsRecord(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	mine := intent("rp-1", 2)
	mine.FirstSeen = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	mustPut(t, s, mine)
	due := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	if err := s.AppendDecided(ctx, verdict("rp-1", 1, reconciled.StatusUnreadable),
		&reconciled.Watch{IntentID: "rp-1", CanisterID: ledgerA, NextCheck: due, Attempts: 3}); err != nil {
		t.Fatal(err)
	}
	theirs := intent("rp-1", 1)
	vs := []reconciled.Verdict{verdict("rp-1", 1, reconciled.StatusNotYet), verdict("rp-1", 3, reconciled.StatusNotYet)}
	w := &reconciled.Watch{IntentID: "rp-1", CanisterID: ledgerA, NextCheck: due}
	if err := s.ReplaceIntent(ctx, theirs, vs, w); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Intent(ctx, "rp-1")
	if err != nil || rec.Hash != theirs.Hash || !rec.FirstSeen.Equal(mine.FirstSeen) {
		t.Fatalf("intent %+v %v, want the stream's body first seen when the store first saw the id", rec, err)
	}
	got, err := s.Verdicts(ctx, "rp-1")
	if err != nil || len(got) != 2 || got[0].Status != reconciled.StatusNotYet || got[1].Seq != 3 {
		t.Fatalf("verdicts %+v %v, want the stream's [1 3]", got, err)
	}
	if es := outboxOf(t, s); len(es) != 0 {
		t.Fatalf("outbox %+v", es)
	}
	we, err := s.WatchOf(ctx, "rp-1")
	if err != nil || we.Attempts != 0 || we.LastStatus != reconciled.StatusNotYet {
		t.Fatalf("watch %+v %v, want the new entry", we, err)
	}
	if r, err := s.PutIntent(ctx, mine); err != nil || r != reconciled.PutConflict {
		t.Fatalf("the replaced body again: %v %v, want a conflict", r, err)
	}
	// A final last verdict leaves the intent unwatched.
	fin := append(vs, verdict("rp-1", 4, reconciled.StatusAbsent))
	if err := s.ReplaceIntent(ctx, theirs, fin, w); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WatchOf(ctx, "rp-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("watch of a final intent: %v", err)
	}
}

// A streamed verdict after seqs the stream does not hold is stored after
// the same gap; AppendVerdict still refuses one.
func TestAppendAfterGap(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	mustPut(t, s, intent("ag-1", 1))
	if err := s.AppendVerdict(ctx, verdict("ag-1", 1, reconciled.StatusNotYet), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendVerdict(ctx, verdict("ag-1", 3, reconciled.StatusAbsent), nil); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("AppendVerdict across a gap: %v", err)
	}
	if err := s.AppendAfterGap(ctx, verdict("ag-1", 3, reconciled.StatusAbsent), nil); err != nil {
		t.Fatal(err)
	}
	if v, err := s.LatestVerdict(ctx, "ag-1"); err != nil || v.Seq != 3 || !v.Final {
		t.Fatalf("latest %+v %v", v, err)
	}
	if err := s.AppendAfterGap(ctx, verdict("ag-1", 5, reconciled.StatusFound), nil); !errors.Is(err, ErrFinal) {
		t.Fatalf("after final: %v", err)
	}
}

// UnpublishedBefore sees the outbox rows below a seq only.
func TestUnpublishedBefore(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	mustPut(t, s, intent("ub-1", 1))
	for seq := uint64(1); seq <= 2; seq++ {
		if err := s.AppendDecided(ctx, verdict("ub-1", seq, reconciled.StatusNotYet), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MarkPublishedNow(ctx, "ub-1", 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		seq  uint64
		want bool
	}{{2, false}, {3, true}} {
		if got, err := s.UnpublishedBefore(ctx, "ub-1", c.seq); err != nil || got != c.want {
			t.Fatalf("before %d: %v %v, want %v", c.seq, got, err, c.want)
		}
	}
}
