package matcher

import (
	"bytes"
	"encoding/hex"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

func candidHex(t testing.TB, arg any) string {
	t.Helper()
	b, err := candid.Marshal([]any{arg})
	if err != nil {
		t.Fatalf("candid.Marshal: %v", err)
	}
	return hex.EncodeToString(b)
}

func blobp(b []byte) *[]byte  { return &b }
func idlNat(v uint64) idl.Nat { return idl.NewNat(v) }
func idlNatp(v uint64) *idl.Nat {
	n := idl.NewNat(v)
	return &n
}

// transferArg is what the tool layer sends for transferBody.
func transferArg() icrc1.TransferArg {
	return icrc1.TransferArg{
		To:            icrc3.CandidAccount{Owner: toP},
		Amount:        idlNat(150000000),
		Memo:          blobp([]byte("lunch")),
		CreatedAtTime: u64p(stamp),
	}
}

func TestArgHexAgrees(t *testing.T) {
	in := mustParse(t, transferBody().with("arg_hex", candidHex(t, transferArg())))
	if len(in.ArgHex) == 0 {
		t.Fatal("ArgHex not kept")
	}
	// The text form of `to` cannot spell an explicit zero subaccount; the
	// sent bytes may, and the two are the same account.
	zeroTo := transferArg()
	zeroTo.To.Subaccount = blobp(zeros32())
	mustParse(t, transferBody().with("arg_hex", candidHex(t, zeroTo)))

	tf := icrc1.TransferFromArgs{
		From: icrc3.CandidAccount{Owner: otherP}, To: icrc3.CandidAccount{Owner: toP},
		Amount: idlNat(500), Fee: idlNatp(10), CreatedAtTime: u64p(stamp),
	}
	mustParse(t, transferFromBody().with("arg_hex", candidHex(t, tf)))

	ap := icrc1.ApproveArgs{
		Spender: icrc3.CandidAccount{Owner: otherP}, Amount: idlNat(1000),
		ExpectedAllowance: idlNatp(0), ExpiresAt: u64p(1791600000000000000), CreatedAtTime: u64p(stamp),
	}
	mustParse(t, approveBody().with("arg_hex", candidHex(t, ap)))
}

func TestArgHexDisagrees(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   obj
		change func(*icrc1.TransferArg)
		field  string
	}{
		{"amount", transferBody(), func(a *icrc1.TransferArg) { a.Amount = idlNat(1) }, "args.amount"},
		{"fee sent, not in args", transferBody(), func(a *icrc1.TransferArg) { a.Fee = idlNatp(10) }, "args.fee"},
		{"fee in args, not sent", transferBody().with("args.fee", "10"), func(*icrc1.TransferArg) {}, "args.fee"},
		{"fee value", transferBody().with("args.fee", "10"), func(a *icrc1.TransferArg) { a.Fee = idlNatp(0) }, "args.fee"},
		{"zero subaccount sent, null in args", transferBody(), func(a *icrc1.TransferArg) { a.FromSubaccount = blobp(zeros32()) }, "args.from_subaccount"},
		{"null sent, zero subaccount in args", transferBody().with("args.from_subaccount", zeroSubHex), func(*icrc1.TransferArg) {}, "args.from_subaccount"},
		{"memo empty vs absent", transferBody(), func(a *icrc1.TransferArg) { a.Memo = blobp([]byte{}) }, "args.memo"},
		{"memo absent vs given", transferBody(), func(a *icrc1.TransferArg) { a.Memo = nil }, "args.memo"},
		{"no stamp sent", transferBody(), func(a *icrc1.TransferArg) { a.CreatedAtTime = nil }, "args.created_at_time"},
		{"to", transferBody(), func(a *icrc1.TransferArg) { a.To.Owner = otherP }, "args.to"},
		{"to subaccount", transferBody(), func(a *icrc1.TransferArg) { a.To.Subaccount = blobp(sub(1)) }, "args.to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := transferArg()
			tc.change(&a)
			wantRefusal(t, tc.body.with("arg_hex", candidHex(t, a)).json(t), CodeArgsMismatch, tc.field)
		})
	}
}

