package ledgertest

import (
	"testing"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

func icpCall(t *testing.T, s *Server, l *ICPLedger, caller principal.Principal, method string, arg any) []byte {
	t.Helper()
	raw, err := candid.Marshal([]any{arg})
	if err != nil {
		t.Fatal(err)
	}
	out, rej := l.Update(CallContext{Caller: caller, Time: s.Now(), Replicated: true}, method, raw)
	if rej != nil {
		t.Fatalf("%s: %+v", method, rej)
	}
	return out
}

var (
	icpAlice = principal.Principal{Raw: []byte{1, 2, 3}}
	icpBob   = principal.Principal{Raw: []byte{4, 5, 6}}
)

// newICPTestLedger is an ICP-style ledger with icpAlice funded.
func newICPTestLedger(t *testing.T, seed int64) (*Server, *ICPLedger) {
	t.Helper()
	s, err := NewServer(WithSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	l, err := s.NewICPLedger(LedgerConfig{InitialBalances: []Balance{{Account: icrc3.Account{Owner: icpAlice}, Amount: icrc3.NatFromUint64(1e9)}}})
	if err != nil {
		t.Fatal(err)
	}
	return s, l
}

func TestICPLedgerDeduplicatesAsTheICPLedger(t *testing.T) {
	s, l := newICPTestLedger(t, 3)
	alice, bob := icpAlice, icpBob
	st := s.Now()
	amt := icrc1.IDLNat(icrc3.NatFromUint64(500))
	first := icrc1.TransferArg{To: icrc3.Account{Owner: bob}.ToCandid(), Amount: amt, CreatedAtTime: &st}
	var r icrc1.TransferResult
	if err := candid.Unmarshal(icpCall(t, s, l, alice, "icrc1_transfer", first), []any{&r}); err != nil || r.Ok == nil {
		t.Fatalf("first: %+v %v", r, err)
	}
	idx := r.Ok.BigInt().Uint64()
	zeros := make([]byte, 32)
	fee := icrc1.IDLNat(icrc3.NatFromUint64(10_000))
	for name, a := range map[string]icrc1.TransferArg{
		"zero from_subaccount": {FromSubaccount: &zeros, To: first.To, Amount: amt, CreatedAtTime: &st},
		"fee named":            {To: first.To, Amount: amt, Fee: &fee, CreatedAtTime: &st},
	} {
		var r icrc1.TransferResult
		if err := candid.Unmarshal(icpCall(t, s, l, alice, "icrc1_transfer", a), []any{&r}); err != nil {
			t.Fatal(err)
		}
		if r.Err == nil || r.Err.Duplicate == nil || r.Err.Duplicate.DuplicateOf.BigInt().Uint64() != idx {
			t.Errorf("%s: %+v, want Duplicate of %d", name, r, idx)
		}
	}
	if n := l.Len(); n != idx+1 {
		t.Fatalf("chain length %d after duplicates, want %d", n, idx+1)
	}
	// Another stamp is another transaction.
	st2 := st + 1
	other := first
	other.CreatedAtTime = &st2
	if err := candid.Unmarshal(icpCall(t, s, l, alice, "icrc1_transfer", other), []any{&r}); err != nil || r.Ok == nil {
		t.Fatalf("other stamp: %+v %v", r, err)
	}
}

// The transaction predicted for a call is the one the ledger records.
func TestICPLedgerPredictsWhatItRecords(t *testing.T) {
	s, l := newICPTestLedger(t, 4)
	alice, bob := icpAlice, icpBob
	minting := l.MintingAccount()
	n := func(v uint64) icrc3.Nat { return icrc3.NatFromUint64(v) }
	stamp := func() *uint64 { s.Advance(1); v := s.Now(); return &v }
	exp := s.Now() + 1e12
	calls := []struct {
		caller principal.Principal
		method string
		arg    any
	}{
		{alice, "icrc1_transfer", icrc1.TransferArg{To: icrc3.Account{Owner: bob}.ToCandid(), Amount: icrc1.IDLNat(n(7)), Memo: &[]byte{9}, CreatedAtTime: stamp()}},
		{alice, "icrc2_approve", icrc1.ApproveArgs{Spender: icrc3.Account{Owner: bob}.ToCandid(), Amount: icrc1.IDLNat(n(100000)), ExpiresAt: &exp, CreatedAtTime: stamp()}},
		{bob, "icrc2_transfer_from", icrc1.TransferFromArgs{From: icrc3.Account{Owner: alice}.ToCandid(), To: icrc3.Account{Owner: bob}.ToCandid(), Amount: icrc1.IDLNat(n(5)), CreatedAtTime: stamp()}},
		{minting.Owner, "icrc1_transfer", icrc1.TransferArg{To: icrc3.Account{Owner: bob}.ToCandid(), Amount: icrc1.IDLNat(n(50000)), CreatedAtTime: stamp()}},
		{alice, "icrc1_transfer", icrc1.TransferArg{To: minting.ToCandid(), Amount: icrc1.IDLNat(n(20000)), CreatedAtTime: stamp()}},
	}
	for _, c := range calls {
		raw, err := candid.Marshal([]any{c.arg})
		if err != nil {
			t.Fatal(err)
		}
		want, ok := l.icpTxOf(c.caller, c.method, raw)
		if !ok {
			t.Fatalf("%s: no prediction", c.method)
		}
		before := l.Len()
		icpCall(t, s, l, c.caller, c.method, c.arg)
		if l.Len() != before+1 {
			t.Fatalf("%s wrote no block", c.method)
		}
		b, _ := l.RawBlock(before)
		got, err := icp.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if icp.TxHash(&got.Tx) != icp.TxHash(want) {
			t.Errorf("%s: recorded %+v, predicted %+v", c.method, got.Tx, *want)
		}
	}
}
