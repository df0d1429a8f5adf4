package ledgertest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/leb128"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/fxamacker/cbor/v2"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// The ledger behind the replica, driven by agent-go over both call paths
// (v4 sync and v3 async) and both subnet modes: ICRC-1/2 calls from
// verified senders, balances by verified queries, and the tip certificate
// accepted by certification.VerifyCertifiedData.
func TestLedgerThroughReplica(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			s, err := NewServer(append([]Option{WithSeed(11)}, m.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			aliceID, bobID := testIdentity(t, 21), testIdentity(t, 22)
			alice, bob := aliceID.Sender(), bobID.Sender()
			carol := principal.NewSelfAuthenticating([]byte("carol"))
			l, err := s.NewLedger(LedgerConfig{InitialBalances: []Balance{{Account: icrc3.Account{Owner: alice}, Amount: icrc3.NatFromUint64(1_000_000)}}})
			if err != nil {
				t.Fatal(err)
			}
			aa, err := s.NewAgent(aliceID)
			if err != nil {
				t.Fatal(err)
			}
			// Bob uses the legacy v3 call (202 + polling) and v2 read_state.
			ba, err := s.NewAgentWithConfig(agent.Config{Identity: bobID, ClientConfig: []agent.ClientOption{agent.WithLegacyAPI()}})
			if err != nil {
				t.Fatal(err)
			}

			var tr icrc1.TransferResult
			if err := aa.Call(l.ID(), "icrc1_transfer", []any{icrc1.TransferArg{To: icrc3.CandidAccount{Owner: bob}, Amount: idl.NewNat(uint64(50_000))}}, []any{&tr}); err != nil || tr.Ok == nil {
				t.Fatalf("transfer: %v %+v", err, tr.Err)
			}
			var ar icrc1.ApproveResult
			if err := aa.Call(l.ID(), "icrc2_approve", []any{icrc1.ApproveArgs{Spender: icrc3.CandidAccount{Owner: bob}, Amount: idl.NewNat(uint64(200_000))}}, []any{&ar}); err != nil || ar.Ok == nil {
				t.Fatalf("approve: %v %+v", err, ar.Err)
			}
			var fr icrc1.TransferFromResult
			tf := icrc1.TransferFromArgs{From: icrc3.CandidAccount{Owner: alice}, To: icrc3.CandidAccount{Owner: carol}, Amount: idl.NewNat(uint64(70_000))}
			if err := ba.Call(l.ID(), "icrc2_transfer_from", []any{tf}, []any{&fr}); err != nil || fr.Ok == nil {
				t.Fatalf("transfer_from: %v %+v", err, fr.Err)
			}
			// The ledger saw the verified senders as callers.
			ex := l.Executions()
			if len(ex) != 3 || !ex[0].Caller.Equal(alice) || !ex[1].Caller.Equal(alice) || !ex[2].Caller.Equal(bob) {
				t.Fatalf("executions %+v", ex)
			}
			var bal idl.Nat
			if err := ba.Query(l.ID(), "icrc1_balance_of", []any{icrc3.CandidAccount{Owner: carol}}, []any{&bal}); err != nil {
				t.Fatal(err)
			}
			if bal.BigInt().Uint64() != 70_000 {
				t.Fatalf("carol's balance %s, want 70000", bal.BigInt())
			}

			// The tip certificate, verified as a client must.
			var tip *struct {
				Certificate []byte `ic:"certificate"`
				HashTree    []byte `ic:"hash_tree"`
			}
			if err := aa.Query(l.ID(), "icrc3_get_tip_certificate", []any{}, []any{&tip}); err != nil || tip == nil {
				t.Fatalf("tip certificate: %v, %v", tip, err)
			}
			var cert certification.Certificate
			if err := cbor.Unmarshal(tip.Certificate, &cert); err != nil {
				t.Fatal(err)
			}
			tree, err := hashtree.Deserialize(tip.HashTree)
			if err != nil {
				t.Fatal(err)
			}
			root := tree.Reconstruct()
			if err := certification.VerifyCertifiedData(cert, l.ID(), aa.GetRootKey(), root[:]); err != nil {
				t.Fatalf("VerifyCertifiedData: %v", err)
			}
			rawIdx, err := hashtree.Lookup(tree, hashtree.Label("last_block_index"))
			if err != nil {
				t.Fatal(err)
			}
			idx, err := leb128.DecodeUnsigned(bytes.NewReader(rawIdx))
			if err != nil {
				t.Fatal(err)
			}
			hash, err := hashtree.Lookup(tree, hashtree.Label("last_block_hash"))
			th := l.TipHash()
			if err != nil || idx.Uint64() != fr.Ok.BigInt().Uint64() || !bytes.Equal(hash, th[:]) {
				t.Fatalf("certified tip %d %x, want %d %x (%v)", idx, hash, fr.Ok.BigInt(), th, err)
			}
			// A non-Candid argument is the canister's reject, not a replica failure.
			_, err = aa.QueryRaw(l.ID(), "icrc1_balance_of", []byte("not candid"))
			if err == nil || !strings.Contains(err.Error(), "IC0") {
				t.Fatalf("bad Candid argument: %v, want a reject with an error code", err)
			}
			// The certificate is bound to the ledger: another canister id fails.
			if err := certification.VerifyCertifiedData(cert, carol, aa.GetRootKey(), root[:]); err == nil {
				t.Fatal("tip certificate verified for another canister")
			}
		})
	}
}
