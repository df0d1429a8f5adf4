package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/reconciled/reconciled"
)

// TestGroupCommitIsolatesFailures commits one group by hand: a write that
// fails, and one whose caller gave up, leave no trace and their callers
// alone see errors; the other writes, and the queued marks, commit in a
// single transaction.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.AppendDecided(ctx, verdict("g0", 1, reconciled.StatusNotYet), nil); err != nil {
		t.Fatal(err)
	}
	write := func(v reconciled.Verdict) func(context.Context, *Tx) error {
		return func(ctx context.Context, tx *Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (intent_id, seq) VALUES (?, ?)`, v.IntentID, int64(v.Seq)); err != nil {
				return err
			}
			if v.IntentID == "bad" {
				return errors.New("refused after writing")
			}
			return nil
		}
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	group := []*groupReq{
		{ctx: ctx, what: "ok1", fn: write(verdict("g0", 7, reconciled.StatusNotYet))},
		{ctx: ctx, what: "bad", fn: write(verdict("bad", 1, reconciled.StatusNotYet))},
		{ctx: gone, what: "gone", fn: write(verdict("gone", 1, reconciled.StatusNotYet))},
		{ctx: ctx, what: "ok2", fn: write(verdict("g0", 8, reconciled.StatusNotYet))},
	}
	// A queued mark rides in the group's commit, though a write of the
	// group fails (so the group runs twice).
	s.marks.marks = append(s.marks.marks, mark{"g0", 1})
	before := s.group.commits.Load()
	s.commitGroup(ctx, group)
	if group[0].err != nil || group[3].err != nil {
		t.Fatalf("good writes failed: %v, %v", group[0].err, group[3].err)
	}
	if group[1].err == nil || !errors.Is(group[2].err, context.Canceled) {
		t.Fatalf("bad write: %v; cancelled caller: %v", group[1].err, group[2].err)
	}
	if got := s.group.commits.Load() - before; got != 1 {
		t.Fatalf("%d commits for one group", got)
	}
	got := outboxOf(t, s)
	want := []OutboxEntry{{"g0", 7}, {"g0", 8}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outbox %v, want %v", got, want)
	}
}

// TestGroupCommitConcurrentVerdicts: many handlers storing and clearing
// verdicts at once (so groups form) each get their own outcome, and every
// write that succeeded is there.
func TestGroupCommitConcurrentVerdicts(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("c%d", i)
			if err := s.AppendDecided(ctx, verdict(id, 1, reconciled.StatusNotYet), nil); err != nil {
				errs[i] = err
				return
			}
			if i%2 == 0 {
				errs[i] = s.MarkPublishedNow(ctx, id, 1)
			}
			// A gap is refused for this caller only.
			if err := s.AppendDecided(ctx, verdict(id, 3, reconciled.StatusAbsent), nil); !errors.Is(err, ErrSeqGap) && errs[i] == nil {
				errs[i] = fmt.Errorf("gap: %v", err)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	for i := range n {
		vs, err := s.Verdicts(ctx, fmt.Sprintf("c%d", i))
		if err != nil || len(vs) != 1 {
			t.Fatalf("c%d: %d verdicts, %v", i, len(vs), err)
		}
	}
	if got := len(outboxOf(t, s)); got != n/2 {
		t.Fatalf("%d outbox rows, want %d", got, n/2)
	}
	if !s.group.q.Idle() {
		t.Fatal("group commit left running or with writes queued")
	}
}
