package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
)

// joinWorld is a ledger with a payment stamped ten hours back under 3,000
// blocks of history, and a recent one: the old payment's intent walks 30
// pages of 100 blocks, the recent one's is settled by the first.
type joinWorld struct {
	*env
	deep, shallow         *matcher.Intent
	deepAt, shallowAt     uint64
	deepBody, shallowBody transferIntent
}

func newJoinWorld(t *testing.T) *joinWorld { return newJoinWorldOver(t, 10*time.Hour) }

// newJoinWorldOver is a join world whose old payment lies span back.
func newJoinWorldOver(t *testing.T, span time.Duration) *joinWorld {
	e := newEnv(t, envOpt{endpoint: icrc3.EndpointICRC3, page: 100})
	alice, bob := principalN(1), principalN(2)
	e.fund(acct(alice, nil), 1_000_000_000)
	w := &joinWorld{env: e}
	w.deepBody = transferIntent{id: "deep", caller: alice, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
	var err error
	if w.deepAt, err = e.ledger.Transfer(alice, w.deepBody.arg()); err != nil {
		t.Fatal(err)
	}
	e.srv.Advance(span)
	if err := e.ledger.GenerateHistory(3000, 5, span); err != nil {
		t.Fatal(err)
	}
	w.shallowBody = transferIntent{id: "shallow", caller: alice, to: acct(bob, nil), amount: 6, stamp: e.srv.Now()}
	if w.shallowAt, err = e.ledger.Transfer(alice, w.shallowBody.arg()); err != nil {
		t.Fatal(err)
	}
	w.deep, w.shallow = e.intent(w.deepBody.json(e.ledger.ID())), e.intent(w.shallowBody.json(e.ledger.ID()))
	return w
}

// decideJoining runs DecideJoining and returns the verdicts in the order
// they were handed over.
func (w *joinWorld) decideJoining(ins []*matcher.Intent, join func() []*matcher.Intent) []reconciled.Verdict {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []reconciled.Verdict
	seen := map[int]bool{}
	if err := w.engine.DecideJoining(ctx, w.ledger.ID().Encode(), ins, reconcile.Joins{Take: join}, func(k int, v reconciled.Verdict) {
		if seen[k] {
			w.t.Errorf("intent %d (%s) answered twice", k, v.IntentID)
		}
		seen[k] = true
		got = append(got, v)
	}); err != nil {
		w.t.Fatal(err)
	}
	return got
}

func (w *joinWorld) wantFound(v reconciled.Verdict, id string, at uint64) {
	w.t.Helper()
	if v.IntentID != id || v.Status != reconciled.StatusFound || v.Block == nil || uint64(v.Block.Index) != at {
		w.t.Fatalf("%s: got %s %s block %+v reason %+v, want found at %d", id, v.IntentID, v.Status, v.Block, v.Reason, at)
	}
}

// joinAfter returns a join function that hands in over on its n-th call
// (counting from 1) and nothing otherwise.
func joinAfter(n int, in *matcher.Intent) (func() []*matcher.Intent, *int) {
	calls := 0
	return func() []*matcher.Intent {
		calls++
		if calls == n {
			return []*matcher.Intent{in}
		}
		return nil
	}, &calls
}

// An intent that joins a walk under way is answered as soon as the pages
// verified settle it, before the walk it joined ends, and costs no page of
// its own.
func TestJoiningIntentIsAnsweredBeforeTheWalkEnds(t *testing.T) {
	w := newJoinWorld(t)
	w.engine.JoinRunning(time.Hour)
	// The first call comes before the walk, when nothing of the window is
	// verified yet: the joiner waits for the walk's pages.
	join, calls := joinAfter(1, w.shallow)
	got := w.decideJoining([]*matcher.Intent{w.deep}, join)
	if *calls < 2 || len(got) != 2 {
		t.Fatalf("%d join calls, %d verdicts", *calls, len(got))
	}
	w.wantFound(got[0], "shallow", w.shallowAt)
	w.wantFound(got[1], "deep", w.deepAt)
	if s, d := got[0].Evidence.BlocksRead, got[1].Evidence.BlocksRead; s >= d {
		t.Fatalf("shallow read %d blocks, deep %d: the joiner waited for the whole walk", s, d)
	}
	all := w.client.Stats().Blocks

	// The same walk alone fetches as many blocks: the joiner cost none.
	alone := newJoinWorld(t)
	v := alone.decideJoining([]*matcher.Intent{alone.deep}, nil)
	alone.wantFound(v[0], "deep", alone.deepAt)
	if one := alone.client.Stats().Blocks; all > one {
		t.Fatalf("with a joiner %d blocks fetched, alone %d", all, one)
	}
}

// A joiner whose window is deeper than every pending one carries the walk
// on to it.
func TestJoiningIntentDeepensTheWalk(t *testing.T) {
	w := newJoinWorld(t)
	w.engine.JoinRunning(time.Hour)
	join, _ := joinAfter(2, w.deep)
	got := w.decideJoining([]*matcher.Intent{w.shallow}, join)
	if len(got) != 2 {
		t.Fatalf("%d verdicts", len(got))
	}
	w.wantFound(got[0], "shallow", w.shallowAt)
	w.wantFound(got[1], "deep", w.deepAt)
}

// Joining is off unless asked for, and stops once the tip is as old as
// allowed: later intents wait for a decision of their own.
func TestJoiningOnlyWhileAllowed(t *testing.T) {
	w := newJoinWorld(t)
	got := w.decideJoining([]*matcher.Intent{w.deep}, func() []*matcher.Intent {
		t.Fatal("join called with joining off")
		return nil
	})
	w.wantFound(got[0], "deep", w.deepAt)

	w2 := newJoinWorld(t)
	w2.engine.JoinRunning(time.Nanosecond)
	got = w2.decideJoining([]*matcher.Intent{w2.deep}, func() []*matcher.Intent {
		t.Fatal("join called after the tip grew older than allowed")
		return nil
	})
	w2.wantFound(got[0], "deep", w2.deepAt)
}

// Verdicts of joined intents are those DecideMany gives the same intents
// together, the ledger's invalid ones included.
func TestJoiningAgreesWithDecideMany(t *testing.T) {
	w := newJoinWorld(t)
	w.engine.JoinRunning(time.Hour)
	bad := w.shallowBody
	bad.id, bad.stamp = "bad-expiry", w.srv.Now()
	// Before stamp − drift: the ledger's rules refuse it, at decision time.
	early := bad.stamp - uint64(10*time.Minute)
	bad.ingressEx = &early
	unpaid := w.deepBody
	unpaid.id, unpaid.amount = "unpaid", 7
	more := []*matcher.Intent{w.intent(bad.json(w.ledger.ID())), w.intent(unpaid.json(w.ledger.ID())), w.shallow}
	i := 0
	got := w.decideJoining([]*matcher.Intent{w.deep}, func() []*matcher.Intent {
		if i == len(more) {
			return nil
		}
		i++
		return more[i-1 : i]
	})

	ref := newJoinWorld(t)
	want, err := ref.engine.DecideMany(context.Background(), []*matcher.Intent{ref.deep, ref.intent(bad.json(ref.ledger.ID())), ref.intent(unpaid.json(ref.ledger.ID())), ref.shallow})
	if err != nil {
		t.Fatal(err)
	}
	status := func(vs []reconciled.Verdict) map[string]string {
		m := map[string]string{}
		for _, v := range vs {
			s := string(v.Status)
			if v.Block != nil {
				s += fmt.Sprintf("@%d", uint64(v.Block.Index))
			}
			if v.Reason != nil {
				s += ":" + v.Reason.Code
			}
			m[v.IntentID] = s
		}
		return m
	}
	g, r := status(got), status(want)
	if len(g) != 4 || !maps.Equal(g, r) {
		t.Fatalf("joined %v, together %v", g, r)
	}
	if !slices.ContainsFunc(got, func(v reconciled.Verdict) bool { return v.Status == reconciled.StatusInvalid }) {
		t.Fatalf("no invalid verdict among %v", g)
	}
}

// stampFailCache fails every lookup of one stamp.
type stampFailCache struct {
	*reconcile.MemCache
	stamp uint64
}

func (c stampFailCache) ByStamp(ctx context.Context, ledger string, stamp, lo, hi uint64) ([]icrc3.Block, error) {
	if stamp == c.stamp {
		return nil, errors.New("disk I/O error")
	}
	return c.MemCache.ByStamp(ctx, ledger, stamp, lo, hi)
}

// A joiner whose lookup of the blocks verified before it fails is
// answered unreadable, once; the decision it joined goes on.
func TestJoiningLookupFailureAnswersOnlyThatIntent(t *testing.T) {
	w := newJoinWorld(t)
	cache := stampFailCache{MemCache: reconcile.NewMemCache(), stamp: w.shallowBody.stamp}
	w.engine = w.engineOn(w.client, cache)
	w.engine.JoinRunning(time.Hour)
	join, _ := joinAfter(2, w.shallow)
	got := w.decideJoining([]*matcher.Intent{w.deep}, join)
	if len(got) != 2 {
		t.Fatalf("%d verdicts: %+v", len(got), got)
	}
	if v := got[0]; v.IntentID != "shallow" || v.Status != reconciled.StatusUnreadable || v.Reason == nil {
		t.Fatalf("shallow: %s %+v, want unreadable", v.Status, v.Reason)
	}
	w.wantFound(got[1], "deep", w.deepAt)
}
