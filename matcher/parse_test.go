package matcher

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func wantRefusal(t *testing.T, data []byte, code, field string) {
	t.Helper()
	in, err := ParseIntent(data)
	if err == nil {
		t.Fatalf("ParseIntent accepted %s as %+v; want %s", data, in, code)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is %T, want *Error", err, err)
	}
	if e.Code != code || e.Field != field {
		t.Fatalf("refusal %s at %q (%s); want %s at %q", e.Code, e.Field, e.Message, code, field)
	}
}

func TestParseIntentAccepts(t *testing.T) {
	in := mustParse(t, transferBody())
	if in.ID != "p1-3f2a" || in.Method != MethodTransfer || in.After != "Err.TooOld" {
		t.Fatalf("parsed %+v", in)
	}
	a := in.Args
	if a.FromSubaccount != nil || a.Fee != nil || !a.HasMemo || string(a.Memo) != "lunch" ||
		a.Amount.String() != "150000000" || a.CreatedAt != stamp || a.To.String() != toText {
		t.Fatalf("args %+v", a)
	}
	if in.IngressExpiry != nil || in.ArgHex != nil {
		t.Fatalf("optional fields set: %+v", in)
	}
	if got := in.CallerAccount(); !got.Owner.Equal(callerP) || got.Subaccount != nil {
		t.Fatalf("CallerAccount %v", got)
	}
	tf := mustParse(t, transferFromBody().with("args.spender_subaccount", subOneHex))
	if got := tf.CallerAccount(); !got.Owner.Equal(callerP) || !bytes.Equal(got.Subaccount, sub(1)) {
		t.Fatalf("transfer_from CallerAccount %v", got)
	}
	if got := tf.Debited(); !got.Owner.Equal(otherP) {
		t.Fatalf("transfer_from Debited %v", got)
	}
	// Absent optional keys read like null ones, and `after` is optional.
	bare := mustParse(t, transferBody().with("args.fee", del, "args.from_subaccount", del, "after", del))
	if bare.Args.Fee != nil || bare.Args.FromSubaccount != nil || bare.After != "" {
		t.Fatalf("bare %+v", bare)
	}
	exp := mustParse(t, transferBody().with("ingress_expiry", "1791547500000000000"))
	if exp.IngressExpiry == nil || *exp.IngressExpiry != 1791547500000000000 {
		t.Fatalf("ingress_expiry %v", exp.IngressExpiry)
	}
	mustParse(t, approveBody())
}

