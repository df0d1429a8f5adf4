package reconcile_test

import (
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/reconcile"
)

// TestMintingAccountLieNeverAbsent: one node's query reply names the
// caller, or the recipient, as the ledger's minting account. Read from that
// reply, the real transfer block would become a near miss differing in
// method and the closed window a final absent. The minting account a
// verdict depends on is read by a certified call, so the lie costs nothing.
func TestMintingAccountLieNeverAbsent(t *testing.T) {
	for _, side := range []string{"caller", "recipient"} {
		t.Run(side, func(t *testing.T) {
			e := newEnv(t, envOpt{})
			alice, bob := principalN(1), principalN(2)
			e.fund(acct(alice, nil), 1_000_000)
			ti := transferIntent{id: "paid", caller: alice, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
			idx, err := e.ledger.Transfer(alice, ti.arg())
			if err != nil {
				t.Fatal(err)
			}
			lie := acct(alice, nil)
			if side == "recipient" {
				lie = acct(bob, nil)
			}
			e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{LieMintingAccount: lie.String()})
			e.closeWindow()
			v := e.decide(e.intent(ti.json(e.ledger.ID())))
			if v.Status != reconciled.StatusFound || v.Block == nil || uint64(v.Block.Index) != idx {
				t.Fatalf("minting account lied to be the %s: got %s %+v %+v, want found at %d", side, v.Status, v.Reason, v.NearMisses, idx)
			}
		})
	}
}

// TestMintingAccountUncertainIsUnreadable: when the certified read of the
// minting account fails, only the node's word is left. A mint block that
// matches the intent in every field but the kind then keeps the verdict
// unreadable (E_MINTING_UNCERTAIN), never absent, until the minting account
// is certain; once it is, the verdict is decided. A plain transfer block
// proves its own kind (the ledger writes one only when neither party is the
// minting account) and is found even meanwhile.
func TestMintingAccountUncertainIsUnreadable(t *testing.T) {
	for _, lie := range []string{"none", "other"} {
		t.Run(lie, func(t *testing.T) {
			e := newEnv(t, envOpt{})
			alice, bob := principalN(1), principalN(2)
			minter := e.ledger.MintingAccount().Owner
			e.fund(acct(alice, nil), 1_000_000)
			mint := transferIntent{id: "mint", caller: minter, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
			mintIdx, err := e.ledger.Transfer(minter, mint.arg())
			if err != nil {
				t.Fatal(err)
			}
			paid := transferIntent{id: "paid", caller: alice, to: acct(bob, nil), amount: 7, stamp: e.srv.Now()}
			paidIdx, err := e.ledger.Transfer(alice, paid.arg())
			if err != nil {
				t.Fatal(err)
			}
			told := lie
			if lie == "other" {
				told = acct(principalN(9), nil).String()
			}
			// Lost replies make the certified call fail; queries still answer.
			e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{LieMintingAccount: told, LoseReplies: true})
			e.closeWindow()
			in := e.intent(mint.json(e.ledger.ID()))
			v := e.decide(in)
			if v.Status != reconciled.StatusUnreadable || v.Reason == nil || v.Reason.Code != "E_MINTING_UNCERTAIN" {
				t.Fatalf("mint, uncertain minting account: got %s %+v, want unreadable E_MINTING_UNCERTAIN", v.Status, v.Reason)
			}
			if v := e.decide(e.intent(paid.json(e.ledger.ID()))); v.Status != reconciled.StatusFound || uint64(v.Block.Index) != paidIdx {
				t.Fatalf("transfer, uncertain minting account: got %s %+v, want found at %d", v.Status, v.Reason, paidIdx)
			}
			e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{})
			if v := e.decide(in); v.Status != reconciled.StatusFound || uint64(v.Block.Index) != mintIdx {
				t.Fatalf("minting account certain again: got %s %+v, want found at %d", v.Status, v.Reason, mintIdx)
			}
		})
	}
}

