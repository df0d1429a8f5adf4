package icrc3history_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/ledgertest"
)

// ledgerClock is the replica's ledger time, which Advance moves.
func (e *env) ledgerClock() func() time.Time {
	return func() time.Time { return time.Unix(0, int64(e.srv.Now())) }
}

// TestLostMintingCallHoldsNoRead: the icrc1_minting_account call is
// answered 202 and lost before induction. Tip and page reads of the ledger
// proceed meanwhile; once the certified time passes the call's ingress
// expiry it can never execute, so the read ends with the node's word (not
// certified), and a later Detect asks the subnet again. (Detect here waits
// for the call as long as it runs.)
func TestLostMintingCallHoldsNoRead(t *testing.T) {
	e := newEnv(t, ledgertest.LedgerConfig{}, 50)
	c := e.client(t, icrc3history.ClientConfig{Now: e.ledgerClock(), MintingWait: time.Hour})
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{DropCalls: true})
	type result struct {
		f   icrc3.Features
		err error
	}
	detected := make(chan result, 1)
	go func() {
		f, err := c.Detect(context.Background())
		detected <- result{f, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tip, err := c.Tip(ctx)
	if err != nil {
		t.Fatalf("tip while the minting call is lost: %v", err)
	}
	var n uint64
	if err := c.BlocksDesc(ctx, 0, tip.Len(), func(p []icrc3.Block) error { n += uint64(len(p)); return nil }); err != nil || n != tip.Len() {
		t.Fatalf("pages while the minting call is lost: %d of %d blocks, %v", n, tip.Len(), err)
	}
	select {
	case r := <-detected:
		t.Fatalf("Detect ended before the lost call's expiry: %+v %v", r.f, r.err)
	default:
	}
	// Past the envelope's expiry in certified time the call can never run.
	e.srv.Advance(10 * time.Minute)
	var r result
	select {
	case r = <-detected:
	case <-ctx.Done():
		t.Fatal("Detect did not end once the certified time passed the call's expiry")
	}
	if r.err != nil || r.f.MintingCertified || r.f.MintingAccount == nil || !r.f.MintingAccount.Equal(e.ledger.MintingAccount()) {
		t.Fatalf("after the lost call: %+v %v, want the node's (uncertified) minting account", r.f, r.err)
	}
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{})
	f, err := c.Detect(ctx)
	if err != nil || !f.MintingCertified || f.MintingAccount == nil || !f.MintingAccount.Equal(e.ledger.MintingAccount()) {
		t.Fatalf("calls delivered again: %+v %v, want the certified minting account", f, err)
	}
}

// TestLostMintingCallDelaysDetectByTheWaitOnly: while the certified call
// is lost, Detect waits for it only MintingWait and then serves the
// node's answer as uncertain; the next Detect does not start another call
// while that one is in flight.
func TestLostMintingCallDelaysDetectByTheWaitOnly(t *testing.T) {
	e := newEnv(t, ledgertest.LedgerConfig{}, 10)
	c := e.client(t, icrc3history.ClientConfig{Now: e.ledgerClock(), MintingWait: 50 * time.Millisecond})
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{DropCalls: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		f, err := c.Detect(ctx)
		if err != nil || f.MintingCertified || f.MintingAccount == nil || !f.MintingAccount.Equal(e.ledger.MintingAccount()) {
			t.Fatalf("Detect %d while the call is lost: %+v %v, want the node's minting account, uncertain", i, f, err)
		}
	}
	if n := c.Stats().Queries["ledger:call:icrc1_minting_account"]; n != 1 {
		t.Fatalf("%d minting calls in flight at once, want 1", n)
	}
}

// TestMintingNonReplicatedRejectIsNotCertified: one node answers the
// icrc1_minting_account call with a 200 non_replicated_rejection saying the
// method does not exist. No certificate backs it: the ledger's minting
// account is not settled by it, and is read again once the subnet answers.
func TestMintingNonReplicatedRejectIsNotCertified(t *testing.T) {
	e := newEnv(t, ledgertest.LedgerConfig{}, 10)
	c := e.client(t, icrc3history.ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{RejectMethod: "icrc1_minting_account"})
	if f, err := c.Detect(ctx); err == nil && f.MintingCertified {
		t.Fatalf("one node's non-replicated rejection taken as certified: %+v", f)
	}
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{})
	f, err := c.Detect(ctx)
	if err != nil || !f.MintingCertified || f.MintingAccount == nil || !f.MintingAccount.Equal(e.ledger.MintingAccount()) {
		t.Fatalf("the subnet answers again: %+v %v, want the certified minting account", f, err)
	}
}

// TestTipEndpointDeniedOnceIsAskedAgain: while features are first
// detected, one node says the ledger serves no tip certificate method.
// That is one node's word, not a settled fact: the tip is unreadable
// (E_UNCERTIFIED) then, and is read once the node answers again, after
// the bounded re-detection interval.
func TestTipEndpointDeniedOnceIsAskedAgain(t *testing.T) {
	e := newEnv(t, ledgertest.LedgerConfig{DisableLegacy: true}, 10)
	c := e.client(t, icrc3history.ClientConfig{Now: e.ledgerClock()})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{RejectMethod: "icrc3_get_tip_certificate"})
	if _, err := c.Tip(ctx); !icrc3.IsKind(err, icrc3.KindUncertified) {
		t.Fatalf("tip endpoint denied: %v, want E_UNCERTIFIED", err)
	}
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{})
	e.srv.Advance(5 * time.Minute)
	tip, err := c.Tip(ctx)
	if err != nil || tip.Len() != 10 {
		t.Fatalf("tip endpoint served again: %+v %v, want the certified tip of 10 blocks", tip, err)
	}
}

// TestMintingCallFailedBeforeACallerCameIsAskedAgain: a certified
// minting call starts while the replica signs with a wrong key, and a
// second Detect arrives after the fault lifted, while that call is still
// in flight. The call's failure says nothing about the subnet once the
// second caller came: it must ask again and get the certified account,
// not serve one node's word for a fault that is over.
func TestMintingCallFailedBeforeACallerCameIsAskedAgain(t *testing.T) {
	e := newEnv(t, ledgertest.LedgerConfig{}, 10)
	c := e.client(t, icrc3history.ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Tip(ctx); err != nil { // the endpoints are detected; the minting account is not
		t.Fatal(err)
	}
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{WrongKey: true, Latency: 2 * time.Second})
	first := make(chan error, 1)
	go func() {
		_, err := c.Detect(ctx)
		first <- err
	}()
	testutil.Eventually(t, 10*time.Second, "the first minting call in flight", func() (bool, string) {
		n := c.Stats().Queries["ledger:call:icrc1_minting_account"]
		return n == 1, fmt.Sprintf("%d calls", n)
	})
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{})
	f, err := c.Detect(ctx)
	if err != nil || !f.MintingCertified || f.MintingAccount == nil || !f.MintingAccount.Equal(e.ledger.MintingAccount()) {
		t.Fatalf("Detect after the fault lifted: %+v %v, want the certified minting account", f, err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first Detect: %v", err)
	}
}