func TestParseIntentRefusals(t *testing.T) {
	long := strings.Repeat("a", 129)
	tb, tfb, ab := transferBody(), transferFromBody(), approveBody()
	for _, tc := range []struct {
		name        string
		body        obj
		code, field string
	}{
		{"id missing", tb.with("intent_id", del), CodeBadIntentID, "intent_id"},
		{"id charset", tb.with("intent_id", "a b"), CodeBadIntentID, "intent_id"},
		{"id too long", tb.with("intent_id", long), CodeBadIntentID, "intent_id"},
		{"id empty", tb.with("intent_id", ""), CodeBadIntentID, "intent_id"},
		{"canister checksum", tb.with("canister_id", "mxzaz-hqaaa-aaaar-qaada-caj"), CodeBadCanister, "canister_id"},
		{"canister upper", tb.with("canister_id", strings.ToUpper(canisterText)), CodeBadCanister, "canister_id"},
		{"method", tb.with("method", "icrc1_balance_of"), CodeBadMethod, "method"},
		{"method missing", tb.with("method", del), CodeBadMethod, "method"},
		{"caller", tb.with("caller", "nobody"), CodeBadCaller, "caller"},
		{"caller number", tb.with("caller", 4), CodeBadCaller, "caller"},
		{"args missing", tb.with("args", del), CodeBadArgs, "args"},
		{"args string", tb.with("args", "x"), CodeBadArgs, "args"},
		{"to missing", tb.with("args.to", del), CodeBadAccount, "args.to"},
		{"to null", tb.with("args.to", nil), CodeBadAccount, "args.to"},
		{"to bad text", tb.with("args.to", callerText+"-6cc627i.01"), CodeBadAccount, "args.to"},
		{"from bad", tfb.with("args.from", "x"), CodeBadAccount, "args.from"},
		{"spender bad", ab.with("args.spender", ""), CodeBadAccount, "args.spender"},
		{"amount number", tb.with("args.amount", 150000000), CodeBadAmount, "args.amount"},
		{"amount missing", tb.with("args.amount", del), CodeBadAmount, "args.amount"},
		{"amount leading zero", tb.with("args.amount", "0150"), CodeBadAmount, "args.amount"},
		{"amount negative", tb.with("args.amount", "-1"), CodeBadAmount, "args.amount"},
		{"fee", tb.with("args.fee", "1e3"), CodeBadFee, "args.fee"},
		{"fee number", tb.with("args.fee", 10), CodeBadFee, "args.fee"},
		{"memo upper hex", tb.with("args.memo", "6C"), CodeBadMemo, "args.memo"},
		{"memo odd", tb.with("args.memo", "6c7"), CodeBadMemo, "args.memo"},
		{"memo too long", tb.with("args.memo", strings.Repeat("ab", MaxMemoBytes+1)), CodeBadMemo, "args.memo"},
		{"subaccount short", tb.with("args.from_subaccount", "01"), CodeBadSubaccount, "args.from_subaccount"},
		{"subaccount long", tb.with("args.from_subaccount", zeroSubHex+"00"), CodeBadSubaccount, "args.from_subaccount"},
		{"spender subaccount", tfb.with("args.spender_subaccount", "zz"), CodeBadSubaccount, "args.spender_subaccount"},
		{"no stamp", tb.with("args.created_at_time", del), CodeNoStamp, "args.created_at_time"},
		{"null stamp", tb.with("args.created_at_time", nil), CodeNoStamp, "args.created_at_time"},
		{"stamp over nat64", tb.with("args.created_at_time", "18446744073709551616"), CodeBadStamp, "args.created_at_time"},
		{"stamp number", tb.with("args.created_at_time", 1), CodeBadStamp, "args.created_at_time"},
		{"allowance", ab.with("args.expected_allowance", "x"), CodeBadAllowance, "args.expected_allowance"},
		{"expires_at", ab.with("args.expires_at", "18446744073709551616"), CodeBadExpiresAt, "args.expires_at"},
		{"expiry", tb.with("ingress_expiry", "soon"), CodeBadExpiry, "ingress_expiry"},
		{"expiry number", tb.with("ingress_expiry", 5), CodeBadExpiry, "ingress_expiry"},
		{"after number", tb.with("after", 1), CodeBadAfter, "after"},
		{"unknown top", tb.with("extra", 1), CodeUnknownField, "extra"},
		{"unknown arg", tb.with("args.spender", toText), CodeUnknownField, "args.spender"},
		{"arg of another method", tfb.with("args.from_subaccount", nil), CodeUnknownField, "args.from_subaccount"},
		{"arg_hex not hex", tb.with("arg_hex", "4449444g"), CodeBadArgHex, "arg_hex"},
		{"arg_hex upper", tb.with("arg_hex", "4449444C"), CodeBadArgHex, "arg_hex"},
		{"arg_hex not candid", tb.with("arg_hex", "00"), CodeBadArgHex, "arg_hex"},
		{"arg_hex number", tb.with("arg_hex", 1), CodeBadArgHex, "arg_hex"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefusal(t, tc.body.json(t), tc.code, tc.field) })
	}
}

func TestParseIntentRefusesMalformedJSON(t *testing.T) {
	good := string(transferBody().json(t))
	for _, tc := range []struct {
		name, body, field string
	}{
		{"not json", "{", ""},
		{"array", "[]", ""},
		{"trailing", good + " {}", ""},
		{"duplicate top key", `{"intent_id":"a","intent_id":"b"}`, "intent_id"},
		{"duplicate arg key", strings.Replace(good, `"amount":"150000000"`, `"amount":"1","amount":"150000000"`, 1), "args.amount"},
		{"invalid utf-8", strings.Replace(good, "Err.TooOld", "Err.\xff", 1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefusal(t, []byte(tc.body), CodeBadJSON, tc.field) })
	}
	big := bytes.Repeat([]byte(" "), MaxIntentBytes+1)
	wantRefusal(t, big, CodeTooLarge, "")
}

// The fixtures under testdata/intents are shared with other packages' tests:
// valid_*.json must parse, invalid_<CODE>_*.json must be refused with CODE.
func TestIntentFixtures(t *testing.T) {
	paths, err := filepath.Glob("../testdata/intents/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no fixtures")
	}
	for _, p := range paths {
		name := filepath.Base(p)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		_, perr := ParseIntent(data)
		switch {
		case strings.HasPrefix(name, "valid_"):
			if perr != nil {
				t.Errorf("%s: %v", name, perr)
			}
		case strings.HasPrefix(name, "invalid_"):
			var e *Error
			if !errors.As(perr, &e) || !strings.HasPrefix(name, "invalid_"+e.Code+"_") {
				t.Errorf("%s: got %v", name, perr)
			}
		default:
			t.Errorf("%s: fixture name must start with valid_ or invalid_", name)
		}
	}
}