// TestQueriesModeIdleLedgerWaitsForABlock: a ledger read `verify: queries`
// closes windows only on a time the blocks read cover (the last block's
// timestamp, capped by the subnet's certified time less a replica's lag):
// a replica answering queries may lag by any amount, so the certified time
// alone proves nothing of its blocks. An idle ledger's windows stay open
// until a later block appears.
func TestQueriesModeIdleLedgerWaitsForABlock(t *testing.T) {
	e := newEnv(t, envOpt{ledger: ledgertest.LedgerConfig{Uncertified: true}, verify: icrc3.VerifyQueries})
	alice, bob := principalN(1), principalN(2)
	e.fund(acct(alice, nil), 1_000_000)
	paid := transferIntent{id: "paid", caller: alice, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
	idx, err := e.ledger.Transfer(alice, paid.arg())
	if err != nil {
		t.Fatal(err)
	}
	unpaid := paid
	unpaid.id, unpaid.amount = "unpaid", 6
	if v := e.decide(e.intent(unpaid.json(e.ledger.ID()))); v.Status != reconciled.StatusNotYet {
		t.Fatalf("window open: got %s %+v, want not_yet", v.Status, v.Reason)
	}
	e.closeWindow()
	if v := e.decide(e.intent(unpaid.json(e.ledger.ID()))); v.Status != reconciled.StatusNotYet {
		t.Fatalf("idle ledger after the window: got %s %+v, want not_yet until a later block", v.Status, v.Evidence)
	}
	e.fund(acct(principalN(3), nil), 1)
	v := e.decide(e.intent(unpaid.json(e.ledger.ID())))
	if v.Status != reconciled.StatusAbsent || v.Evidence == nil || v.Evidence.Verified != "queries" {
		t.Fatalf("a block after the window: got %s %+v %+v, want absent on queries evidence", v.Status, v.Reason, v.Evidence)
	}
	if v := e.decide(e.intent(paid.json(e.ledger.ID()))); v.Status != reconciled.StatusFound || uint64(v.Block.Index) != idx {
		t.Fatalf("paid: got %s, want found at %d", v.Status, idx)
	}
}

// TestMintingAccountConfiguredAgainstCertified: an operator's minting=
// that contradicts the ledger's certified minting account is refused
// (E_MINTING_CONFLICT) rather than used to read the ledger's blocks.
func TestMintingAccountConfiguredAgainstCertified(t *testing.T) {
	wrong := acct(principalN(9), nil)
	e := newEnv(t, envOpt{cfg: reconcile.LedgerConfig{MintingOverride: &wrong}})
	alice := principalN(1)
	e.fund(acct(alice, nil), 1_000_000)
	ti := transferIntent{id: "paid", caller: alice, to: wrong, amount: 5, stamp: e.srv.Now()}
	if _, err := e.ledger.Transfer(alice, ti.arg()); err != nil {
		t.Fatal(err)
	}
	e.closeWindow()
	v := e.decide(e.intent(ti.json(e.ledger.ID())))
	if v.Status != reconciled.StatusUnreadable || v.Reason == nil || v.Reason.Code != "E_MINTING_CONFLICT" {
		t.Fatalf("minting= against the certified account: got %s %+v, want unreadable E_MINTING_CONFLICT", v.Status, v.Reason)
	}
}

// TestQueriesModeLaggingReplicaNeverAbsent: in `verify: queries` the blocks
// come from whichever replica answers. One that lags behind the subnet's
// certified time by more than a few seconds hides a payment executed
// shortly before its window's end: the window may close only on a time the
// blocks read cover, so the verdict waits (not_yet) and is found once the
// replica catches up.
func TestQueriesModeLaggingReplicaNeverAbsent(t *testing.T) {
	e := newEnv(t, envOpt{ledger: ledgertest.LedgerConfig{Uncertified: true}, verify: icrc3.VerifyQueries})
	alice, bob := principalN(1), principalN(2)
	e.fund(acct(alice, nil), 1_000_000)
	paid := transferIntent{id: "paid", caller: alice, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
	in := e.intent(paid.json(e.ledger.ID()))
	// Executed late, inside the ledger's window for its stamp.
	e.srv.Advance(24*time.Hour - time.Minute)
	idx, err := e.ledger.Transfer(alice, paid.arg())
	if err != nil {
		t.Fatal(err)
	}
	// Certified time passes the window's end by more than a lagging
	// replica is allowed; the replica answering queries has not seen the
	// payment.
	e.srv.Advance(4 * time.Minute)
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{LagBlocks: 1})
	if v := e.decide(in); v.Status == reconciled.StatusAbsent || v.Final {
		t.Fatalf("payment hidden by a lagging replica: got %s final=%v %+v, want a verdict that is not final", v.Status, v.Final, v.Evidence)
	}
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{})
	if v := e.decide(in); v.Status != reconciled.StatusFound || uint64(v.Block.Index) != idx {
		t.Fatalf("replica caught up: got %s %+v, want found at %d", v.Status, v.Reason, idx)
	}
}

// TestMintingAccountNonReplicatedRejectIsNotFinal: one node answers the
// icrc1_minting_account call with a 200 non_replicated_rejection (and the
// query with a signed reject) saying the method does not exist. No
// certificate backs it, so it settles nothing: the mint intent is not
// final while the account is unknown, and is found once the subnet
// answers, in the same process.
func TestMintingAccountNonReplicatedRejectIsNotFinal(t *testing.T) {
	e := newEnv(t, envOpt{})
	minter, bob := e.ledger.MintingAccount().Owner, principalN(2)
	mint := transferIntent{id: "mint", caller: minter, to: acct(bob, nil), amount: 5, stamp: e.srv.Now()}
	idx, err := e.ledger.Transfer(minter, mint.arg())
	if err != nil {
		t.Fatal(err)
	}
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{RejectMethod: "icrc1_minting_account"})
	e.closeWindow()
	in := e.intent(mint.json(e.ledger.ID()))
	if v := e.decide(in); v.Final {
		t.Fatalf("minting account denied by one node: final %s %+v", v.Status, v.Reason)
	}
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{})
	if v := e.decide(in); v.Status != reconciled.StatusFound || uint64(v.Block.Index) != idx {
		t.Fatalf("the subnet answers again: got %s %+v, want found at %d", v.Status, v.Reason, idx)
	}
}