func TestArgHexWrongShape(t *testing.T) {
	type natStamp struct { // created_at_time as nat instead of nat64
		To            icrc3.CandidAccount `ic:"to"`
		Amount        idl.Nat             `ic:"amount"`
		CreatedAtTime *idl.Nat            `ic:"created_at_time,omitempty"`
	}
	type shortSub struct {
		FromSubaccount *[]byte             `ic:"from_subaccount,omitempty"`
		To             icrc3.CandidAccount `ic:"to"`
		Amount         idl.Nat             `ic:"amount"`
	}
	type noTo struct {
		Amount idl.Nat `ic:"amount"`
	}
	ap := icrc1.ApproveArgs{Spender: icrc3.CandidAccount{Owner: otherP}, Amount: idlNat(1)}
	for name, arg := range map[string]any{
		"nat stamp":        natStamp{To: icrc3.CandidAccount{Owner: toP}, Amount: idlNat(1), CreatedAtTime: idlNatp(stamp)},
		"short subaccount": shortSub{FromSubaccount: blobp([]byte{1}), To: icrc3.CandidAccount{Owner: toP}, Amount: idlNat(1)},
		"missing to":       noTo{Amount: idlNat(1)},
		"approve record":   ap,
		"text":             "hello",
	} {
		t.Run(name, func(t *testing.T) {
			wantRefusal(t, transferBody().with("arg_hex", candidHex(t, arg)).json(t), CodeBadArgHex, "arg_hex")
		})
	}
	two, err := candid.Marshal([]any{transferArg(), transferArg()})
	if err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, transferBody().with("arg_hex", hex.EncodeToString(two)).json(t), CodeBadArgHex, "arg_hex")
}

// Fields an encoder leaves out of the record type are read as null, as the
// ledger reads them.
func TestArgHexOmittedOptFields(t *testing.T) {
	type minimal struct {
		To            icrc3.CandidAccount `ic:"to"`
		Amount        idl.Nat             `ic:"amount"`
		CreatedAtTime *uint64             `ic:"created_at_time,omitempty"`
	}
	h := candidHex(t, minimal{To: icrc3.CandidAccount{Owner: toP}, Amount: idlNat(150000000), CreatedAtTime: u64p(stamp)})
	mustParse(t, transferBody().with("args.memo", nil, "arg_hex", h))
	wantRefusal(t, transferBody().with("arg_hex", h).json(t), CodeArgsMismatch, "args.memo")
}

// The reader must agree with agent-go's own decoder on what agent-go encodes.
func TestArgHexAgreesWithAgentGo(t *testing.T) {
	huge, _ := new(big.Int).SetString("115792089237316195423570985008687907853269984665640564039457584007913129639935", 10)
	args := []icrc1.TransferArg{
		transferArg(),
		{FromSubaccount: blobp(sub(9)), To: icrc3.CandidAccount{Owner: otherP, Subaccount: blobp(zeros32())},
			Amount: idl.NewBigNat(huge), Fee: idlNatp(0), Memo: blobp([]byte{}), CreatedAtTime: u64p(math.MaxUint64)},
	}
	for _, a := range args {
		raw, err := candid.Marshal([]any{a})
		if err != nil {
			t.Fatal(err)
		}
		var viaAgent icrc1.TransferArg
		if err := candid.Unmarshal(raw, []any{&viaAgent}); err != nil {
			t.Fatal(err)
		}
		got, err := decodeArgHex(MethodTransfer, raw)
		if err != nil {
			t.Fatal(err)
		}
		if got["amount"].nat.Cmp(viaAgent.Amount.BigInt()) != 0 ||
			!bytes.Equal(got["to"].account().Owner.Raw, viaAgent.To.Owner.Raw) ||
			(got["to"].fields["subaccount"].present != (viaAgent.To.Subaccount != nil)) ||
			(got["from_subaccount"].present != (viaAgent.FromSubaccount != nil)) ||
			(got["fee"].present != (viaAgent.Fee != nil)) ||
			(got["memo"].present != (viaAgent.Memo != nil)) ||
			got["created_at_time"].nat64 != *viaAgent.CreatedAtTime {
			t.Errorf("reader and agent-go disagree on %x", raw)
		}
	}
}

