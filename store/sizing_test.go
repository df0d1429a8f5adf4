package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

// Sizing: what an intent costs on disk, measured on intents shaped like
// production's (an icrc1_transfer with a memo, decided not_yet then found
// with a near miss, as a follow-up decides most). `go test ./store -run
// TestSizing -v` prints the figures docs/sizing.md quotes.

// sizingIntent is intent n of a run, decided first at at.
func sizingIntent(n int) reconciled.IntentRecord {
	id := fmt.Sprintf("pay-%08d-%s", n, strings.Repeat("x", 16))
	body := fmt.Sprintf(`{"intent_id":%q,"canister_id":%q,"method":"icrc1_transfer","caller":"2vxsx-fae",`+
		`"args":{"to":"aaaaa-aa","amount":"%d","memo":"%x","created_at_time":"%d"},"after":"unknown"}`,
		id, ledgerA, 100000+n, fmt.Sprintf("order-%08d", n), 1791547201000000000+uint64(n)*1000)
	return reconciled.IntentRecord{IntentID: id, CanisterID: ledgerA, Caller: "2vxsx-fae", Method: "icrc1_transfer",
		Body: json.RawMessage(body), Hash: sha256.Sum256([]byte(body))}
}

// putSized stores intent n as the service does: the intent with its first
// verdict (not_yet, watched), then its final one, each published.
func putSized(ctx context.Context, s *Store, n int, at time.Time) error {
	rec := sizingIntent(n)
	v1 := verdict(rec.IntentID, 1, reconciled.StatusNotYet)
	v1.DecidedAt = at
	w := &reconciled.Watch{IntentID: rec.IntentID, CanisterID: ledgerA, NextCheck: at.Add(5 * time.Second)}
	if _, err := s.PutIntentDecided(ctx, rec, v1, w); err != nil {
		return err
	}
	if err := s.MarkPublishedNow(ctx, rec.IntentID, 1); err != nil {
		return err
	}
	v2 := verdict(rec.IntentID, 2, reconciled.StatusFound)
	v2.Block.Index = reconciled.U64(1_000_000 + n)
	v2.DecidedAt = at.Add(10 * time.Second)
	if err := s.AppendDecided(ctx, v2, nil); err != nil {
		return err
	}
	return s.MarkPublishedNow(ctx, rec.IntentID, 2)
}

// putSizedRange stores intents [from, to), decided at at(n), with a few
// writers at once so that group commit shares their commits.
func putSizedRange(ctx context.Context, s *Store, from, to int, at func(int) time.Time) error {
	const writers = 32
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for n := from + w; n < to; n += writers {
				if err := putSized(ctx, s, n, at(n)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// storeSize is the database file's size after a checkpoint that empties
// the WAL, and the bytes of each table and index (dbstat).
func storeSize(t testing.TB, s *Store) (file int64, byTable map[string]int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Name  string `db:"name"`
		Bytes int64  `db:"bytes"`
	}
	if err := s.r.SelectContext(ctx, &rows, `SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name`); err != nil {
		t.Fatal(err)
	}
	byTable = map[string]int64{}
	for _, r := range rows {
		byTable[r.Name] = r.Bytes
	}
	return fi.Size(), byTable
}

func rowCount(t testing.TB, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.r.GetContext(context.Background(), &n, "SELECT count(*) FROM "+table); err != nil {
		t.Fatal(err)
	}
	return n
}

// perIntentTables are the tables and indexes that grow with intents.
var perIntentTables = []string{"intents", "sqlite_autoindex_intents_1", "intents_by_first_seen", "intents_by_canister",
	"intents_by_caller", "intents_by_status", "intent_facts", "sqlite_autoindex_intent_facts_1",
	"intent_facts_by_stamp", "intent_facts_by_decided", "intent_keys", "intent_keys_by_intent", "verdicts", "watch",
	"sqlite_autoindex_watch_1", "watch_due", "outbox"}

func TestSizing(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	const n = 4000
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	empty, _ := storeSize(t, s)
	if err := putSizedRange(ctx, s, 0, n, func(i int) time.Time { return at.Add(time.Duration(i) * 100 * time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	file, by := storeSize(t, s)
	var names []string
	var sum int64
	for _, name := range perIntentTables {
		if by[name] > 0 {
			names = append(names, name)
			sum += by[name]
		}
	}
	sort.Slice(names, func(i, j int) bool { return by[names[i]] > by[names[j]] })
	t.Logf("%d intents (2 verdicts each, final found): file %d bytes after checkpoint (%d empty), %.0f bytes/intent",
		n, file, empty, float64(file-empty)/n)
	for _, name := range names {
		t.Logf("  %-32s %9d bytes  %6.0f bytes/intent", name, by[name], float64(by[name])/n)
	}
	t.Logf("  %-32s %9d bytes  %6.0f bytes/intent", "sum of per-intent tables", sum, float64(sum)/n)
	// The tables named are the file's growth: the rest is the schema's
	// pages and the free list.
	if sum < (file-empty)*9/10 || sum > file {
		t.Fatalf("per-intent tables hold %d bytes of a file grown by %d: a growing table is missing from the list", sum, file-empty)
	}

	// Pruning all of them leaves the per-intent tables empty, and a
	// second fill of the same size reuses the freed pages.
	r, err := s.PruneFinalsBefore(ctx, at.Add(24*time.Hour), 0)
	if err != nil || r.Intents != n {
		t.Fatalf("pruned %+v, %v; want all %d", r, err, n)
	}
	for _, table := range []string{"intents", "intent_facts", "intent_keys", "verdicts", "watch", "outbox"} {
		if c := rowCount(t, s, table); c != 0 {
			t.Fatalf("%s holds %d rows after pruning every intent", table, c)
		}
	}
	if err := putSizedRange(ctx, s, n, 2*n, func(i int) time.Time { return at.Add(48 * time.Hour) }); err != nil {
		t.Fatal(err)
	}
	again, _ := storeSize(t, s)
	t.Logf("after pruning all and storing %d others: file %d bytes (was %d), prune took %v in %d batches", n, again, file, r.Took, r.Batches)
	if again > file+file/10 {
		t.Fatalf("file grew from %d to %d bytes for as many intents after pruning: freed pages are not reused", file, again)
	}
}

// The block cache's bytes per cached block, for blocks of the test
// ledger's shape (a transfer with short accounts and a created_at_time;
// mainnet blocks carry 29-byte principals and weigh more, see
// docs/sizing.md).
func TestSizingBlockCache(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	const n = 20000
	empty, _ := storeSize(t, s)
	var raw int64
	for from := uint64(0); from < n; from += 2000 {
		page := parsedRange(t, from, from+2000)
		for _, b := range page {
			raw += int64(len(b.Raw))
		}
		if err := s.PutVerified(ctx, ledgerA, page); err != nil {
			t.Fatal(err)
		}
	}
	file, by := storeSize(t, s)
	var sum int64
	for _, name := range []string{"block_runs", "sqlite_autoindex_block_runs_1", "block_runs_by_ts", "block_stamps"} {
		sum += by[name]
		t.Logf("  %-32s %9d bytes  %5.0f bytes/block", name, by[name], float64(by[name])/n)
	}
	t.Logf("%d blocks (Values %.0f bytes each): block cache %d bytes, %.0f bytes/block; file grew %d", n, float64(raw)/n, sum, float64(sum)/n, file-empty)
	if sum == 0 || sum > file {
		t.Fatalf("block cache tables %d bytes of a file grown by %d", sum, file-empty)
	}
}
