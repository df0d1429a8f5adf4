package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/reconciled/reconciled"
)

// Many goroutines write at once: private intents, one contested intent id
// with different bodies, one contested verdict history, block batches and
// readers. The single writer must serialise them so that every invariant
// holds afterwards.
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	const workers, perWorker = 12, 8
	mustPut(t, s, intent("shared", 0))

	var created, existing, conflict sync.Map
	var wg sync.WaitGroup
	errs := make(chan error, workers*64)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				if r, err := s.PutIntent(ctx, intent(id, 1)); err != nil || r != reconciled.PutCreated {
					errs <- fmt.Errorf("put %s: %v %v", id, r, err)
					return
				}
				if err := s.AppendVerdict(ctx, verdict(id, 1, reconciled.StatusNotYet), nil); err != nil {
					errs <- err
					return
				}
			}
			// Half the workers race the same id with the same body, half
			// with their own body.
			variant := 7
			if w%2 == 1 {
				variant = 100 + w
			}
			r, err := s.PutIntent(ctx, intent("contested", variant))
			if err != nil {
				errs <- err
				return
			}
			switch r {
			case reconciled.PutCreated:
				created.Store(w, variant)
			case reconciled.PutExisting:
				existing.Store(w, variant)
			case reconciled.PutConflict:
				conflict.Store(w, variant)
			}
			// Everyone tries to extend the shared history; each attempt
			// either lands as the next seq or loses the race cleanly.
			for tries := 0; tries < 4; tries++ {
				last, err := s.LatestVerdict(ctx, "shared")
				next := uint64(1)
				if err == nil {
					next = last.Seq + 1
				} else if !errors.Is(err, ErrNotFound) {
					errs <- err
					return
				}
				v := verdict("shared", next, reconciled.StatusUnreadable)
				v.Reason.Message = fmt.Sprintf("worker %d", w)
				err = s.AppendVerdict(ctx, v, nil)
				if err != nil && !errors.Is(err, ErrSeqConflict) {
					errs <- fmt.Errorf("shared seq %d: %w", next, err)
					return
				}
			}
			if err := s.PutBlocks(ctx, ledgerA, blocks(uint64(w*10), uint64(w*10+30))); err != nil {
				errs <- err
				return
			}
			if _, _, err := s.ListIntents(ctx, ListFilter{Open: true, Limit: 5}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	var winner int
	n := 0
	created.Range(func(_, v any) bool { winner = v.(int); n++; return true })
	if n != 1 {
		t.Fatalf("%d creators of one id", n)
	}
	existing.Range(func(_, v any) bool {
		if v.(int) != winner {
			t.Errorf("existing with variant %d, stored %d", v, winner)
		}
		return true
	})
	conflict.Range(func(_, v any) bool {
		if v.(int) == winner {
			t.Errorf("conflict with the stored variant %d", v)
		}
		return true
	})
	got, err := s.Intent(ctx, "contested")
	if err != nil || got.Hash != intent("contested", winner).Hash {
		t.Fatalf("contested intent %+v %v, want variant %d", got, err, winner)
	}

	vs, err := s.Verdicts(ctx, "shared")
	if err != nil || len(vs) == 0 {
		t.Fatalf("shared history %d %v", len(vs), err)
	}
	for i, v := range vs {
		if v.Seq != uint64(i+1) {
			t.Fatalf("shared history seq %d at position %d", v.Seq, i)
		}
	}
	counts, err := s.CountByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[reconciled.StatusNotYet] != workers*perWorker {
		t.Fatalf("counts %v", counts)
	}
	if bs, _ := s.CachedBlocks(ctx, ledgerA, 0, 1<<20); len(bs) != (workers-1)*10+30 {
		t.Fatalf("%d cached blocks", len(bs))
	}
	if r, err := s.IntegrityCheck(ctx); err != nil || r != "ok" {
		t.Fatalf("integrity %q %v", r, err)
	}
}

// Two processes on one file (a restart overlapping the old process, or a
// support CLI next to the daemon): BEGIN IMMEDIATE plus busy_timeout make
// their writers queue instead of failing with SQLITE_BUSY.
func TestTwoStoresOneFile(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/recon.db"
	a, b := openAt(t, path), openAt(t, path)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for k, s := range []*Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				// Read-then-write transactions on shared rows: the pattern
				// that fails under deferred locking.
				id := fmt.Sprintf("x%d", i)
				if _, err := s.PutIntent(ctx, intent(id, 1)); err != nil {
					errs <- fmt.Errorf("store %d: %w", k, err)
					return
				}
				if err := s.AppendVerdict(ctx, verdict(id, 1, reconciled.StatusNotYet), nil); err != nil {
					errs <- fmt.Errorf("store %d: %w", k, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	counts, err := b.CountByStatus(ctx)
	if err != nil || counts[reconciled.StatusNotYet] != 40 {
		t.Fatalf("counts %v %v", counts, err)
	}
}
