package reconcile_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
)

// closedWorld is a join world whose old payment's window closed: its
// 3,000 blocks of history span 30 hours.
type closedWorld struct {
	*joinWorld
	paid transferIntent
	at   uint64
}

func newClosedWorld(t *testing.T) *closedWorld {
	w := newJoinWorldOver(t, 30*time.Hour)
	paid := w.deepBody
	paid.id = "paid"
	return &closedWorld{joinWorld: w, paid: paid, at: w.deepAt}
}

// gatedCache holds every write until its gate opens, as a slow disk
// would: the walk goes on above the pages it has not written.
type gatedCache struct {
	*reconcile.MemCache
	gate  chan struct{}
	open  sync.Once
	fail  error // returned by the first write once the gate opens
	puts  int
	mu    sync.Mutex
	abort <-chan struct{}
}

func newGatedCache(t *testing.T) *gatedCache {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return &gatedCache{MemCache: reconcile.NewMemCache(), gate: make(chan struct{}), abort: done}
}

func (c *gatedCache) release() { c.open.Do(func() { close(c.gate) }) }

func (c *gatedCache) PutVerified(ctx context.Context, ledger string, blocks []icrc3.Block) error {
	select {
	case <-c.gate:
	case <-c.abort:
		return errors.New("test over")
	}
	c.mu.Lock()
	c.puts++
	fail := c.fail
	c.fail = nil
	c.mu.Unlock()
	if fail != nil {
		return fail
	}
	return c.MemCache.PutVerified(ctx, ledger, blocks)
}

// An intent that joins after the walk verified its payment's page, while
// that page is not yet in the cache, is found: the chain's range already
// holds the page, so a lookup in the cache alone would miss the payment
// and answer a closed window absent.
func TestJoinerFindsABlockNotYetCached(t *testing.T) {
	w := newClosedWorld(t)
	cache := newGatedCache(t)
	w.engine = w.engineOn(w.client, cache)
	w.engine.JoinRunning(time.Hour)
	// The walker's window starts an hour before the payment: the walk
	// passes the payment's page on its way down.
	walker := w.paid
	walker.id, walker.amount, walker.stamp = "walker", 99, w.paid.stamp-uint64(time.Hour)
	again := w.paid
	again.id = "paid-again"
	joined := false
	var got []reconciled.Verdict
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := w.engine.DecideJoining(ctx, w.ledger.ID().Encode(),
		[]*matcher.Intent{w.intent(walker.json(w.ledger.ID())), w.intent(w.paid.json(w.ledger.ID()))},
		reconcile.Joins{Take: func() []*matcher.Intent {
			// The payment's own intent was answered from the page it was
			// found in: that page is verified, and nothing is written.
			if joined || len(got) == 0 {
				return nil
			}
			joined = true
			return []*matcher.Intent{w.intent(again.json(w.ledger.ID()))}
		}},
		func(k int, v reconciled.Verdict) {
			got = append(got, v)
			if v.IntentID == again.id {
				cache.release()
			}
		})
	cache.release()
	if err != nil {
		t.Fatal(err)
	}
	if !joined {
		t.Fatal("the second intent never joined")
	}
	byID := map[string]reconciled.Verdict{}
	for _, v := range got {
		byID[v.IntentID] = v
	}
	w.wantFound(byID["paid"], "paid", w.at)
	w.wantFound(byID["paid-again"], "paid-again", w.at)
	if v := byID["walker"]; v.Status != reconciled.StatusAbsent {
		t.Fatalf("walker: %s, want absent", v.Status)
	}
	// The run gave the chain up only once its pages were written.
	if _, _, ok, _ := cache.BlockAt(ctx, reconcile.HistoryKey(w.client.NetworkKey(), w.ledger.ID().Encode(), w.client.Mode()), w.at); !ok {
		t.Fatal("the payment's block is not cached after the run")
	}
}

// An intent that arrives once the walk is over, while the run waits only
// for its pages to be written, is answered at once from the pages in
// memory: it does not wait for the next page written, which in a burst
// trails the walk by tens of pages. The writes are held throughout; they
// are let go after a minute only so that a failing run can end.
func TestJoinerArrivingWhileWritesTrailIsAnsweredAtOnce(t *testing.T) {
	w := newClosedWorld(t)
	cache := newGatedCache(t)
	w.engine = w.engineOn(w.client, cache)
	w.engine.JoinRunning(time.Hour)
	held := time.AfterFunc(time.Minute, cache.release)
	defer held.Stop()

	again := w.paid
	again.id = "paid-again"
	arrived := make(chan struct{}, 1)
	var mu sync.Mutex
	var deepDone, ready, taken bool
	idle := 0
	take := func() []*matcher.Intent {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !deepDone || taken:
			return nil
		case ready:
			taken = true
			return []*matcher.Intent{w.intent(again.json(w.ledger.ID()))}
		}
		// The second call after the walk's verdict is the run's last
		// before it waits for its writes: the intent arrives then.
		if idle++; idle == 2 {
			ready = true
			arrived <- struct{}{}
		}
		return nil
	}
	var got []reconciled.Verdict
	var beforeWrites bool
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := w.engine.DecideJoining(ctx, w.ledger.ID().Encode(), []*matcher.Intent{w.intent(w.paid.json(w.ledger.ID()))},
		reconcile.Joins{Take: take, Arrived: arrived},
		func(k int, v reconciled.Verdict) {
			got = append(got, v)
			switch v.IntentID {
			case w.paid.id:
				mu.Lock()
				deepDone = true
				mu.Unlock()
			case again.id:
				cache.mu.Lock()
				beforeWrites = cache.puts == 0
				cache.mu.Unlock()
				cache.release()
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d verdicts, want 2", len(got))
	}
	w.wantFound(got[0], "paid", w.at)
	w.wantFound(got[1], "paid-again", w.at)
	if !beforeWrites {
		t.Fatal("the intent that arrived after the walk was answered only once a page was written")
	}
}

// A write that fails behind the walk leaves the cache at the range before
// the failed page, and the chain goes back to it: the next decision reads
// the missing pages again rather than claim them, and finds the payment
// they hold.
func TestFailedWriteBehindTheWalkIsNotClaimed(t *testing.T) {
	w := newClosedWorld(t)
	cache := newGatedCache(t)
	cache.fail = errors.New("disk I/O error")
	cache.release()
	w.engine = w.engineOn(w.client, cache)
	first := w.decide(w.intent(w.paid.json(w.ledger.ID())))
	// The payment lies at the bottom; which verdict the first decision
	// gets depends on how far the walk went before it saw the failure,
	// but it is never absent.
	if first.Status == reconciled.StatusAbsent {
		t.Fatalf("first decision: absent with its cache write failing")
	}
	again := w.paid
	again.id = "paid-again"
	v := w.decide(w.intent(again.json(w.ledger.ID())))
	w.wantFound(v, "paid-again", w.at)
	key := reconcile.HistoryKey(w.client.NetworkKey(), w.ledger.ID().Encode(), w.client.Mode())
	r, ok, err := cache.LoadRange(context.Background(), key)
	if err != nil || !ok {
		t.Fatalf("range: %v %v", ok, err)
	}
	for i := r.Lo; i <= r.Hi; i++ {
		if _, _, ok, _ := cache.BlockAt(context.Background(), key, i); !ok {
			t.Fatalf("range %d..%d claims block %d, which is not cached", r.Lo, r.Hi, i)
		}
	}
}
