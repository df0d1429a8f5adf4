package ledgertest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/identity"
	"github.com/aviate-labs/agent-go/leb128"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/fxamacker/cbor/v2"

	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
)

func ledgerIdentity(t *testing.T, n byte) *identity.Ed25519Identity {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	seed[0], seed[1] = n, 'L'
	sk := ed25519.NewKeyFromSeed(seed)
	id, err := identity.NewEd25519Identity(sk.Public().(ed25519.PublicKey), sk)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// verifiedTip fetches and verifies the tip certificate as a client must.
func verifiedTip(t *testing.T, a *agent.Agent, ledger principal.Principal) (uint64, []byte) {
	t.Helper()
	var dc *dataCertificate
	if err := a.Query(ledger, "icrc3_get_tip_certificate", []any{}, []any{&dc}); err != nil {
		t.Fatal(err)
	}
	if dc == nil {
		t.Fatal("no tip certificate")
	}
	var cert certification.Certificate
	if err := cbor.Unmarshal(dc.Certificate, &cert); err != nil {
		t.Fatal(err)
	}
	tree, err := hashtree.Deserialize(dc.HashTree)
	if err != nil {
		t.Fatal(err)
	}
	root := tree.Reconstruct()
	if err := certification.VerifyCertifiedData(cert, ledger, a.GetRootKey(), root[:]); err != nil {
		t.Fatalf("tip certificate does not verify: %v", err)
	}
	ib, err := hashtree.Lookup(tree, hashtree.Label("last_block_index"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := leb128.DecodeUnsigned(bytes.NewReader(ib))
	if err != nil {
		t.Fatal(err)
	}
	tip, err := hashtree.Lookup(tree, hashtree.Label("last_block_hash"))
	if err != nil {
		t.Fatal(err)
	}
	return idx.Uint64(), tip
}

// Through the real replica and an unmodified agent-go with query
// verification: calls, dedup, the certified tip, paging with archive
// callbacks, and a lagging replica that still certifies honestly.
func TestLedgerEndToEnd(t *testing.T) {
	s, err := NewServer(WithSeed(5))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	aliceID := ledgerIdentity(t, 1)
	alice := aliceID.Sender()
	bob := ledgerIdentity(t, 2).Sender()
	l, err := s.NewLedger(LedgerConfig{
		ArchiveThreshold: 150, ArchiveBatch: 100,
		InitialBalances: []Balance{{Account: icrc3.Account{Owner: alice}, Amount: icrc3.NatFromUint64(1_000_000_000)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.GenerateHistory(400, 9, time.Hour); err != nil {
		t.Fatal(err)
	}
	a, err := s.NewAgent(aliceID)
	if err != nil {
		t.Fatal(err)
	}
	now := s.Now()
	arg := icrc1.TransferArg{To: acc(bob, nil), Amount: nat(12_345), Memo: ptr([]byte("invoice-1")), CreatedAtTime: &now}
	var res icrc1.TransferResult
	if err := a.Call(l.ID(), "icrc1_transfer", []any{arg}, []any{&res}); err != nil {
		t.Fatal(err)
	}
	if res.Ok == nil {
		t.Fatalf("transfer failed: %v", res.Err)
	}
	idx := res.Ok.BigInt().Uint64()
	res = icrc1.TransferResult{}
	if err := a.Call(l.ID(), "icrc1_transfer", []any{arg}, []any{&res}); err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || res.Err.Duplicate == nil || res.Err.Duplicate.DuplicateOf.BigInt().Uint64() != idx {
		t.Fatalf("retry: want Duplicate{%d}, got %+v", idx, res)
	}
	ex := l.Executions()
	if len(ex) != 1 || ex[0].Index != idx || !bytes.Equal(ex[0].Caller.Raw, alice.Raw) {
		t.Fatalf("executions %+v", ex)
	}
	var bal idl.Nat
	if err := a.Query(l.ID(), "icrc1_balance_of", []any{acc(bob, make([]byte, 32))}, []any{&bal}); err != nil {
		t.Fatal(err)
	}
	if bal.BigInt().Uint64() != l.BalanceOf(icrc3.Account{Owner: bob}).Big().Uint64() || bal.BigInt().Uint64() < 12_345 {
		t.Fatalf("balance %s", bal)
	}

	last, tip := verifiedTip(t, a, l.ID())
	th := l.TipHash()
	if last != idx || !bytes.Equal(tip, th[:]) {
		t.Fatalf("certified tip %d %x, want %d %s", last, tip, idx, l.TipHash())
	}

	// Fetch the whole chain as a client must: ledger pages of at most 100
	// blocks, archived ranges through their callbacks, prefix replies re-requested.
	blocks := map[uint64]icrc3.Value{}
	type job struct {
		canister principal.Principal
		method   string
		start    uint64
		end      uint64
	}
	jobs := []job{{l.ID(), "icrc3_get_blocks", 0, last + 1}}
	for len(jobs) > 0 {
		j := jobs[0]
		jobs = jobs[1:]
		end := min(j.end, j.start+100)
		if end < j.end {
			jobs = append(jobs, job{j.canister, j.method, end, j.end})
		}
		var page tResult
		if err := a.Query(j.canister, j.method, []any{[]getBlocksArg{arg2(j.start, end-j.start)}}, []any{&page}); err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Blocks {
			blocks[b.ID.BigInt().Uint64()] = b.Block.toValue()
		}
		for _, g := range page.Archived {
			for _, r := range g.Args {
				s := r.Start.BigInt().Uint64()
				jobs = append(jobs, job{g.Callback.Method.Principal, g.Callback.Method.Method, s, s + r.Length.BigInt().Uint64()})
			}
		}
		if j.canister.String() != l.ID().String() && uint64(len(page.Blocks)) < end-j.start {
			// An archive's reply is a prefix: ask again for the rest.
			if len(page.Blocks) == 0 {
				t.Fatalf("archive returned nothing for %d..%d", j.start, end)
			}
			jobs = append(jobs, job{j.canister, j.method, j.start + uint64(len(page.Blocks)), end})
		}
	}
	want := tip
	for i := int64(last); i >= 0; i-- {
		v, ok := blocks[uint64(i)]
		if !ok {
			t.Fatalf("block %d not fetched", i)
		}
		h := v.Hash()
		if !bytes.Equal(h[:], want) {
			t.Fatalf("block %d does not chain to the certified tip", i)
		}
		ph, _ := v.Get("phash")
		want = ph.Bytes
	}

	// A lagging replica: shorter chain, and a certificate for the older tip that still verifies.
	s.SetFaults(l.ID(), Faults{LagBlocks: 10})
	lagLast, lagTip := verifiedTip(t, a, l.ID())
	older, _ := l.Block(last - 10)
	oh := older.Hash()
	if lagLast != last-10 || !bytes.Equal(lagTip, oh[:]) {
		t.Fatalf("lagging tip %d, want %d", lagLast, last-10)
	}
	if c := l.Counters(); c.Calls["icrc1_transfer"] != 2 || c.Calls["archive.icrc3_get_blocks"] == 0 || c.BlocksServed < last+1 {
		t.Fatalf("counters %+v", c)
	}
}

func arg2(start, length uint64) getBlocksArg {
	return getBlocksArg{idl.NewNat(start), idl.NewNat(length)}
}

// A lagging replica answers from an older state, and an older state has an
// older time: its certificate's /time precedes every block it has not seen.
// (Certifying old data with the current time would let a client believe a
// window closed while blocks inside it were hidden.)
func TestLaggingCertificateHasTheOlderStatesTime(t *testing.T) {
	s, err := NewServer(WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.NewLedger(LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.GenerateHistory(20, 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	s.Advance(time.Hour)
	if err := l.GenerateHistory(5, 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	a, err := s.NewAgent(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := icrc3history.NewClient(icrc3history.ClientConfig{Agent: a, Ledger: l.ID(), RootKey: s.RootKey()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.SetFaults(l.ID(), Faults{LagBlocks: 5})
	tip, err := c.Tip(ctx)
	if err != nil {
		t.Fatal(err)
	}
	firstUnseen, _ := l.Block(tip.Index + 1)
	ts, _ := firstUnseen.Get("ts")
	unseen, _ := ts.Nat.Uint64()
	if tip.Index != l.Len()-6 || tip.Time >= unseen {
		t.Fatalf("lagging tip %d at time %d; first unseen block has ts %d", tip.Index, tip.Time, unseen)
	}
	s.SetFaults(l.ID(), Faults{})
	if tip, err = c.Tip(ctx); err != nil || tip.Index != l.Len()-1 || tip.Time < unseen {
		t.Fatalf("honest tip %+v %v", tip, err)
	}
}
