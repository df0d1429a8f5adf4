package reconcile_test

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/candid/idl"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
)

// The verdict benchmarks run on one big ledger over loopback: -bench.blocks
// blocks (archived like a DFINITY ledger: at most 2000 on the ledger, the
// rest in archives), a tenth of them inside one intent window of 24 h. Three
// intents stamped S executed at the window's start, middle and end (at
// ledger times S, S+12h and S+24h-1min, which the ledger accepts); a fourth
// with the same stamp never executed. The window is closed when decided.

var benchBlocks = flag.Int("bench.blocks", 1_000_000, "blocks on the verdict benchmarks' ledger")

type benchLedger struct {
	srv    *ledgertest.Server
	l      *ledgertest.Ledger
	ins    map[string]*matcher.Intent // start, middle, end, absent
	blocks map[string]uint64          // where start, middle and end executed
	window uint64                     // blocks in the window
	build  time.Duration
	err    error
}

var (
	benchOnce sync.Once
	bench     benchLedger
)

func benchSetup(b *testing.B) *benchLedger {
	benchOnce.Do(func() { bench.err = bench.make(*benchBlocks) })
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return &bench
}

func (bl *benchLedger) make(n int) error {
	t0 := time.Now()
	if n < 1000 {
		return fmt.Errorf("-bench.blocks=%d: want at least 1000", n)
	}
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(11))
	if err != nil {
		return err
	}
	l, err := srv.NewLedger(ledgertest.LedgerConfig{ArchiveThreshold: 2000, ArchiveBatch: 1000, ArchiveCapacity: 400_000})
	if err != nil {
		srv.Close()
		return err
	}
	bl.srv, bl.l = srv, l
	const steps = 100
	window := n / 10
	tail := min(1000, n/100)
	before := n - window - tail - 4
	// Everything before the window: ten days of history (generated first:
	// history never goes back before the last block).
	if err := l.GenerateHistory(before, 1, 10*24*time.Hour); err != nil {
		return err
	}
	alice, bob := principalN(1), principalN(2)
	mint := l.MintingAccount()
	if _, err := l.Transfer(mint.Owner, icrc1.TransferArg{To: acct(alice, nil).ToCandid(), Amount: idl.NewNat(uint64(1_000_000_000_000))}); err != nil {
		return err
	}
	srv.Advance(3 * time.Minute)
	stamp := srv.Now()
	pay := func(amount uint64) (uint64, error) {
		return l.Transfer(alice, icrc1.TransferArg{To: acct(bob, nil).ToCandid(), Amount: idl.NewNat(amount), Memo: &[]byte{byte(amount)}, CreatedAtTime: &stamp})
	}
	bl.blocks = map[string]uint64{}
	bl.ins = map[string]*matcher.Intent{}
	for k, name := range []string{"start", "middle", "end", "absent"} {
		in, err := matcher.ParseIntent(transferIntent{id: name, caller: alice, to: acct(bob, nil), amount: uint64(k + 1), memo: []byte{byte(k + 1)}, stamp: stamp}.json(l.ID()))
		if err != nil {
			return err
		}
		bl.ins[name] = in
	}
	if bl.blocks["start"], err = pay(1); err != nil {
		return err
	}
	step := 24 * time.Hour / steps
	for i := 0; i < steps; i++ {
		d := step
		if i == steps-1 {
			// Keep the end payment inside the ledger's 24 h window, with
			// room for the wall clock, which the ledger clock follows.
			d -= 5 * time.Minute
		}
		srv.Advance(d)
		if err := l.GenerateHistory(window/steps, int64(2+i), step); err != nil {
			return err
		}
		if i == steps/2-1 {
			if bl.blocks["middle"], err = pay(2); err != nil {
				return err
			}
		}
	}
	if bl.blocks["end"], err = pay(3); err != nil {
		return err
	}
	// Close the window in ledger time, with a little history after it.
	if end := stamp + uint64(24*time.Hour+3*time.Minute); end > srv.Now() {
		srv.Advance(time.Duration(end - srv.Now()))
	}
	if err := l.GenerateHistory(tail, 999, 3*time.Minute); err != nil {
		return err
	}
	first, last := bl.windowBlocks(stamp-uint64(2*time.Minute), stamp+uint64(24*time.Hour+2*time.Minute))
	bl.window = last - first + 1
	bl.build = time.Since(t0)
	fmt.Printf("bench ledger: %d blocks, %d archives, window of %d blocks [%d, %d], built in %s\n",
		l.Len(), len(l.Archives()), bl.window, first, last, bl.build.Round(time.Millisecond))
	return nil
}

