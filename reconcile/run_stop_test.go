package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// pageStopper lets the walk down deliver `pages` pages, then ends it: with
// stop (when set) called before the next page, or with err.
type pageStopper struct {
	*icrc3history.Client
	mu    sync.Mutex
	pages int
	stop  func()
	err   error
}

func (p *pageStopper) BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error {
	return p.Client.BlocksDescAbove(ctx, start, end, floor, func(page []icrc3.Block) error {
		p.mu.Lock()
		left := p.pages
		p.pages--
		p.mu.Unlock()
		if left <= 0 {
			if p.stop != nil {
				p.stop()
				return ctx.Err()
			}
			return p.err
		}
		return fn(page)
	})
}

// engineOn is an engine deciding the world's ledger from h, keeping
// verified blocks in cache.
func (w *joinWorld) engineOn(h reconcile.History, cache reconcile.BlockCache) *reconcile.Engine {
	id := w.ledger.ID().Encode()
	return reconcile.NewEngine(func(ledger string) (reconcile.History, reconcile.LedgerConfig, error) {
		if ledger != id {
			return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
		}
		return h, reconcile.LedgerConfig{}, nil
	}, cache, nil)
}

// stopWorld is a join world whose engine reads the history through p.
func stopWorld(t *testing.T, p *pageStopper) *joinWorld {
	w := newJoinWorld(t)
	p.Client = w.client
	w.engine = w.engineOn(p, reconcile.NewMemCache())
	w.engine.JoinRunning(time.Hour)
	return w
}

// A walk that fails below the range answers every decision that needs
// those blocks unreadable, once, and takes no more joiners: an intent
// arriving after the failure waits for the next decision, which reads the
// history again, rather than inheriting a failure that may have passed.
func TestJoiningAfterWalkFailure(t *testing.T) {
	p := &pageStopper{pages: 5, err: errors.New("replica unreachable")}
	w := stopWorld(t, p)
	deep2 := w.deepBody
	deep2.id, deep2.amount = "deep-unpaid", 9
	late := []*matcher.Intent{w.intent(deep2.json(w.ledger.ID())), w.shallow}
	afterFailure := 0
	got := w.decideJoining([]*matcher.Intent{w.deep}, func() []*matcher.Intent {
		p.mu.Lock()
		failed := p.pages < 0
		p.mu.Unlock()
		if !failed || len(late) == 0 {
			return nil
		}
		afterFailure++
		in := late[0]
		late = late[1:]
		return []*matcher.Intent{in}
	})
	if afterFailure != 0 || len(got) != 1 {
		t.Fatalf("%d joins after the walk failed, %d verdicts (%+v): want none and the deep intent's only", afterFailure, len(got), got)
	}
	if v := got[0]; v.IntentID != "deep" || v.Status != reconciled.StatusUnreadable || v.Reason == nil || v.Reason.Code != "E_INTERNAL" {
		t.Fatalf("deep: %s %+v, want unreadable", v.Status, v.Reason)
	}
	// The next decision reads again: the history answers now.
	p.mu.Lock()
	p.pages = 1 << 30
	p.mu.Unlock()
	got = w.decideJoining(late, nil)
	if len(got) != 2 {
		t.Fatalf("%d verdicts for the late intents: %+v", len(got), got)
	}
	by := map[string]reconciled.Verdict{}
	for _, v := range got {
		by[v.IntentID] = v
	}
	w.wantFound(by["shallow"], "shallow", w.shallowAt)
	if v := by["deep-unpaid"]; v.Status != reconciled.StatusNotYet {
		t.Fatalf("deep-unpaid: %s %+v, want not_yet", v.Status, v.Reason)
	}
}

// A context that ends in the middle of a walk ends the decision with its
// error: no intent is answered twice, none after DecideJoining returned.
func TestJoiningCancelledMidWalk(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &pageStopper{pages: 5, stop: cancel}
	w := stopWorld(t, p)
	join, _ := joinAfter(3, w.shallow)
	seen := map[int]int{}
	returned := false
	err := w.engine.DecideJoining(ctx, w.ledger.ID().Encode(), []*matcher.Intent{w.deep}, reconcile.Joins{Take: join}, func(k int, v reconciled.Verdict) {
		if returned {
			t.Errorf("intent %d (%s) answered after the decision returned", k, v.IntentID)
		}
		seen[k]++
		if v.Status == reconciled.StatusUnreadable {
			t.Errorf("intent %d (%s) answered unreadable (%+v) though only the context ended", k, v.IntentID, v.Reason)
		}
	})
	returned = true
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("DecideJoining returned %v, want the context's error", err)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("intent %d answered %d times", k, n)
		}
	}
	if seen[0] != 0 {
		t.Fatalf("the deep intent was answered though its window was never covered")
	}
}

// Intents of one ledger handled at once by the service, on the engine with
// joining on, are each stored with the verdict their payment calls for,
// whether they started a decision, joined one or waited for the next: with
// a block cache in memory, and with the store as the block cache, where the
// walk's writes share the one writer connection with the verdicts' group
// commits.
func TestServiceJoiningBurstOnEngine(t *testing.T) {
	for _, onStore := range []bool{false, true} {
		t.Run(fmt.Sprint("store_cache=", onStore), func(t *testing.T) { serviceJoiningBurst(t, onStore) })
	}
}

func serviceJoiningBurst(t *testing.T, onStore bool) {
	w := newJoinWorld(t)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if onStore {
		w.engine = w.engineOn(w.client, st)
	}
	w.engine.JoinRunning(time.Hour)
	svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: w.engine, Store: st, Sink: newFakeSink()})
	if err != nil {
		t.Fatal(err)
	}
	const n = 24
	want := map[string]uint64{}
	var wg sync.WaitGroup
	for i := range n {
		b, at := w.deepBody, w.deepAt
		if i%2 == 1 {
			b, at = w.shallowBody, w.shallowAt
		}
		b.id = fmt.Sprint(b.id, "-", i)
		want[b.id] = at
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o := svc.HandleIntent(context.Background(), b.json(w.ledger.ID())); o.Kind != reconciled.Ack {
				t.Errorf("%s: %+v", b.id, o)
			}
		}()
	}
	wg.Wait()
	for id, at := range want {
		v, err := st.LatestVerdict(context.Background(), id)
		if err != nil || v.Status != reconciled.StatusFound || v.Block == nil || uint64(v.Block.Index) != at || v.Seq != 1 {
			t.Fatalf("%s: %+v %v, want found at %d", id, v, err, at)
		}
	}
}
