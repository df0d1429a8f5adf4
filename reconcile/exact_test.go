package reconcile_test

import (
	"encoding/hex"
	"encoding/json"
	"slices"
	"testing"

	"github.com/aviate-labs/agent-go/candid"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/matcher"
)

// withArgHex is an intent body with the Candid the call really sent.
func withArgHex(t *testing.T, body []byte, arg icrc1.TransferArg) []byte {
	t.Helper()
	raw, err := candid.Marshal([]any{arg})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	m["arg_hex"] = hex.EncodeToString(raw)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Two calls under one stamp that differ only in how they spell an account
// (an explicit all-zero subaccount, or none) or in whether they set the fee
// are two transactions to the DFINITY ledger: both execute. Given the sent
// bytes, found must name the block of this call, and report the other.
func TestExactMatchTwoCallsUnderOneStamp(t *testing.T) {
	fee := uint64(10_000) // the test ledger's fee (ledgertest's default)
	for _, c := range []struct {
		name         string
		first, other func(*transferIntent)
		differs      string
	}{
		{"to subaccount form", func(ti *transferIntent) { ti.to.Subaccount = make([]byte, 32) }, func(*transferIntent) {}, matcher.FieldSubaccountForm},
		{"from subaccount form", func(*transferIntent) {}, func(ti *transferIntent) { ti.fromSub = make([]byte, 32) }, matcher.FieldSubaccountForm},
		{"fee presence", func(*transferIntent) {}, func(ti *transferIntent) { ti.fee = &fee }, matcher.FieldFeeForm},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, envOpt{})
			if f, _ := e.ledger.Fee().Uint64(); f != fee {
				t.Fatalf("test ledger fee %d, want %d", f, fee)
			}
			alice, bob := principalN(1), principalN(2)
			e.fund(acct(alice, nil), 1_000_000)
			stamp := e.srv.Now()
			base := transferIntent{id: "exact", caller: alice, to: acct(bob, nil), amount: 5, stamp: stamp, memo: []byte("m")}
			first, second := base, base
			c.first(&first)
			c.other(&second)
			i1, err := e.ledger.Transfer(alice, first.arg())
			if err != nil {
				t.Fatal(err)
			}
			i2, err := e.ledger.Transfer(alice, second.arg())
			if err != nil {
				t.Fatalf("the second call is another transaction to the ledger, not a duplicate: %v", err)
			}
			for _, tc := range []struct {
				ti        transferIntent
				want, not uint64
			}{{second, i2, i1}, {first, i1, i2}} {
				in := e.intent(withArgHex(t, tc.ti.json(e.ledger.ID()), tc.ti.arg()))
				v := e.decide(in)
				if v.Status != reconciled.StatusFound || v.Block == nil || uint64(v.Block.Index) != tc.want {
					t.Fatalf("intent of block %d: %s block %+v, want found in block %d", tc.want, v.Status, v.Block, tc.want)
				}
				if v.Block.Match != reconciled.MatchExact {
					t.Errorf("block.match %q, want %q", v.Block.Match, reconciled.MatchExact)
				}
				if !slices.ContainsFunc(v.NearMisses, func(n reconciled.NearMiss) bool {
					return uint64(n.Index) == tc.not && slices.Equal(n.Differs, []string{c.differs})
				}) {
					t.Errorf("near misses %+v: want block %d reported as differing in %s", v.NearMisses, tc.not, c.differs)
				}
				// Without the sent bytes both blocks match up to
				// normalisation: the first is named, and says so.
				plain := e.decide(e.intent(tc.ti.json(e.ledger.ID())))
				if plain.Status != reconciled.StatusFound || plain.Block.Match != reconciled.MatchNormalized || uint64(plain.Block.Index) != min(i1, i2) {
					t.Errorf("without arg_hex: %s %+v, want found (normalized) in block %d", plain.Status, plain.Block, min(i1, i2))
				}
			}
		})
	}
}

// When only the other call executed, the sent bytes never did: while the
// window is open this call may still execute (not_yet, the other block a
// near miss); once it closed, the same transfer up to normalisation is in
// the ledger, so the verdict is found as normalized, never absent.
func TestExactMatchNormalizedOnlyAtClosure(t *testing.T) {
	e := newEnv(t, envOpt{})
	alice, bob := principalN(1), principalN(2)
	e.fund(acct(alice, nil), 1_000_000)
	stamp := e.srv.Now()
	sent := transferIntent{id: "loose", caller: alice, to: acct(bob, nil), amount: 5, stamp: stamp}
	other := sent
	other.to.Subaccount = make([]byte, 32)
	oi, err := e.ledger.Transfer(alice, other.arg())
	if err != nil {
		t.Fatal(err)
	}
	in := e.intent(withArgHex(t, sent.json(e.ledger.ID()), sent.arg()))
	v := e.decide(in)
	if v.Status != reconciled.StatusNotYet || len(v.NearMisses) != 1 || uint64(v.NearMisses[0].Index) != oi ||
		!slices.Equal(v.NearMisses[0].Differs, []string{matcher.FieldSubaccountForm}) {
		t.Fatalf("open window: %s near misses %+v, want not_yet with block %d differing in %s", v.Status, v.NearMisses, oi, matcher.FieldSubaccountForm)
	}
	e.closeWindow()
	v = e.decide(in)
	if v.Status != reconciled.StatusFound || v.Block == nil || uint64(v.Block.Index) != oi || v.Block.Match != reconciled.MatchNormalized || len(v.NearMisses) != 0 {
		t.Fatalf("closed window: %s block %+v near misses %+v, want found (normalized) in block %d", v.Status, v.Block, v.NearMisses, oi)
	}
}
