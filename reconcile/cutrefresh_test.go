package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// cutHistory is a History whose next top-down walk, once armed, delivers
// one page and then fails: a refresh cut after its first page was written
// (a crash, a dropped connection).
type cutHistory struct {
	*icrc3history.Client
	armed atomic.Bool
}

var errCut = errors.New("connection lost after one page")

func (h *cutHistory) BlocksDesc(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	if !h.armed.Swap(false) {
		return h.Client.BlocksDesc(ctx, start, end, fn)
	}
	pages := 0
	return h.Client.BlocksDesc(ctx, start, end, func(p []icrc3.Block) error {
		if pages++; pages > 1 {
			return errCut
		}
		return fn(p)
	})
}

// caches are the block caches every cache test runs against: one
// behaviour, whichever keeps the blocks.
func caches(t *testing.T) map[string]func() reconcile.BlockCache {
	return map[string]func() reconcile.BlockCache{
		"memory": func() reconcile.BlockCache { return reconcile.NewMemCache() },
		"sqlite": func() reconcile.BlockCache {
			s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "reconciled.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
}

// TestCutRefreshThenLongerHistory: a refresh cut after one page leaves
// verified blocks above the recorded range; the ledger is then reinstalled
// with a longer history, whose walk down meets those indices before block
// Hi+1, where the change shows. Blocks above the range are no facts: the
// new history's verdicts are correct and final, with either cache.
func TestCutRefreshThenLongerHistory(t *testing.T) {
	for name, mk := range caches(t) {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOpt{page: 10})
			h := &cutHistory{Client: e.client}
			e.engine = reconcile.NewEngine(func(string) (reconcile.History, reconcile.LedgerConfig, error) {
				return h, reconcile.LedgerConfig{}, nil
			}, mk(), nil)
			alice, bob := principalN(1), principalN(2)
			e.fund(acct(alice, nil), 1_000_000)
			old := transferIntent{id: "old", caller: alice, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
			if _, err := e.ledger.Transfer(alice, old.arg()); err != nil {
				t.Fatal(err)
			}
			if v := e.decide(e.intent(old.json(e.ledger.ID()))); v.Status != reconciled.StatusFound {
				t.Fatalf("before the cut: %s %+v", v.Status, v.Reason)
			}
			if err := e.ledger.GenerateHistory(45, 1, time.Minute); err != nil {
				t.Fatal(err)
			}
			h.armed.Store(true)
			if v := e.decide(e.intent(old.json(e.ledger.ID()))); v.Final {
				t.Fatalf("a cut refresh gave a final verdict: %s %+v", v.Status, v.Reason)
			}
			cutTip := e.ledger.Len() - 1

			e.reinstall()
			e.fund(acct(alice, nil), 1_000_000)
			if err := e.ledger.GenerateHistory(60, 2, time.Minute); err != nil {
				t.Fatal(err)
			}
			fresh := transferIntent{id: "new", caller: alice, to: acct(bob, nil), amount: 6, stamp: e.srv.Now()}
			newIdx, err := e.ledger.Transfer(alice, fresh.arg())
			if err != nil {
				t.Fatal(err)
			}
			if err := e.ledger.GenerateHistory(20, 3, time.Minute); err != nil {
				t.Fatal(err)
			}
			if e.ledger.Len() <= cutTip+10 {
				t.Fatalf("the new history (%d blocks) is not longer than the cut walk's tip %d", e.ledger.Len(), cutTip)
			}
			v := e.decide(e.intent(fresh.json(e.ledger.ID())))
			if v.Status != reconciled.StatusFound || !v.Final || uint64(v.Block.Index) != newIdx {
				t.Fatalf("new history's payment: got %s final=%v %+v, want found at %d", v.Status, v.Final, v.Reason, newIdx)
			}
			e.closeWindow()
			unpaid := fresh
			unpaid.id, unpaid.amount = "unpaid", 7
			if v := e.decide(e.intent(unpaid.json(e.ledger.ID()))); v.Status != reconciled.StatusAbsent || !v.Final {
				t.Fatalf("unpaid after its window: got %s %+v, want a final absent", v.Status, v.Reason)
			}
		})
	}
}

