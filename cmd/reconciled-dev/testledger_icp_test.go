package main

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/identity"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/family"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
)

// An ICP-style test ledger takes icrc1_transfer over the wire, and the
// daemon's history family choice reads the call back from its protobuf
// blocks and archives.
func TestTestLedgerServesAnICPLedger(t *testing.T) {
	id, err := identity.NewRandomEd25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	caller := id.Sender()
	out, stop := startTestLedger(t, "--ledger-kind", "icp", "--blocks", "40", "--archive-threshold", "20",
		"--initial-balance", caller.Encode()+"=100000000")
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	l := out.Ledgers[0]
	if l.Blocks != "41" || len(l.Archives) == 0 || l.Archives[0].Start != "0" {
		t.Fatalf("ledger %+v: want 1 mint + 40 blocks and archives from block 0", l)
	}
	u, _ := url.Parse(out.URL)
	a, err := agent.New(agent.Config{Identity: id, FetchRootKey: true, ClientConfig: []agent.ClientOption{
		agent.WithHostURL(u), agent.WithHttpClient(ledgertest.LoopbackHTTPClient()),
	}})
	if err != nil {
		t.Fatal(err)
	}
	ledger := principal.MustDecode(l.CanisterID)
	// No ICRC-3 history on this ledger.
	var none any
	if err := a.Query(ledger, "icrc3_get_tip_certificate", []any{}, []any{&none}); err == nil {
		t.Fatal("an ICP ledger served icrc3_get_tip_certificate")
	}
	to := icrc3.Account{Owner: principal.NewSelfAuthenticating([]byte("icp-recipient"))}
	// The test replica's clock starts at the wall clock.
	stamp := uint64(time.Now().UnixNano())
	memo := []byte("icp-1")
	arg := icrc1.TransferArg{To: to.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(12345)), Memo: &memo, CreatedAtTime: &stamp}
	var res icrc1.TransferResult
	if err := a.Call(ledger, "icrc1_transfer", []any{arg}, []any{&res}); err != nil {
		t.Fatalf("icrc1_transfer: %v", err)
	}
	if res.Ok == nil {
		t.Fatalf("icrc1_transfer: %+v", res.Err)
	}
	c, err := icrc3history.NewClient(icrc3history.ClientConfig{Agent: a, Ledger: ledger})
	if err != nil {
		t.Fatal(err)
	}
	eng := reconcile.NewEngine(func(string) (reconcile.History, reconcile.LedgerConfig, error) {
		return family.Choose(c), reconcile.LedgerConfig{}, nil
	}, reconcile.NewMemCache(), nil)
	body := fmt.Sprintf(`{"intent_id":"icp-1","canister_id":%q,"method":"icrc1_transfer","caller":%q,`+
		`"args":{"from_subaccount":null,"to":%q,"amount":"12345","fee":null,"memo":"6963702d31","created_at_time":"%d"},"after":"unknown"}`,
		ledger.Encode(), caller.Encode(), to.String(), stamp)
	in, err := matcher.ParseIntent([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	v, err := eng.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := res.Ok.BigInt().Uint64()
	if v.Status != reconciled.StatusFound || v.Block == nil || uint64(v.Block.Index) != want {
		t.Fatalf("verdict %s %+v %+v, want found in block %d", v.Status, v.Block, v.Reason, want)
	}
}
