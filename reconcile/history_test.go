package reconcile_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// reinstall replaces the env's ledger by a fresh one under the same
// canister id: a reinstall, or a local replica reset, as far as any reader
// can tell.
func (e *env) reinstall() {
	e.t.Helper()
	l, err := e.srv.NewLedger(ledgertest.LedgerConfig{ID: e.ledger.ID()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.ledger = l
}

// TestHistoryChangeSameCanisterInMemory: a new history under the same
// canister id, shorter or longer than the cached one, is a history change:
// the cached chain is discarded and rebuilt from the new certified tip. The
// old chain must neither find a block the ledger no longer has nor hide the
// new history's blocks.
func TestHistoryChangeSameCanisterInMemory(t *testing.T) {
	for _, tc := range []struct {
		name               string
		oldExtra, newExtra int // background blocks after the payments
	}{
		{"shorter", 20, 0},
		{"same-length", 0, 0},
		{"longer", 0, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpt{})
			m := reconcile.NewMetrics()
			e.engine.Observe(m)
			alice, bob := principalN(1), principalN(2)
			e.fund(acct(alice, nil), 1_000_000)
			old := transferIntent{id: "old", caller: alice, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
			oldIdx, err := e.ledger.Transfer(alice, old.arg())
			if err != nil {
				t.Fatal(err)
			}
			if tc.oldExtra > 0 {
				if err := e.ledger.GenerateHistory(tc.oldExtra, 1, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			if v := e.decide(e.intent(old.json(e.ledger.ID()))); v.Status != reconciled.StatusFound || uint64(v.Block.Index) != oldIdx {
				t.Fatalf("before the change: %s, want found at %d", v.Status, oldIdx)
			}

			e.reinstall()
			e.fund(acct(alice, nil), 1_000_000)
			fresh := transferIntent{id: "new", caller: alice, to: acct(bob, nil), amount: 6, stamp: e.srv.Now()}
			newIdx, err := e.ledger.Transfer(alice, fresh.arg())
			if err != nil {
				t.Fatal(err)
			}
			if tc.newExtra > 0 {
				if err := e.ledger.GenerateHistory(tc.newExtra, 2, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			v := e.decide(e.intent(fresh.json(e.ledger.ID())))
			if v.Status != reconciled.StatusFound || uint64(v.Block.Index) != newIdx {
				t.Fatalf("new history's payment: got %s %+v, want found at %d", v.Status, v.Reason, newIdx)
			}
			if v.Evidence == nil || v.Evidence.HistoryChanged == nil {
				t.Fatalf("the verdict decided across the change does not show it: %+v", v.Evidence)
			}
			if n := m.Get(reconcile.MetricHistoryChanges, v.Evidence.HistoryChanged.Reason); n != 1 {
				t.Fatalf("%s{reason=%q} = %d, want 1", reconcile.MetricHistoryChanges, v.Evidence.HistoryChanged.Reason, n)
			}
			if v := e.decide(e.intent(old.json(e.ledger.ID()))); v.Status == reconciled.StatusFound {
				t.Fatalf("the old payment is found in block %d, which the certified ledger no longer has", v.Block.Index)
			}
		})
	}
}

// TestHistoryChangeAcrossRestartWithSQLite: the SQLite cache holds a chain
// verified on a ledger whose clock had run days ahead; after a restart the
// replica serves a new history under the same id, with an earlier clock and
// fewer blocks. That lower tip is no lagging replica: taken for one, the
// old chain's later certified time closes the new payment's window over
// blocks that do not hold it, a final absent for a transfer that is in the
// certified chain.
func TestHistoryChangeAcrossRestartWithSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "reconciled.db")
	open := func() *store.Store {
		s, err := store.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	alice, bob := principalN(1), principalN(2)

	e := newEnv(t, envOpt{})
	e.srv.Advance(72 * time.Hour)
	e.fund(acct(alice, nil), 1_000_000)
	if err := e.ledger.GenerateHistory(50, 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	old := transferIntent{id: "old", caller: alice, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
	if _, err := e.ledger.Transfer(alice, old.arg()); err != nil {
		t.Fatal(err)
	}
	s := open()
	eng := reconcile.NewEngine(func(string) (reconcile.History, reconcile.LedgerConfig, error) {
		return e.client, reconcile.LedgerConfig{}, nil
	}, s, nil)
	if v, err := eng.Decide(ctx, e.intent(old.json(e.ledger.ID()))); err != nil || v.Status != reconciled.StatusFound {
		t.Fatalf("before the restart: %s %v", v.Status, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The same seed gives the same keys and canister ids, and the clock
	// starts again at the wall clock's time.
	e2 := newEnv(t, envOpt{})
	if !e2.ledger.ID().Equal(e.ledger.ID()) {
		t.Fatalf("same seed, canister %s and %s", e2.ledger.ID(), e.ledger.ID())
	}
	e2.fund(acct(alice, nil), 1_000_000)
	fresh := transferIntent{id: "new", caller: alice, to: acct(bob, nil), amount: 6, stamp: e2.srv.Now()}
	newIdx, err := e2.ledger.Transfer(alice, fresh.arg())
	if err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	eng = reconcile.NewEngine(func(string) (reconcile.History, reconcile.LedgerConfig, error) {
		return e2.client, reconcile.LedgerConfig{}, nil
	}, s, nil)
	v, err := eng.Decide(ctx, e2.intent(fresh.json(e2.ledger.ID())))
	if err != nil || v.Status != reconciled.StatusFound || uint64(v.Block.Index) != newIdx {
		t.Fatalf("after the restart: got %s %+v %+v (%v), want found at %d", v.Status, v.Reason, v.Evidence, err, newIdx)
	}
	key := reconcile.HistoryKey(e2.client.NetworkKey(), e2.ledger.ID().Encode(), e2.client.Mode())
	if n, err := s.HistoryChanges(ctx, key); err != nil || n != 1 {
		t.Fatalf("recorded history changes of %s: %d (%v), want 1", key, n, err)
	}
	e2.closeWindow()
	unpaid := fresh
	unpaid.id, unpaid.amount = "unpaid", 7
	if v, _ := eng.Decide(ctx, e2.intent(unpaid.json(e2.ledger.ID()))); v.Status != reconciled.StatusAbsent {
		t.Fatalf("unpaid after the restart and its window: %s %+v", v.Status, v.Reason)
	}

}

// stuckCache is a block cache whose chains cannot be discarded (a store
// that refuses writes).
type stuckCache struct {
	*reconcile.MemCache
	stuck bool
}

func (c *stuckCache) Discard(ctx context.Context, ledger string, ch reconciled.HistoryChange) error {
	if c.stuck {
		return errors.New("store is read-only")
	}
	return c.MemCache.Discard(ctx, ledger, ch)
}

// TestHistoryChangeUnrebuildableIsUnreadable: a history change whose old
// chain cannot be discarded is E_HISTORY_CHANGED, never an answer from the
// old chain; once it can be, the new history decides.
func TestHistoryChangeUnrebuildableIsUnreadable(t *testing.T) {
	e := newEnv(t, envOpt{})
	cache := &stuckCache{MemCache: reconcile.NewMemCache()}
	e.engine = reconcile.NewEngine(func(string) (reconcile.History, reconcile.LedgerConfig, error) {
		return e.client, reconcile.LedgerConfig{}, nil
	}, cache, nil)
	alice, bob := principalN(1), principalN(2)
	e.fund(acct(alice, nil), 1_000_000)
	old := transferIntent{id: "old", caller: alice, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
	if _, err := e.ledger.Transfer(alice, old.arg()); err != nil {
		t.Fatal(err)
	}
	if v := e.decide(e.intent(old.json(e.ledger.ID()))); v.Status != reconciled.StatusFound {
		t.Fatalf("before the change: %s", v.Status)
	}
	e.reinstall()
	e.fund(acct(alice, nil), 1_000_000)
	fresh := transferIntent{id: "new", caller: alice, to: acct(bob, nil), amount: 6, stamp: e.srv.Now()}
	idx, err := e.ledger.Transfer(alice, fresh.arg())
	if err != nil {
		t.Fatal(err)
	}
	cache.stuck = true
	in := e.intent(fresh.json(e.ledger.ID()))
	if v := e.decide(in); v.Status != reconciled.StatusUnreadable || v.Reason == nil || v.Reason.Code != "E_HISTORY_CHANGED" {
		t.Fatalf("history changed, old chain kept: got %s %+v, want unreadable E_HISTORY_CHANGED", v.Status, v.Reason)
	}
	cache.stuck = false
	if v := e.decide(in); v.Status != reconciled.StatusFound || uint64(v.Block.Index) != idx {
		t.Fatalf("once rebuilt: got %s %+v, want found at %d", v.Status, v.Reason, idx)
	}
}