func uleb(n uint64) []byte {
	var b []byte
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

// hugePrincipal is a well-typed transfer argument whose `to` owner claims
// 2^40 bytes.
func hugePrincipal() []byte {
	to, amount := candidHash("to"), candidHash("amount")
	b := []byte("DIDL")
	b = append(b, 2)       // two types
	b = append(b, 0x6c, 2) // t0 = record, two fields in id order
	first, second := []byte{}, []byte{}
	first = append(append(first, uleb(uint64(to))...), 1)          // to: t1
	second = append(append(second, uleb(uint64(amount))...), 0x7d) // amount: nat
	if amount < to {
		first, second = second, first
	}
	b = append(append(b, first...), second...)
	b = append(b, 0x6c, 1)
	b = append(append(b, uleb(uint64(candidHash("owner")))...), 0x68) // t1 = record { owner: principal }
	b = append(b, 1, 0)                                               // one argument of type t0
	principal := append([]byte{1}, uleb(1<<40)...)
	if amount < to {
		return append(append(b, 5), principal...)
	}
	return append(append(b, principal...), 5)
}

// Hostile type tables and lengths are refused, not followed.
func TestArgHexHostile(t *testing.T) {
	for _, tc := range []struct {
		name, hex, why string
	}{
		// t0 = record { 0: t0 }: a value of it never ends.
		{"recursive record", "4449444c016c01000001" + "00", "unexpected field id"},
		// t0 = opt t0 used as from_subaccount.
		{"recursive opt", "4449444c026e006c01" + hex.EncodeToString(uleb(uint64(candidHash("from_subaccount")))) + "00" + "0101", "want blob"},
		{"huge principal", hex.EncodeToString(hugePrincipal()), "exceeds"},
		{"no header", "4449444d00", "header"},
		{"func type", "4449444c016a000000" + "0100", "opcode"},
		{"empty", "", "header"},
		{"two arguments", "4449444c00027d7d0101", "2 arguments"},
		{"trailing", hex.EncodeToString(append(mustHex(t, candidHex(t, transferArg())), 0)), "after the argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeArgHex(MethodTransfer, mustHex(t, tc.hex))
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("got %v, want an error about %q", err, tc.why)
			}
		})
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestArgHexDisagreesApproveAndTransferFrom(t *testing.T) {
	ap := func() icrc1.ApproveArgs {
		return icrc1.ApproveArgs{
			Spender: icrc3.CandidAccount{Owner: otherP}, Amount: idlNat(1000),
			ExpectedAllowance: idlNatp(0), ExpiresAt: u64p(1791600000000000000), CreatedAtTime: u64p(stamp),
		}
	}
	for field, change := range map[string]func(*icrc1.ApproveArgs){
		"args.expected_allowance": func(a *icrc1.ApproveArgs) { a.ExpectedAllowance = nil },
		"args.expires_at":         func(a *icrc1.ApproveArgs) { a.ExpiresAt = u64p(1) },
		"args.spender":            func(a *icrc1.ApproveArgs) { a.Spender.Owner = toP },
		"args.from_subaccount":    func(a *icrc1.ApproveArgs) { a.FromSubaccount = blobp(sub(1)) },
	} {
		a := ap()
		change(&a)
		wantRefusal(t, approveBody().with("arg_hex", candidHex(t, a)).json(t), CodeArgsMismatch, field)
	}
	tf := func() icrc1.TransferFromArgs {
		return icrc1.TransferFromArgs{
			From: icrc3.CandidAccount{Owner: otherP}, To: icrc3.CandidAccount{Owner: toP},
			Amount: idlNat(500), Fee: idlNatp(10), CreatedAtTime: u64p(stamp),
		}
	}
	for field, change := range map[string]func(*icrc1.TransferFromArgs){
		"args.spender_subaccount": func(a *icrc1.TransferFromArgs) { a.SpenderSubaccount = blobp(zeros32()) },
		"args.from":               func(a *icrc1.TransferFromArgs) { a.From.Subaccount = blobp(sub(2)) },
	} {
		a := tf()
		change(&a)
		wantRefusal(t, transferFromBody().with("arg_hex", candidHex(t, a)).json(t), CodeArgsMismatch, field)
	}
	// Each method's bytes are refused under another method.
	wantRefusal(t, approveBody().with("arg_hex", candidHex(t, tf())).json(t), CodeBadArgHex, "arg_hex")
}

func TestErrorText(t *testing.T) {
	_, err := ParseIntent(transferBody().with("args.amount", "x").json(t))
	if err == nil || !strings.Contains(err.Error(), "E_BAD_AMOUNT at args.amount") {
		t.Fatalf("error text %v", err)
	}
	if in := mustParse(t, transferBody()); in.Stamp() != stamp {
		t.Fatalf("Stamp %d", in.Stamp())
	}
}
