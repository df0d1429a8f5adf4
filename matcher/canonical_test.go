package matcher

import (
	"bytes"
	"os"
	"testing"

	"github.com/reconciled/reconciled/icrc3"
)

func TestCanonicalIgnoresLayout(t *testing.T) {
	a := []byte(`{"intent_id":"p1-3f2a","canister_id":"mxzaz-hqaaa-aaaar-qaada-cai","method":"icrc1_transfer",
		"caller":"k2t6j-2nvnp-4zjm3-25dtz-6xhaa-c7boj-5gayf-oj3xs-i43lp-teztq-6ae",
		"args":{"from_subaccount":null,"to":"2vxsx-fae","amount":"150000000","fee":null,"memo":"6c756e6368",
		"created_at_time":"1791547201000000000"},"after":"Err.TooOld"}`)
	// Other key order, other whitespace, absent instead of null, escaped text.
	b := []byte("{ \"args\" : { \"created_at_time\":\"1791547201000000000\", \"memo\":\"6c756e6368\",\n" +
		"\"amount\":\"150000000\", \"to\":\"2vxsx-fae\" }, \"after\":\"Err.\\u0054ooOld\",\n" +
		"\"caller\":\"k2t6j-2nvnp-4zjm3-25dtz-6xhaa-c7boj-5gayf-oj3xs-i43lp-teztq-6ae\", \"method\":\"icrc1_transfer\",\n" +
		"\"canister_id\":\"mxzaz-hqaaa-aaaar-qaada-cai\", \"intent_id\":\"p1-3f2a\", \"ingress_expiry\":null }")
	ia, err := ParseIntent(a)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := ParseIntent(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ia.Canonical(), ib.Canonical()) || ia.Hash() != ib.Hash() {
		t.Fatalf("canonical forms differ:\n%s\n%s", ia.Canonical(), ib.Canonical())
	}
	want := `{"intent_id":"p1-3f2a","canister_id":"mxzaz-hqaaa-aaaar-qaada-cai","method":"icrc1_transfer",` +
		`"caller":"k2t6j-2nvnp-4zjm3-25dtz-6xhaa-c7boj-5gayf-oj3xs-i43lp-teztq-6ae",` +
		`"args":{"from_subaccount":null,"to":"2vxsx-fae","amount":"150000000","fee":null,"memo":"6c756e6368",` +
		`"created_at_time":"1791547201000000000"},"after":"Err.TooOld","ingress_expiry":null,"arg_hex":null}`
	if got := string(ia.Canonical()); got != want {
		t.Fatalf("Canonical =\n%s\nwant\n%s", got, want)
	}
}

// Bodies the ledger would treat as different calls must hash differently.
func TestCanonicalDistinguishesCalls(t *testing.T) {
	base := mustParse(t, transferBody())
	for name, body := range map[string]obj{
		"zero subaccount": transferBody().with("args.from_subaccount", zeroSubHex),
		"empty memo":      transferBody().with("args.memo", ""),
		"no memo":         transferBody().with("args.memo", nil),
		"fee set":         transferBody().with("args.fee", "10"),
		"amount":          transferBody().with("args.amount", "150000001"),
		"stamp":           transferBody().with("args.created_at_time", "1791547201000000001"),
		"expiry":          transferBody().with("ingress_expiry", "1791547500000000000"),
	} {
		if in := mustParse(t, body); in.Hash() == base.Hash() {
			t.Errorf("%s: same hash as the base intent", name)
		}
	}
}

func TestCanonicalRoundTrips(t *testing.T) {
	for _, body := range []obj{
		transferBody().with("args.from_subaccount", subOneHex, "args.to", callerText+"-6cc627i.1", "args.memo", ""),
		transferFromBody().with("ingress_expiry", "18446744073709551615"),
		approveBody().with("args.amount", "340282366920938463463374607431768211456", "after", "<&>\u2028"),
	} {
		in := mustParse(t, body)
		again, err := ParseIntent(in.Canonical())
		if err != nil {
			t.Fatalf("canonical form refused: %v\n%s", err, in.Canonical())
		}
		if !bytes.Equal(again.Canonical(), in.Canonical()) {
			t.Fatalf("round trip changed:\n%s\n%s", in.Canonical(), again.Canonical())
		}
	}
}

func TestHashIgnoresAfter(t *testing.T) {
	raw, err := os.ReadFile("../testdata/intents/valid_transfer.json")
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseIntent(raw)
	if err != nil {
		t.Fatal(err)
	}
	b := *a
	b.After = "unknown-then-TooOld"
	if a.After == b.After {
		t.Fatal("fixture already says Err.TooOld")
	}
	if a.Hash() != b.Hash() {
		t.Fatal("a re-publication after TooOld must be the same intent")
	}
	if string(a.Canonical()) == string(b.Canonical()) {
		t.Fatal("the stored body must keep what the tool layer said")
	}
	c := *a
	c.Args.Amount = icrc3.NatFromUint64(1)
	if a.Hash() == c.Hash() {
		t.Fatal("another amount must be another intent")
	}
}
