package matcher

import (
	"encoding/json"
	"testing"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc3"
)

const (
	canisterText = "mxzaz-hqaaa-aaaar-qaada-cai"
	callerText   = "k2t6j-2nvnp-4zjm3-25dtz-6xhaa-c7boj-5gayf-oj3xs-i43lp-teztq-6ae"
	toText       = "2vxsx-fae"
	stamp        = uint64(1791547201000000000)
	zeroSubHex   = "0000000000000000000000000000000000000000000000000000000000000000"
	subOneHex    = "0000000000000000000000000000000000000000000000000000000000000001"
)

var (
	callerP  = mustPrincipal(callerText)
	toP      = mustPrincipal(toText)
	otherP   = principal.Principal{Raw: []byte{0, 0, 0, 0, 0, 0xe0, 0x1d, 0x49, 1, 1}}
	mintingP = principal.Principal{Raw: []byte{0, 0, 0, 0, 0, 0xf0, 0x13, 0x78, 1, 1}}
	minting  = icrc3.Account{Owner: mintingP}
	rules    = LedgerRules{MintingAccount: &minting}
)

func mustPrincipal(s string) principal.Principal {
	p, err := icrc3.ParsePrincipal(s)
	if err != nil {
		panic(err)
	}
	return p
}

func zeros32() []byte { return make([]byte, 32) }

func sub(last byte) []byte {
	s := make([]byte, 32)
	s[31] = last
	return s
}

// obj is an intent or args body under construction; a nil value is written
// as JSON null, and del removes a key.
type obj map[string]any

func (o obj) with(kv ...any) obj {
	c := obj{}
	for k, v := range o {
		if m, ok := v.(obj); ok {
			v = m.with()
		}
		c[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		if len(k) > 5 && k[:5] == "args." {
			c["args"] = c["args"].(obj).with(k[5:], kv[i+1])
			continue
		}
		if kv[i+1] == del {
			delete(c, k)
			continue
		}
		c[k] = kv[i+1]
	}
	return c
}

type deleted struct{}

var del = deleted{}

func (o obj) json(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any(o.plain()))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (o obj) plain() map[string]any {
	m := map[string]any{}
	for k, v := range o {
		if c, ok := v.(obj); ok {
			v = c.plain()
		}
		if _, ok := v.(deleted); ok {
			continue
		}
		m[k] = v
	}
	return m
}

func transferBody() obj {
	return obj{
		"intent_id":   "p1-3f2a",
		"canister_id": canisterText,
		"method":      "icrc1_transfer",
		"caller":      callerText,
		"args": obj{
			"from_subaccount": nil,
			"to":              toText,
			"amount":          "150000000",
			"fee":             nil,
			"memo":            "6c756e6368",
			"created_at_time": "1791547201000000000",
		},
		"after": "Err.TooOld",
	}
}

func transferFromBody() obj {
	return obj{
		"intent_id":   "tf-1",
		"canister_id": canisterText,
		"method":      "icrc2_transfer_from",
		"caller":      callerText,
		"args": obj{
			"spender_subaccount": nil,
			"from":               otherP.Encode(),
			"to":                 toText,
			"amount":             "500",
			"fee":                "10",
			"memo":               nil,
			"created_at_time":    "1791547201000000000",
		},
		"after": "unknown",
	}
}

func approveBody() obj {
	return obj{
		"intent_id":   "ap-1",
		"canister_id": canisterText,
		"method":      "icrc2_approve",
		"caller":      callerText,
		"args": obj{
			"from_subaccount":    nil,
			"spender":            otherP.Encode(),
			"amount":             "1000",
			"expected_allowance": "0",
			"expires_at":         "1791600000000000000",
			"fee":                nil,
			"memo":               nil,
			"created_at_time":    "1791547201000000000",
		},
		"after": "unknown",
	}
}

func mustParse(t testing.TB, o obj) *Intent {
	t.Helper()
	in, err := ParseIntent(o.json(t))
	if err != nil {
		t.Fatalf("ParseIntent: %v\n%s", err, o.json(t))
	}
	return in
}

// blk describes a block to build as an ICRC-3 Value and decode with
// icrc3.ParseBlock, so the matcher is tested on what the decoder produces.
type blk struct {
	btype, op         string // btype style when btype != ""
	from, to, spender *icrc3.Account
	amt               *icrc3.Nat
	txFee, blockFee   *icrc3.Nat
	memo              []byte
	hasMemo           bool
	createdAt         *uint64
	ea                *icrc3.Nat
	expiresAt         *uint64
}

func natp(v uint64) *icrc3.Nat { n := icrc3.NatFromUint64(v); return &n }
func u64p(v uint64) *uint64    { return &v }

func acct(p principal.Principal, s []byte) *icrc3.Account {
	return &icrc3.Account{Owner: p, Subaccount: s}
}

func (s blk) block(t testing.TB) *icrc3.Block {
	t.Helper()
	var tx []icrc3.Field
	if s.btype == "" && s.op != "" {
		tx = append(tx, icrc3.F("op", icrc3.Text(s.op)))
	}
	addAcc := func(k string, a *icrc3.Account) {
		if a != nil {
			tx = append(tx, icrc3.F(k, a.Value()))
		}
	}
	addNat := func(k string, n *icrc3.Nat) {
		if n != nil {
			tx = append(tx, icrc3.F(k, icrc3.NatValue(*n)))
		}
	}
	addAcc("from", s.from)
	addAcc("to", s.to)
	addAcc("spender", s.spender)
	addNat("amt", s.amt)
	addNat("fee", s.txFee)
	addNat("expected_allowance", s.ea)
	if s.expiresAt != nil {
		tx = append(tx, icrc3.F("expires_at", icrc3.Uint(*s.expiresAt)))
	}
	if s.hasMemo {
		tx = append(tx, icrc3.F("memo", icrc3.Blob(s.memo)))
	}
	if s.createdAt != nil {
		tx = append(tx, icrc3.F("ts", icrc3.Uint(*s.createdAt)))
	}
	var top []icrc3.Field
	if s.btype != "" {
		top = append(top, icrc3.F("btype", icrc3.Text(s.btype)))
	}
	if s.blockFee != nil {
		top = append(top, icrc3.F("fee", icrc3.NatValue(*s.blockFee)))
	}
	top = append(top, icrc3.F("ts", icrc3.Uint(stamp+1_000_000)), icrc3.F("tx", icrc3.MapValue(tx...)))
	v := icrc3.MapValue(top...)
	b, err := icrc3.ParseBlock(7, v, v.Hash())
	if err != nil {
		t.Fatalf("ParseBlock: %v", err)
	}
	return &b
}
