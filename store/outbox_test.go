package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/internal/testutil"
)

func outboxOf(t *testing.T, s *Store) []OutboxEntry {
	t.Helper()
	es, err := s.Outbox(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestOutboxRecordsDecidedVerdictsOnly(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	mustPut(t, s, intent("o1", 1))
	mustPut(t, s, intent("o2", 1))
	due := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	w := &reconciled.Watch{IntentID: "o1", CanisterID: ledgerA, NextCheck: due}

	if err := s.AppendDecided(ctx, verdict("o1", 1, reconciled.StatusNotYet), w); err != nil {
		t.Fatal(err)
	}
	// Imported from the stream: the stream holds it already.
	if err := s.AppendVerdict(ctx, verdict("o2", 1, reconciled.StatusNotYet), nil); err != nil {
		t.Fatal(err)
	}
	if got, want := outboxOf(t, s), []OutboxEntry{{"o1", 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox %+v, want %+v", got, want)
	}
	// The watch rules are AppendVerdict's, and the caller's entry is
	// not written to.
	ws, err := s.Watches(ctx)
	if err != nil || len(ws) != 1 || ws[0].IntentID != "o1" || ws[0].LastStatus != reconciled.StatusNotYet || !ws[0].NextCheck.Equal(due) {
		t.Fatalf("watches %+v %v", ws, err)
	}
	if w.LastStatus != "" {
		t.Fatalf("AppendDecided changed its argument: %+v", w)
	}

	// Refused appends leave no row: the verdict and its row are one
	// transaction.
	if err := s.AppendDecided(ctx, verdict("o1", 3, reconciled.StatusAbsent), nil); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("gap: %v", err)
	}
	if err := s.AppendDecided(ctx, verdict("o1", 1, reconciled.StatusUnreadable), nil); !errors.Is(err, ErrSeqConflict) {
		t.Fatalf("conflict: %v", err)
	}
	if err := s.AppendDecided(ctx, verdict("o2", 2, reconciled.StatusNotYet), &reconciled.Watch{IntentID: "o1", CanisterID: ledgerA, NextCheck: due}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("watch of another intent: %v", err)
	}
	if got := outboxOf(t, s); len(got) != 1 {
		t.Fatalf("a refused append changed the outbox: %+v", got)
	}
	// Re-appending the stored verdict (it came back from the stream) adds
	// nothing.
	if err := s.AppendDecided(ctx, verdict("o2", 1, reconciled.StatusNotYet), nil); err != nil {
		t.Fatal(err)
	}
	if got := outboxOf(t, s); len(got) != 1 {
		t.Fatalf("an identical re-append was recorded: %+v", got)
	}

	// A final decided verdict ends the watch and is recorded in the same
	// transaction.
	if err := s.AppendDecided(ctx, verdict("o1", 2, reconciled.StatusAbsent), w); err != nil {
		t.Fatal(err)
	}
	if ws, _ := s.Watches(ctx); len(ws) != 0 {
		t.Fatalf("final intent still watched: %+v", ws)
	}
	if err := s.AppendDecided(ctx, verdict("o1", 3, reconciled.StatusFound), nil); !errors.Is(err, ErrFinal) {
		t.Fatalf("after final: %v", err)
	}
	if err := s.AppendDecided(ctx, verdict("o2", 2, reconciled.StatusFound), nil); err != nil {
		t.Fatal(err)
	}
	if got, want := outboxOf(t, s), []OutboxEntry{{"o1", 1}, {"o1", 2}, {"o2", 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox %+v, want %+v", got, want)
	}
}

func TestMarkPublishedClearsUpToSeq(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	mustPut(t, s, intent("m1", 1))
	mustPut(t, s, intent("m2", 1))
	for seq, st := range []reconciled.Status{reconciled.StatusNotYet, reconciled.StatusUnreadable, reconciled.StatusNotYet} {
		if err := s.AppendDecided(ctx, verdict("m1", uint64(seq+1), st), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendDecided(ctx, verdict("m2", 1, reconciled.StatusNotYet), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkPublishedNow(ctx, "m1", 2); err != nil {
		t.Fatal(err)
	}
	if got, want := outboxOf(t, s), []OutboxEntry{{"m1", 3}, {"m2", 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox %+v, want %+v", got, want)
	}
	// Marking again, or an intent without rows, is not an error; a seq
	// beyond what the store can hold clears everything of the intent.
	for _, id := range []string{"m1", "nothing"} {
		if err := s.MarkPublishedNow(ctx, id, 2); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if err := s.MarkPublishedNow(ctx, "m1", 1<<64-1); err != nil {
		t.Fatal(err)
	}
	if got, want := outboxOf(t, s), []OutboxEntry{{"m2", 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox %+v, want %+v", got, want)
	}
}

// The outbox survives a reopen: it is what a restarted process reads.
func TestOutboxSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "recon.db")
	s, err := OpenWith(ctx, path, Options{Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, intent("r1", 1))
	if err := s.AppendDecided(ctx, verdict("r1", 1, reconciled.StatusFound), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	if got, want := outboxOf(t, s), []OutboxEntry{{"r1", 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox after reopen %+v, want %+v", got, want)
	}
}

// A database written before the outbox existed gets the latest verdict of
// each watched intent queued, which is what a restart used to re-publish.
func TestOutboxMigrationSeedsWatchedIntents(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	ms, err := loadMigrations()
	if err != nil || len(ms) < 2 || ms[1].name != "0002_outbox.sql" {
		t.Fatalf("migrations %v %v", len(ms), err)
	}
	// Rebuild the file as version 1 left it.
	if _, err := s.w.ExecContext(ctx, `DROP TABLE outbox; DELETE FROM schema_version WHERE version >= 2`); err != nil {
		t.Fatal(err)
	}
	due := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	for _, id := range []string{"s1", "s2", "s3"} {
		mustPut(t, s, intent(id, 1))
	}
	// s1: watched at seq 2; s2: final, unwatched; s3: no verdict yet.
	if err := s.AppendVerdict(ctx, verdict("s1", 1, reconciled.StatusNotYet), &reconciled.Watch{IntentID: "s1", CanisterID: ledgerA, NextCheck: due}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendVerdict(ctx, verdict("s1", 2, reconciled.StatusUnreadable), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendVerdict(ctx, verdict("s2", 1, reconciled.StatusFound), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Watch(ctx, reconciled.Watch{IntentID: "s3", CanisterID: ledgerA, NextCheck: due}); err != nil {
		t.Fatal(err)
	}
	if err := s.applyMigrations(ctx, ms[:2]); err != nil {
		t.Fatal(err)
	}
	if got, want := outboxOf(t, s), []OutboxEntry{{"s1", 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("seeded outbox %+v, want %+v", got, want)
	}
}

// The cost the outbox adds to a decided verdict: one row in the same
// commit, and its deletion once published (a commit of its own).
func BenchmarkAppendDecidedAndMark(b *testing.B) {
	ctx := context.Background()
	s := openTestB(b)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		id := fmt.Sprintf("b%d", n)
		n++
		if err := s.AppendDecided(ctx, verdict(id, 1, reconciled.StatusFound), nil); err != nil {
			b.Fatal(err)
		}
		if err := s.MarkPublishedNow(ctx, id, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// An intent met for the first time is stored with its first verdict and
// the verdict's outbox row in one commit; another body under a stored id
// writes nothing, and a refused verdict leaves no intent behind either.
func TestPutIntentDecidedIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	due := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	before := s.group.commits.Load()
	res, err := s.PutIntentDecided(ctx, intent("d1", 1), verdict("d1", 1, reconciled.StatusNotYet),
		&reconciled.Watch{IntentID: "d1", CanisterID: ledgerA, NextCheck: due})
	if err != nil || res != reconciled.PutCreated {
		t.Fatalf("first: %v %v", res, err)
	}
	if n := s.group.commits.Load() - before; n != 1 {
		t.Fatalf("%d commits, want 1", n)
	}
	if got, want := outboxOf(t, s), []OutboxEntry{{"d1", 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox %+v, want %+v", got, want)
	}
	if v, err := s.LatestVerdict(ctx, "d1"); err != nil || v.Seq != 1 || v.Status != reconciled.StatusNotYet {
		t.Fatalf("latest %+v %v", v, err)
	}
	if ws, err := s.Watches(ctx); err != nil || len(ws) != 1 || ws[0].IntentID != "d1" {
		t.Fatalf("watches %+v %v", ws, err)
	}

	// Another body, with a later verdict or a first one: nothing changes.
	res, err = s.PutIntentDecided(ctx, intent("d1", 2), verdict("d1", 2, reconciled.StatusAbsent), nil)
	if err != nil || res != reconciled.PutConflict {
		t.Fatalf("other body: %v %v, want conflict", res, err)
	}
	res, err = s.PutIntentDecided(ctx, intent("d1", 2), verdict("d1", 1, reconciled.StatusAbsent), nil)
	if err != nil || res != reconciled.PutConflict {
		t.Fatalf("other body, first verdict: %v %v, want conflict", res, err)
	}
	if v, err := s.LatestVerdict(ctx, "d1"); err != nil || v.Seq != 1 {
		t.Fatalf("latest after conflict %+v %v", v, err)
	}
	if got, want := outboxOf(t, s), []OutboxEntry{{"d1", 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox after conflict %+v, want %+v", got, want)
	}

	// The same body stored before, without verdicts (an instance that
	// stopped before deciding): the verdict is appended.
	mustPut(t, s, intent("d2", 1))
	if res, err := s.PutIntentDecided(ctx, intent("d2", 1), verdict("d2", 1, reconciled.StatusAbsent), nil); err != nil || res != reconciled.PutExisting {
		t.Fatalf("stored before: %v %v", res, err)
	}

	// A verdict the history refuses rolls the intent back with it.
	if _, err := s.PutIntentDecided(ctx, intent("d3", 1), verdict("d3", 2, reconciled.StatusAbsent), nil); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("gap: %v", err)
	}
	if _, err := s.Intent(ctx, "d3"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("intent of a refused verdict: %v", err)
	}
	if _, err := s.PutIntentDecided(ctx, intent("d4", 1), verdict("d5", 1, reconciled.StatusAbsent), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("verdict of another intent: %v", err)
	}
}

// BenchmarkBurstWrites is a burst's store work per intent as the service
// does it: 32 intents at a time each stored with its first verdict, then
// marked published (queued), the writes of concurrent callers sharing
// commits. It
// reports process CPU per intent, the figure a burst on two cores is
// bounded by.
func BenchmarkBurstWrites(b *testing.B) {
	ctx := context.Background()
	s := openTestB(b)
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16) // 32 callers on 2 CPUs
	cpu0 := testutil.CPUTime(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("burst-%d", next.Add(1))
			body := fmt.Sprintf(`{"intent_id":%q,"canister_id":"mxzaz-hqaaa-aaaar-qaada-cai","method":"icrc1_transfer","caller":"k2t6j-2nvnp-4zjm3-25dtz-6xhaa-c7boj-5gayf-oj3xs-i43lp-teztq-6ae","args":{"to":"2vxsx-fae","amount":"150000000","memo":"6c756e6368","created_at_time":"1791547201000000000"},"after":"Err.TooOld"}`, id)
			rec := reconciled.IntentRecord{IntentID: id, CanisterID: ledgerA, Caller: "k2t6j-2nvnp-4zjm3-25dtz-6xhaa-c7boj-5gayf-oj3xs-i43lp-teztq-6ae",
				Method: "icrc1_transfer", Body: json.RawMessage(body), Hash: sha256.Sum256([]byte(body))}
			v := verdict(id, 1, reconciled.StatusNotYet)
			w := &reconciled.Watch{IntentID: id, CanisterID: ledgerA, NextCheck: time.Unix(1791547201, 0)}
			if _, err := s.PutIntentDecided(ctx, rec, v, w); err != nil {
				b.Error(err)
				return
			}
			s.MarkPublishedLater(id, 1)
		}
	})
	b.ReportMetric(float64((testutil.CPUTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/intent")
}

// An intent met for the first time and stored with its first verdict
// leaves the rows that storing it and then appending the verdict leaves:
// the intent's status and seq, its search keys and facts, the verdict, its
// outbox row and its watch entry.
func TestPutIntentDecidedWritesWhatPutAndAppendWrite(t *testing.T) {
	ctx := context.Background()
	clock := func() time.Time { return time.Date(2026, 11, 29, 15, 30, 0, 0, time.UTC) }
	due := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	one, two := openTest(t), openTest(t)
	one.now, two.now = clock, clock
	body := `{"intent_id":"%s","canister_id":"mxzaz-hqaaa-aaaar-qaada-cai","method":"icrc1_transfer","caller":"2vxsx-fae","args":{"to":"2vxsx-fae","amount":"150000000","memo":"6c756e6368","created_at_time":"1791547201000000000"}}`
	for _, c := range []struct {
		id    string
		st    reconciled.Status
		watch bool
	}{{"f1", reconciled.StatusFound, false}, {"n1", reconciled.StatusNotYet, true}, {"n2", reconciled.StatusNotYet, false},
		{"a1", reconciled.StatusAbsent, false}, {"u1", reconciled.StatusUnreadable, true}} {
		b := fmt.Sprintf(body, c.id)
		rec := reconciled.IntentRecord{IntentID: c.id, CanisterID: ledgerA, Caller: "2vxsx-fae", Method: "icrc1_transfer",
			Body: json.RawMessage(b), Hash: sha256.Sum256([]byte(b)), FirstSeen: clock()}
		v := verdict(c.id, 1, c.st)
		var w *reconciled.Watch
		if c.watch {
			w = &reconciled.Watch{IntentID: c.id, CanisterID: ledgerA, NextCheck: due}
		}
		if res, err := one.PutIntentDecided(ctx, rec, v, w); err != nil || res != reconciled.PutCreated {
			t.Fatalf("%s: %v %v", c.id, res, err)
		}
		mustPut(t, two, rec)
		if err := two.AppendDecided(ctx, v, w); err != nil {
			t.Fatalf("%s: append: %v", c.id, err)
		}
	}
	for _, q := range []string{
		`SELECT intent_id, canister_id, caller, method, body, hex(canonical_hash), first_seen, status, final, latest_seq, updated_at FROM intents ORDER BY intent_id`,
		`SELECT term, intent_id, role FROM intent_keys ORDER BY term, intent_id, role`,
		`SELECT intent_id, stamp, decided_at, indexed FROM intent_facts ORDER BY intent_id`,
		`SELECT intent_id, seq, status, final, json, decided_at FROM verdicts ORDER BY intent_id, seq`,
		`SELECT intent_id, seq FROM outbox ORDER BY intent_id, seq`,
		`SELECT intent_id, canister_id, next_check, attempts, window_to_ts, last_status FROM watch ORDER BY intent_id`,
	} {
		got, want := dumpRows(t, one, q), dumpRows(t, two, q)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", q, got, want)
		}
		if len(want) == 0 {
			t.Errorf("%s: no rows to compare", q)
		}
	}
}

// dumpRows is every row q reads, each as its columns' text.
func dumpRows(t *testing.T, s *Store, q string) [][]string {
	t.Helper()
	rows, err := s.r.Queryx(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		cols, err := rows.SliceScan()
		if err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, c := range cols {
			row[i] = fmt.Sprintf("%v", c)
			if b, ok := c.([]byte); ok {
				row[i] = string(b)
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
