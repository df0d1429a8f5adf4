package reconcile_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

var soak = flag.Bool("soak", false, "TestSoakRetention runs 24 simulated hours at 10 intents/s (864,000 intents) instead of 3 at 1/s")

// soakDecider finds every intent at once, decided at the simulated time.
type soakDecider struct{ now func() time.Time }

func (d soakDecider) DecideMany(_ context.Context, ins []*matcher.Intent) ([]reconciled.Verdict, error) {
	out := make([]reconciled.Verdict, len(ins))
	for i, in := range ins {
		idx := reconciled.U64(1_000_000 + i)
		out[i] = reconciled.Verdict{IntentID: in.ID, Status: reconciled.StatusFound, Final: true,
			Block:     &reconciled.BlockRef{Index: idx, TS: 1791547201733000000, Hash: "ab12", Kind: "1xfer"},
			DecidedAt: d.now()}
	}
	return out, nil
}

// soakSink stands for the verdict stream: it accepts every verdict and
// keeps those of the last keep of simulated time, which a fresh pod's
// follower (starting at now - retention) would import.
type soakSink struct {
	mu   sync.Mutex
	keep time.Duration
	kept []reconciled.StreamedVerdict
}

func (s *soakSink) PublishVerdict(_ context.Context, v reconciled.Verdict, in reconciled.IntentHeader) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept = append(s.kept, reconciled.StreamedVerdict{Verdict: v, Intent: &in})
	if old := s.kept[0].Verdict.DecidedAt; v.DecidedAt.Sub(old) > s.keep+time.Minute {
		cut := 0
		for cut < len(s.kept) && v.DecidedAt.Sub(s.kept[cut].Verdict.DecidedAt) > s.keep {
			cut++
		}
		s.kept = append([]reconciled.StreamedVerdict(nil), s.kept[cut:]...)
	}
	return nil
}
func (s *soakSink) PublishReject(context.Context, string, string, string) error { return nil }
func (s *soakSink) LastVerdict(context.Context, string) (*reconciled.Verdict, error) {
	return nil, nil
}
func (s *soakSink) History(context.Context, string) ([]reconciled.StreamedVerdict, error) {
	return nil, nil
}

// fileAfterCheckpoint checkpoints the store's WAL into its file and
// returns the file's size and the rows of the per-intent tables.
func fileAfterCheckpoint(t *testing.T, path string) (int64, map[string]int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, table := range []string{"intents", "verdicts", "intent_keys"} {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		rows[table] = n
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size(), rows
}

// Retention keeps the store flat: intents arrive at a steady rate on a
// simulated clock, a prune round runs every 5 simulated minutes (as the
// daemon's does) with a retention of one simulated hour, and the file's
// size per simulated hour stops growing after the first. Then a fresh
// store imports what a follower started at now - retention would be
// handed: the last hour's verdicts.
func TestSoakRetention(t *testing.T) {
	hours, rate := 3, 1
	if *soak {
		hours, rate = 24, 10
	}
	const retention = time.Hour
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "soak.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	clock := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	sink := &soakSink{keep: retention}
	svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: soakDecider{now}, Store: st,
		Sink: sink, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	start, wall := clock, time.Now()
	const workers = 32
	n := 0
	type point struct {
		file int64
		rows map[string]int
	}
	var curve []point
	t.Logf("simulated %d h at %d intents/s, retention %v; per simulated hour, after a checkpoint:", hours, rate, retention)
	t.Logf("%4s %12s %9s %9s %11s %9s", "hour", "file bytes", "intents", "verdicts", "intent_keys", "pruned")
	for minute := 0; minute < hours*60; minute++ {
		mu.Lock()
		clock = start.Add(time.Duration(minute) * time.Minute)
		mu.Unlock()
		batch := 60 * rate
		ids := make(chan int, batch)
		for i := range batch {
			ids <- n + i
		}
		close(ids)
		n += batch
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := range ids {
					if o := svc.HandleIntent(ctx, intentBody(fmt.Sprintf("soak-%07d", i), 100+i)); o.Kind != reconciled.Ack {
						t.Errorf("intent %d: %+v", i, o)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if (minute+1)%5 == 0 {
			if _, err := st.PruneFinalsBefore(ctx, now().Add(time.Minute-retention), store.DefaultPruneBatch); err != nil {
				t.Fatal(err)
			}
		}
		if (minute+1)%60 == 0 {
			file, rows := fileAfterCheckpoint(t, path)
			curve = append(curve, point{file, rows})
			t.Logf("%4d %12d %9d %9d %11d %9d", (minute+1)/60, file, rows["intents"], rows["verdicts"], rows["intent_keys"], st.Pruned())
		}
	}
	t.Logf("%d intents in %v of wall time", n, time.Since(wall).Round(time.Second))
	// Flat after the first hour: the store holds about one retention's
	// worth, and pages freed by pruning are reused.
	steady := curve[1].file
	for h, p := range curve[1:] {
		if p.file > steady+steady/10 {
			t.Errorf("hour %d: file %d bytes, more than 10%% above hour 2's %d", h+2, p.file, steady)
		}
		if want := int(retention/time.Second) * rate; p.rows["intents"] > want+want/5 {
			t.Errorf("hour %d: %d intents stored, retention keeps about %d", h+2, p.rows["intents"], want)
		}
	}

	// A fresh pod: its follower starts at now - retention, so it imports
	// the last hour's verdicts only.
	sink.mu.Lock()
	kept := sink.kept
	sink.mu.Unlock()
	fpath := filepath.Join(t.TempDir(), "fresh.db")
	fresh, err := store.Open(ctx, fpath)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	fsvc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: soakDecider{now}, Store: fresh,
		Sink: &soakSink{keep: retention}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	wall = time.Now()
	for _, sv := range kept {
		if err := fsvc.ImportVerdict(ctx, sv.Verdict, sv.Intent); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(wall)
	file, rows := fileAfterCheckpoint(t, fpath)
	t.Logf("fresh pod: imported %d verdicts (the last %v of %d h) in %v (%.0f verdicts/s), store %d bytes, %d intents",
		len(kept), retention, hours, took.Round(time.Millisecond), float64(len(kept))/took.Seconds(), file, rows["intents"])
	if rows["intents"] != len(kept) {
		t.Fatalf("fresh store holds %d intents, imported %d", rows["intents"], len(kept))
	}
}
