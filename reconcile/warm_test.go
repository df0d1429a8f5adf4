package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/reconcile"
)

// TestWarmIntentCostsTipAndNewPage: once a ledger's verified range covers
// an intent's window, deciding it costs one certified tip plus the pages of
// the blocks added since (one page here), whatever the endpoint family and
// however much of the history is archived: detection, metadata and the
// archive list are read once per ledger, and no window search runs.
func TestWarmIntentCostsTipAndNewPage(t *testing.T) {
	for _, ep := range []icrc3.Endpoint{icrc3.EndpointLegacy, icrc3.EndpointICRC3} {
		t.Run(string(ep), func(t *testing.T) {
			e := newEnv(t, envOpt{endpoint: ep, ledger: ledgertest.LedgerConfig{ArchiveThreshold: 300, ArchiveBatch: 200, ArchiveCapacity: 500}})
			alice, bob := principalN(1), principalN(2)
			e.fund(acct(alice, nil), 1_000_000_000)
			if err := e.ledger.GenerateHistory(1500, 3, time.Hour); err != nil {
				t.Fatal(err)
			}
			first := transferIntent{id: "first", caller: alice, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
			if _, err := e.ledger.Transfer(alice, first.arg()); err != nil {
				t.Fatal(err)
			}
			if len(e.ledger.Archives()) < 2 {
				t.Fatalf("want an archived history, got archives %v", e.ledger.Archives())
			}
			// Cold: an unpaid intent stamped an hour back reads its whole
			// window, about every block.
			cold := first
			cold.id, cold.amount, cold.stamp = "cold", 6, e.srv.Now()-uint64(time.Hour)
			if v := e.decide(e.intent(cold.json(e.ledger.ID()))); v.Status != reconciled.StatusNotYet {
				t.Fatalf("cold intent: %s %+v", v.Status, v.Reason)
			}
			for k := 0; k < 3; k++ {
				// A few blocks arrive (fewer than a page), then a new intent
				// whose window the verified range already covers.
				if err := e.ledger.GenerateHistory(20, int64(10+k), 0); err != nil {
					t.Fatal(err)
				}
				in := first
				in.id = fmt.Sprintf("warm-%d", k)
				before := e.client.Stats()
				rs0 := e.srv.Stats().Canisters[e.ledger.ID().Encode()].ReadStates
				v := e.decide(e.intent(in.json(e.ledger.ID())))
				if v.Status != reconciled.StatusFound {
					t.Fatalf("warm intent %d: %s %+v", k, v.Status, v.Reason)
				}
				after := e.client.Stats()
				if n := after.Total - before.Total; n > 2 {
					t.Fatalf("warm intent %d cost %d queries, want at most 2 (a tip and one page); before %v after %v", k, n, before.Queries, after.Queries)
				}
				// Two round trips in all: the tip certificate proves its reply,
				// so no read_state for the node's signature goes with it.
				if n := e.srv.Stats().Canisters[e.ledger.ID().Encode()].ReadStates - rs0; n != 0 {
					t.Fatalf("warm intent %d cost %d read_state round trips beside its queries, want 0", k, n)
				}
			}
			// Nothing new: the tip alone.
			in := first
			in.id = "idle"
			before := e.client.Stats().Total
			if v := e.decide(e.intent(in.json(e.ledger.ID()))); v.Status != reconciled.StatusFound {
				t.Fatalf("idle intent: %s %+v", v.Status, v.Reason)
			}
			if n := e.client.Stats().Total - before; n != 1 {
				t.Fatalf("an intent with no new blocks cost %d queries, want 1 (the tip)", n)
			}
		})
	}
}

// floorRecorder is the client, noting how far down each aimed walk may
// request pages when it starts.
type floorRecorder struct {
	*icrc3history.Client
	mu     sync.Mutex
	starts [][2]uint64 // {end, floor()} at each walk's start
}

func (f *floorRecorder) BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error {
	f.mu.Lock()
	f.starts = append(f.starts, [2]uint64{end, floor()})
	f.mu.Unlock()
	return f.Client.BlocksDescAbove(ctx, start, end, floor, fn)
}

// TestColdWalkAsksForPagesAtOnce: a walk from an empty verified range has
// no density to aim by, yet asking for one page first would put a serial
// round trip before every far window's pages; it asks for as many as the
// client keeps in flight.
func TestColdWalkAsksForPagesAtOnce(t *testing.T) {
	const page = 100
	var rec *floorRecorder
	e := newEnv(t, envOpt{endpoint: icrc3.EndpointLegacy, page: page,
		wrap: func(c *icrc3history.Client) reconcile.History { rec = &floorRecorder{Client: c}; return rec }})
	alice, bob := principalN(1), principalN(2)
	e.fund(acct(alice, nil), 1_000_000_000)
	if err := e.ledger.GenerateHistory(3000, 5, time.Hour); err != nil {
		t.Fatal(err)
	}
	far := transferIntent{id: "far", caller: alice, to: acct(bob, nil), amount: 6, stamp: e.srv.Now() - uint64(time.Hour)}
	if v := e.decide(e.intent(far.json(e.ledger.ID()))); v.Status != reconciled.StatusNotYet || v.Evidence == nil || v.Evidence.BlocksRead < 2*page {
		t.Fatalf("far intent: %s %+v %+v", v.Status, v.Reason, v.Evidence)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.starts) == 0 {
		t.Fatal("the cold walk never asked for pages")
	}
	if end, floor := rec.starts[0][0], rec.starts[0][1]; end-floor < 2*page {
		t.Fatalf("the cold walk started asking for blocks %d..%d: one page, though nothing aims it yet", floor, end)
	}
}