// TestCacheBlocksAboveRangeAreNoFacts: blocks put above the recorded range
// (a refresh that did not get to record it) give way to other verified
// blocks at those indices, which the range then covers; a block inside the
// range that differs is refused. MemCache and the store answer alike.
func TestCacheBlocksAboveRangeAreNoFacts(t *testing.T) {
	ctx := context.Background()
	const key = "net/ledger/chain"
	mk := func(index, ts, stamp uint64, amount uint64, phash *icrc3.Hash) icrc3.Block {
		tx := icrc3.MapValue(
			icrc3.F("op", icrc3.Text("xfer")),
			icrc3.F("from", icrc3.ArrayValue(icrc3.Blob([]byte{1, 2, 3}))),
			icrc3.F("to", icrc3.ArrayValue(icrc3.Blob([]byte{4, 5, byte(index)}))),
			icrc3.F("amt", icrc3.Uint(amount)),
			icrc3.F("ts", icrc3.Uint(stamp)),
		)
		fs := []icrc3.Field{icrc3.F("ts", icrc3.Uint(ts)), icrc3.F("tx", tx)}
		if phash != nil {
			fs = append(fs, icrc3.F("phash", icrc3.Blob(phash[:])))
		}
		v := icrc3.MapValue(fs...)
		b, err := icrc3.ParseRawBlock(index, icrc3.MarshalValue(v), v.Hash())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, newCache := range caches(t) {
		t.Run(name, func(t *testing.T) {
			c := newCache()
			const stamp = 1_000
			b0 := mk(0, 100, 1, 1, nil)
			r := icrc3.VerifiedRange{Lo: 0, Hi: 0, HiHash: b0.Hash, LoTS: 100, HiTS: 100, TipTime: 100}
			if err := c.PutVerified(ctx, key, []icrc3.Block{b0}); err != nil {
				t.Fatal(err)
			}
			if err := c.SaveRange(ctx, key, r); err != nil {
				t.Fatal(err)
			}
			// Another history's block, earlier than the range's: it says
			// nothing of where the range's windows lie.
			if err := c.PutVerified(ctx, key, []icrc3.Block{mk(1, 60, stamp+20, 30, &b0.Hash)}); err != nil {
				t.Fatal(err)
			}
			if first, last, ok, err := c.WindowBlocks(ctx, key, 0, 0, 50, 150); err != nil || !ok || first != 0 || last != 0 {
				t.Fatalf("window [50, 150] of the range 0..0: %d..%d %v %v, want 0..0", first, last, ok, err)
			}
			// Blocks 1..2 of one history, put without their range.
			a1 := mk(1, 200, stamp+10, 10, &b0.Hash)
			a2 := mk(2, 300, stamp+1, 10, &a1.Hash)
			if err := c.PutVerified(ctx, key, []icrc3.Block{a1, a2}); err != nil {
				t.Fatal(err)
			}
			// Another history's blocks 1..3, verified and recorded.
			n1 := mk(1, 250, stamp, 20, &b0.Hash)
			n2 := mk(2, 350, stamp+1, 20, &n1.Hash)
			n3 := mk(3, 450, stamp+2, 20, &n2.Hash)
			if err := c.PutVerified(ctx, key, []icrc3.Block{n2, n3}); err != nil {
				t.Fatalf("blocks above the range where others lie: %v", err)
			}
			if err := c.PutVerified(ctx, key, []icrc3.Block{n1}); err != nil {
				t.Fatalf("blocks above the range where others lie: %v", err)
			}
			r.Hi, r.HiHash, r.HiTS, r.TipTime = 3, n3.Hash, 450, 450
			if err := c.SaveRange(ctx, key, r); err != nil {
				t.Fatal(err)
			}
			for i, want := range []icrc3.Block{n1, n2, n3} {
				st := uint64(stamp + i)
				got, err := c.ByStamp(ctx, key, st, 0, 3)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 1 || got[0].Hash != want.Hash || got[0].TS != want.TS {
					t.Fatalf("stamp %d: got %d blocks %+v, want block %d of the recorded history", st, len(got), got, want.Index)
				}
				h, ts, ok, err := c.BlockAt(ctx, key, want.Index)
				if err != nil || !ok || h != want.Hash || ts != want.TS {
					t.Fatalf("block %d: %x %d %v %v, want %x %d", want.Index, h, ts, ok, err, want.Hash, want.TS)
				}
			}
			if got, err := c.ByStamp(ctx, key, stamp+10, 0, 3); err != nil || len(got) != 0 {
				t.Fatalf("the replaced block's stamp: %d blocks %v, want none", len(got), err)
			}
			if first, last, ok, err := c.WindowBlocks(ctx, key, 0, 3, 240, 360); err != nil || !ok || first != 1 || last != 2 {
				t.Fatalf("window [240, 360]: %d..%d %v %v, want 1..2", first, last, ok, err)
			}
			// Inside the range a block is a fact: another one is refused.
			if err := c.PutVerified(ctx, key, []icrc3.Block{a2}); !errors.Is(err, reconciled.ErrBlockConflict) {
				t.Fatalf("a block contradicting the recorded range: %v, want ErrBlockConflict", err)
			}
			if got, _ := c.ByStamp(ctx, key, stamp+1, 0, 3); len(got) != 1 || got[0].Hash != n2.Hash {
				t.Fatalf("after a refused block: %+v", got)
			}
		})
	}
}

// conflictCache refuses its next write as contradicting a block inside its
// recorded range, as a cache whose range another writer grew would.
type conflictCache struct {
	*reconcile.MemCache
	refuse atomic.Bool
}

func (c *conflictCache) PutVerified(ctx context.Context, ledger string, blocks []icrc3.Block) error {
	if c.refuse.Swap(false) {
		return fmt.Errorf("cache: block %d: %w", blocks[0].Index, reconciled.ErrBlockConflict)
	}
	return c.MemCache.PutVerified(ctx, ledger, blocks)
}

// TestCacheConflictIsAHistoryChange: a refresh whose verified blocks the
// cache refuses as contradicting its recorded range has met another
// history: the chain is rebuilt from the certified tip, as when the walk
// proves the change itself, never left unreadable.
func TestCacheConflictIsAHistoryChange(t *testing.T) {
	e := newEnv(t, envOpt{})
	cache := &conflictCache{MemCache: reconcile.NewMemCache()}
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
		t.Fatalf("before: %s %+v", v.Status, v.Reason)
	}
	fresh := transferIntent{id: "new", caller: alice, to: acct(bob, nil), amount: 6, stamp: e.srv.Now()}
	idx, err := e.ledger.Transfer(alice, fresh.arg())
	if err != nil {
		t.Fatal(err)
	}
	cache.refuse.Store(true)
	v := e.decide(e.intent(fresh.json(e.ledger.ID())))
	if v.Status != reconciled.StatusFound || uint64(v.Block.Index) != idx {
		t.Fatalf("a refused refresh page: got %s %+v, want found at %d", v.Status, v.Reason, idx)
	}
	if v.Evidence == nil || v.Evidence.HistoryChanged == nil || v.Evidence.HistoryChanged.Reason != "hash" {
		t.Fatalf("the verdict does not show the history change: %+v", v.Evidence)
	}
}
