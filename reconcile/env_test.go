package reconcile_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/ledgertest/testworld"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
)

// env is a test ledger on a loopback replica, read through the real
// icrc3 client with signed-query verification on, decided by an engine.
type env struct {
	t      testing.TB
	srv    *ledgertest.Server
	ledger *ledgertest.Ledger
	client *icrc3history.Client
	engine *reconcile.Engine
	cache  *reconcile.MemCache
}

type envOpt struct {
	ledger   ledgertest.LedgerConfig
	endpoint icrc3.Endpoint
	page     uint64
	verify   icrc3.VerifyMode
	cfg      reconcile.LedgerConfig
	// wrap, when set, is what the engine reads instead of the client.
	wrap func(*icrc3history.Client) reconcile.History
}

func newEnv(t testing.TB, o envOpt) *env {
	t.Helper()
	w := testworld.New(t, testworld.Options{Seed: 7, Ledger: o.ledger,
		Client: &icrc3history.ClientConfig{Endpoint: o.endpoint, PageSize: o.page, Verify: o.verify}})
	srv, l, c := w.Server, w.Ledger, w.Client
	cache := reconcile.NewMemCache()
	var h reconcile.History = c
	if o.wrap != nil {
		h = o.wrap(c)
	}
	eng := reconcile.NewEngine(func(ledger string) (reconcile.History, reconcile.LedgerConfig, error) {
		if ledger != l.ID().Encode() {
			return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
		}
		return h, o.cfg, nil
	}, cache, nil)
	return &env{t: t, srv: srv, ledger: l, client: c, engine: eng, cache: cache}
}

// principalN is a deterministic, distinct principal.
func principalN(n int) principal.Principal {
	return principal.Principal{Raw: []byte{0xaa, byte(n >> 8), byte(n), 0x01}}
}

func acct(p principal.Principal, sub []byte) icrc3.Account {
	return icrc3.Account{Owner: p, Subaccount: sub}
}

// fund mints amount to a (a mint from the minting account).
func (e *env) fund(a icrc3.Account, amount uint64) {
	e.t.Helper()
	m := e.ledger.MintingAccount()
	if _, err := e.ledger.Transfer(m.Owner, icrc1.TransferArg{To: a.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(amount))}); err != nil {
		e.t.Fatalf("fund %s: %v", a, err)
	}
}

// transferIntent is the JSON intent of an icrc1_transfer.
type transferIntent struct {
	id        string
	caller    principal.Principal
	fromSub   []byte
	to        icrc3.Account
	amount    uint64
	fee       *uint64
	memo      []byte // nil: absent
	stamp     uint64
	ingressEx *uint64
}

func (ti transferIntent) arg() icrc1.TransferArg {
	a := icrc1.TransferArg{To: ti.to.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(ti.amount))}
	if ti.fromSub != nil {
		s := append([]byte(nil), ti.fromSub...)
		a.FromSubaccount = &s
	}
	if ti.fee != nil {
		f := icrc1.IDLNat(icrc3.NatFromUint64(*ti.fee))
		a.Fee = &f
	}
	if ti.memo != nil {
		m := append([]byte(nil), ti.memo...)
		a.Memo = &m
	}
	st := ti.stamp
	a.CreatedAtTime = &st
	return a
}

func (ti transferIntent) json(canister principal.Principal) []byte {
	args := map[string]any{
		"from_subaccount": nil, "to": ti.to.String(), "amount": fmt.Sprint(ti.amount),
		"fee": nil, "memo": nil, "created_at_time": fmt.Sprint(ti.stamp),
	}
	if ti.fromSub != nil {
		args["from_subaccount"] = hex.EncodeToString(ti.fromSub)
	}
	if ti.fee != nil {
		args["fee"] = fmt.Sprint(*ti.fee)
	}
	if ti.memo != nil {
		args["memo"] = hex.EncodeToString(ti.memo)
	}
	body := map[string]any{
		"intent_id": ti.id, "canister_id": canister.Encode(), "method": "icrc1_transfer",
		"caller": ti.caller.Encode(), "args": args, "after": "unknown",
	}
	if ti.ingressEx != nil {
		body["ingress_expiry"] = fmt.Sprint(*ti.ingressEx)
	}
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return b
}

func (e *env) intent(raw []byte) *matcher.Intent {
	e.t.Helper()
	in, err := matcher.ParseIntent(raw)
	if err != nil {
		e.t.Fatalf("parse intent %s: %v", raw, err)
	}
	return in
}

func (e *env) decide(in *matcher.Intent) reconciled.Verdict {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v, err := e.engine.Decide(ctx, in)
	if err != nil {
		e.t.Fatalf("decide %s: %v", in.ID, err)
	}
	return v
}

// closeWindow advances the ledger clock past any window opened so far.
func (e *env) closeWindow() { e.srv.Advance(24*time.Hour + 3*time.Minute) }