// windowBlocks finds the first and last block with from <= ts <= to.
func (bl *benchLedger) windowBlocks(from, to uint64) (first, last uint64) {
	n := int(bl.l.Len())
	tsAt := func(i int) uint64 { v, _ := bl.l.Block(uint64(i)); return ts(v) }
	first = uint64(sort.Search(n, func(i int) bool { return tsAt(i) >= from }))
	last = uint64(sort.Search(n, func(i int) bool { return tsAt(i) > to })) - 1
	return first, last
}

// engine returns a fresh engine over a fresh client (agent shared) and the
// given cache.
func (bl *benchLedger) engine(b *testing.B, ep icrc3.Endpoint, cache reconcile.BlockCache) (*reconcile.Engine, *icrc3history.Client) {
	ag, err := bl.srv.NewAgent(nil)
	if err != nil {
		b.Fatal(err)
	}
	c, err := icrc3history.NewClient(icrc3history.ClientConfig{Agent: ag, Ledger: bl.l.ID(), RootKey: bl.srv.RootKey(), Endpoint: ep})
	if err != nil {
		b.Fatal(err)
	}
	id := bl.l.ID().Encode()
	return reconcile.NewEngine(func(ledger string) (reconcile.History, reconcile.LedgerConfig, error) {
		if ledger != id {
			return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
		}
		return c, reconcile.LedgerConfig{}, nil
	}, cache, nil), c
}

func (bl *benchLedger) decide(b *testing.B, e *reconcile.Engine, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	v, err := e.Decide(ctx, bl.ins[name])
	if err != nil {
		b.Fatal(err)
	}
	if name == "absent" {
		if v.Status != reconciled.StatusAbsent {
			b.Fatalf("%s: %s %+v, want absent", name, v.Status, v.Reason)
		}
		return
	}
	if v.Status != reconciled.StatusFound || uint64(v.Block.Index) != bl.blocks[name] {
		b.Fatalf("%s: %s %+v %+v, want found at %d", name, v.Status, v.Block, v.Reason, bl.blocks[name])
	}
}

var benchEndpoints = []struct {
	name string
	ep   icrc3.Endpoint
}{{"legacy2000", icrc3.EndpointLegacy}, {"icrc3_100", icrc3.EndpointICRC3}}

// BenchmarkVerdictCold: one intent decided by a fresh engine and cache, so
// every iteration is a real scan of the window from the tip down.
func BenchmarkVerdictCold(b *testing.B) {
	bl := benchSetup(b)
	for _, ep := range benchEndpoints {
		for _, name := range []string{"start", "middle", "end", "absent"} {
			b.Run(ep.name+"/"+name, func(b *testing.B) {
				var queries, blocks uint64
				for i := 0; i < b.N; i++ {
					e, c := bl.engine(b, ep.ep, reconcile.NewMemCache())
					bl.decide(b, e, name)
					st := c.Stats()
					queries += st.Total
					blocks += st.Blocks
				}
				b.ReportMetric(float64(queries)/float64(b.N), "queries/op")
				b.ReportMetric(float64(blocks)/float64(b.N), "blocks/op")
				b.ReportMetric(float64(bl.window), "window-blocks")
			})
		}
	}
}

// BenchmarkVerdictWarm: a second intent of the same window, decided by a
// fresh engine over a cache that already holds the window verified (as
// after a restart with the SQLite cache, or for the next intent of a
// ledger): one tip, no block pages.
func BenchmarkVerdictWarm(b *testing.B) {
	bl := benchSetup(b)
	for _, ep := range benchEndpoints {
		b.Run(ep.name+"/middle-after-start", func(b *testing.B) {
			cache := reconcile.NewMemCache()
			first, _ := bl.engine(b, ep.ep, cache)
			bl.decide(b, first, "start")
			b.ResetTimer()
			var queries, blocks uint64
			for i := 0; i < b.N; i++ {
				e, c := bl.engine(b, ep.ep, cache)
				bl.decide(b, e, "middle")
				st := c.Stats()
				queries += st.Total
				blocks += st.Blocks
			}
			b.ReportMetric(float64(queries)/float64(b.N), "queries/op")
			b.ReportMetric(float64(blocks)/float64(b.N), "blocks/op")
		})
	}
}
