package icagent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled/icagent"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
)

func newLedgerConn(t *testing.T, cfg icagent.Config) (*ledgertest.Server, *ledgertest.Ledger, *icagent.Conn) {
	t.Helper()
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(21))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	l, err := srv.NewLedger(ledgertest.LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := srv.NewAgent(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Agent, cfg.Ledger, cfg.RootKey = ag, l.ID(), srv.RootKey()
	c, err := icagent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, l, c
}

func wantExpired(t *testing.T, err error, why string) {
	t.Helper()
	if !icrc3.IsKind(err, icrc3.KindTransport) || !strings.Contains(err.Error(), why) || icagent.Certified(err) {
		t.Fatalf("lost call: %v, want a transient E_TRANSPORT expiry", err)
	}
}

// TestCallLostEndsByItsExpiry: a call answered 202 and lost before
// induction is polled until its ingress expiry plus the allowed skew, not
// until the caller's context (here, none) ends. The certificates here
// never show the subnet's time past the expiry (they are an hour stale),
// so only the local deadline ends it.
func TestCallLostEndsByItsExpiry(t *testing.T) {
	const expiry, skew = time.Second, 200 * time.Millisecond
	srv, l, c := newLedgerConn(t, icagent.Config{IngressExpiry: expiry, ClockSkew: skew})
	srv.SetFaults(l.ID(), ledgertest.Faults{DropCalls: true, StaleTime: time.Hour})
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.Call(context.Background(), "icrc1_minting_account", icrc1.NoArgs)
		done <- err
	}()
	select {
	case err := <-done:
		if d := time.Since(start); d < expiry {
			t.Fatalf("gave up after %v, before the call's expiry %v", d, expiry)
		}
		wantExpired(t, err, "given up: no certified status by its ingress expiry")
	case <-time.After(20 * time.Second):
		t.Fatal("a lost call was still polled 20 s after its expiry")
	}
}

// TestCallLostEndsWhenCertifiedTimePassesExpiry: once a certificate shows
// the subnet's time past the call's expiry with no status for it, the call
// can never execute: it ends at once, long before the local deadline.
func TestCallLostEndsWhenCertifiedTimePassesExpiry(t *testing.T) {
	srv, l, c := newLedgerConn(t, icagent.Config{})
	srv.SetFaults(l.ID(), ledgertest.Faults{DropCalls: true})
	srv.Advance(10 * time.Minute) // the subnet's time is past every envelope's 4 min
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.Call(ctx, "icrc1_minting_account", icrc1.NoArgs)
	if ctx.Err() != nil {
		t.Fatalf("lost call polled until the caller gave up: %v", err)
	}
	wantExpired(t, err, "expired unexecuted")
}

// TestCallRejectCertifiedOnlyFromState: a reject read from the certified
// request status is Certified; one node's 200 non_replicated_rejection is
// not, though it says the same.
func TestCallRejectCertifiedOnlyFromState(t *testing.T) {
	srv, l, c := newLedgerConn(t, icagent.Config{})
	ctx := context.Background()
	_, err := c.Call(ctx, "no_such_method", icrc1.NoArgs)
	if !icagent.MethodMissing(err) || !icagent.Certified(err) {
		t.Fatalf("certified reject: %v (missing %v, certified %v)", err, icagent.MethodMissing(err), icagent.Certified(err))
	}
	srv.SetFaults(l.ID(), ledgertest.Faults{RejectMethod: "icrc1_minting_account"})
	_, err = c.Call(ctx, "icrc1_minting_account", icrc1.NoArgs)
	if !icagent.MethodMissing(err) || icagent.Certified(err) {
		t.Fatalf("non-replicated reject: %v (missing %v, certified %v)", err, icagent.MethodMissing(err), icagent.Certified(err))
	}
	srv.SetFaults(l.ID(), ledgertest.Faults{})
	if _, err := c.Call(ctx, "icrc1_minting_account", icrc1.NoArgs); err != nil {
		t.Fatal(err)
	}
}
