package reconcile_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/reconciled/reconciled/icrc3"
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
			if v := e.decide(e.intent(cold.json(e.ledger.ID()))); v.Status != reconcile.StatusNotYet {
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
				v := e.decide(e.intent(in.json(e.ledger.ID())))
				if v.Status != reconcile.StatusFound {
					t.Fatalf("warm intent %d: %s %+v", k, v.Status, v.Reason)
				}
				after := e.client.Stats()
				if n := after.Total - before.Total; n > 2 {
					t.Fatalf("warm intent %d cost %d queries, want at most 2 (a tip and one page); before %v after %v", k, n, before.Queries, after.Queries)
				}
			}
			// Nothing new: the tip alone.
			in := first
			in.id = "idle"
			before := e.client.Stats().Total
			if v := e.decide(e.intent(in.json(e.ledger.ID()))); v.Status != reconcile.StatusFound {
				t.Fatalf("idle intent: %s %+v", v.Status, v.Reason)
			}
			if n := e.client.Stats().Total - before; n != 1 {
				t.Fatalf("an intent with no new blocks cost %d queries, want 1 (the tip)", n)
			}
		})
	}
}
