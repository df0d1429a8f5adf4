package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"
	"go.uber.org/zap/zaptest"

	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/support"
)

func decodeOK(canister string) (principal.Principal, bool) {
	id, err := principal.Decode(canister)
	return id, err == nil
}

// fakeClock is a settable clock for the retry delay.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// The test ledger's units are learned through a verified query, once; a
// replica whose certificates do not verify gives raw units, and the ledger
// is asked again only after the retry delay.
func TestLedgerMetaFromTestLedger(t *testing.T) {
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(5))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	l, err := srv.NewLedger(ledgertest.LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := srv.NewAgent(nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	m := newLedgerMeta(decodeOK, queryLedgerDisplay(ag), zaptest.NewLogger(t))
	m.wait, m.now = time.Minute, clock.now
	id := l.ID().Encode()

	// Certificates signed by a key the agent does not trust: the signed
	// query is refused, so no units are shown.
	srv.SetFaults(l.ID(), ledgertest.Faults{WrongKey: true})
	if d, s, ok := m.lookup(id); ok {
		t.Fatalf("units %d %q from a replica whose signatures do not verify", d, s)
	}
	srv.SetFaults(l.ID(), ledgertest.Faults{})
	before := l.Counters().Calls["icrc1_decimals"]
	if _, _, ok := m.lookup(id); ok {
		t.Fatal("a failed ledger was asked again before the retry delay")
	}
	if n := l.Counters().Calls["icrc1_decimals"]; n != before {
		t.Fatalf("icrc1_decimals called %d times within the retry delay", n-before)
	}

	clock.add(m.retry)
	d, s, ok := m.lookup(id)
	if !ok || d != 8 || s != "TST" {
		t.Fatalf("lookup after the retry delay: %d %q %t, want 8 TST", d, s, ok)
	}
	calls := l.Counters().Calls
	for i := 0; i < 3; i++ {
		if d, s, ok := m.lookup(id); !ok || d != 8 || s != "TST" {
			t.Fatalf("cached lookup: %d %q %t", d, s, ok)
		}
	}
	if now := l.Counters().Calls; now["icrc1_symbol"] != calls["icrc1_symbol"] || now["icrc1_decimals"] != calls["icrc1_decimals"] {
		t.Fatalf("cached units asked again: %v, was %v", now, calls)
	}
	if support.FormatAmount("150000000", d, s) != "1.5 TST" {
		t.Fatalf("formatted %q", support.FormatAmount("150000000", d, s))
	}
}

// A slow ledger does not hold a page: lookups wait for a fetch at most
// wait from its start, all of them together, and the fetch answers a
// later lookup.
func TestLedgerMetaSlowLedger(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	queries := 0
	query := func(ctx context.Context, _ principal.Principal) (ledgerDisplay, error) {
		mu.Lock()
		queries++
		mu.Unlock()
		select {
		case <-release:
			return ledgerDisplay{decimals: 6, symbol: "ckUSDC"}, nil
		case <-ctx.Done():
			return ledgerDisplay{}, ctx.Err()
		}
	}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	m := newLedgerMeta(decodeOK, query, nil)
	m.wait, m.now = time.Millisecond, clock.now
	const id = "xevnm-gaaaa-aaaar-qafnq-cai"
	if _, _, ok := m.lookup(id); ok {
		t.Fatal("units before the ledger answered")
	}
	// Past the fetch's wait, a lookup returns at once (with a wait of an
	// hour per lookup this would hang), and no second fetch starts.
	m.wait = time.Hour
	clock.add(2 * time.Hour)
	if _, _, ok := m.lookup(id); ok {
		t.Fatal("units before the ledger answered")
	}
	close(release)
	// The fetch ends on its own goroutine: poll for its answer.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		d, s, ok := m.lookup(id)
		if ok && d == 6 && s == "ckUSDC" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fetch's answer is not cached: %s", fmt.Sprint(d, s, ok))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if queries != 1 {
		t.Fatalf("%d queries, want 1", queries)
	}
}

// Canisters the daemon would not read, text that is no principal, and
// canisters beyond the cache's bound are never asked.
func TestLedgerMetaRefusals(t *testing.T) {
	asked := 0
	query := func(context.Context, principal.Principal) (ledgerDisplay, error) {
		asked++
		return ledgerDisplay{}, errors.New("canister has no icrc1_symbol")
	}
	d := &Daemon{cfg: Config{StrictLedgers: true, Ledgers: map[string]reconcile.LedgerConfig{}}}
	m := d.newLedgerMeta(nil)
	m.query = query
	if _, _, ok := m.lookup("xevnm-gaaaa-aaaar-qafnq-cai"); ok || asked != 0 {
		t.Fatalf("an unconfigured ledger was asked with strict ledgers (asked %d)", asked)
	}
	m = newLedgerMeta(decodeOK, query, nil)
	if _, _, ok := m.lookup("not a principal"); ok || asked != 0 {
		t.Fatalf("a malformed canister id was asked (asked %d)", asked)
	}
	m.limit = 1
	if _, _, ok := m.lookup("xevnm-gaaaa-aaaar-qafnq-cai"); ok || asked != 1 {
		t.Fatalf("first ledger: asked %d", asked)
	}
	if _, _, ok := m.lookup("mxzaz-hqaaa-aaaar-qaada-cai"); ok || asked != 1 {
		t.Fatalf("a ledger beyond the cache bound was asked (asked %d)", asked)
	}
}

func TestCheckSymbol(t *testing.T) {
	for _, s := range []string{"TST", "ckBTC", "ICP", "€URC", "<b>"} {
		if err := checkSymbol(s); err != nil {
			t.Errorf("%q refused: %v", s, err)
		}
	}
	for _, s := range []string{"", "two words", "\x1b[31mRED", "a\nb", "\xff", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"} {
		if checkSymbol(s) == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
