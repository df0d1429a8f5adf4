package icrc3

import (
	"errors"
	"math/big"
	"slices"
	"testing"
)

var (
	ownerA = make([]byte, 29)
	ownerB = []byte{0, 0, 0, 0, 0, 0xf0, 0x13, 0x78, 1, 1}
	subA   = append(make([]byte, 31), 7)
	hashA  = Hash{1, 2, 3}
)

func acct(owner []byte, sub ...[]byte) Value {
	if len(sub) == 0 {
		return ArrayValue(Blob(owner))
	}
	return ArrayValue(Blob(owner), Blob(sub[0]))
}

// xferBlock is a DFINITY-style transfer: no btype, tx.op "xfer".
func xferBlock(extraTop []Field, extraTx ...Field) Value {
	tx := []Field{F("op", Text("xfer")), F("from", acct(ownerA)), F("to", acct(ownerB, subA)), F("amt", Uint(500))}
	top := []Field{F("phash", Blob(hashA[:])), F("ts", Uint(1_700_000_000_000_000_000)), F("fee", Uint(10))}
	return MapValue(append(append(top, extraTop...), F("tx", MapValue(append(tx, extraTx...)...)))...)
}

func without(v Value, path ...string) Value {
	out := v
	out.Map = slices.Clone(v.Map)
	for i := 0; i < len(out.Map); i++ {
		if out.Map[i].Key != path[0] {
			continue
		}
		if len(path) == 1 {
			out.Map = slices.Delete(out.Map, i, i+1)
			i--
			continue
		}
		out.Map[i].Value = without(out.Map[i].Value, path[1:]...)
	}
	return out
}

func replace(v Value, val Value, path ...string) Value {
	out := v
	out.Map = slices.Clone(v.Map)
	for i := range out.Map {
		if out.Map[i].Key != path[0] {
			continue
		}
		if len(path) == 1 {
			out.Map[i].Value = val
		} else {
			out.Map[i].Value = replace(out.Map[i].Value, val, path[1:]...)
		}
	}
	return out
}

func TestParseBlockTransfer(t *testing.T) {
	v := xferBlock(nil, F("memo", Blob([]byte{})), F("ts", Uint(1_699_999_999_000_000_000)), F("unknown_extra", Text("ok")))
	b, err := ParseBlock(42, v, v.Hash())
	if err != nil {
		t.Fatal(err)
	}
	if b.Kind != BlockTransfer || b.Op != "xfer" || b.BType != "" || b.Index != 42 || b.Hash != v.Hash() || !b.tree().Equal(v) {
		t.Fatalf("header fields: %+v", b)
	}
	if *b.PHash != hashA || b.TS != 1_700_000_000_000_000_000 || *b.CreatedAt != 1_699_999_999_000_000_000 {
		t.Fatalf("phash/ts: %+v", b)
	}
	if b.From.Subaccount != nil || !b.From.IsDefaultSubaccount() || string(b.To.Subaccount) != string(subA) || string(b.To.Owner.Raw) != string(ownerB) {
		t.Fatalf("accounts: %+v %+v", b.From, b.To)
	}
	if b.Amount.String() != "500" || b.Fee != nil || b.BlockFee.String() != "10" || b.EffectiveFee().String() != "10" {
		t.Fatalf("amounts: %+v", b)
	}
	if !b.HasMemo || len(b.Memo) != 0 || b.Spender != nil || b.ExpectedAllowance != nil || b.ExpiresAt != nil {
		t.Fatalf("optional fields: %+v", b)
	}

	// Memo absent differs from memo empty; fee set by the caller sits in tx.
	v = without(xferBlock(nil, F("fee", Uint(10))), "fee")
	b, err = ParseBlock(1, v, v.Hash())
	if err != nil {
		t.Fatal(err)
	}
	if b.HasMemo || b.Memo != nil || b.Fee.String() != "10" || b.BlockFee != nil || b.EffectiveFee().String() != "10" {
		t.Fatalf("fee/memo: %+v", b)
	}
}

func TestParseBlockKinds(t *testing.T) {
	mint := MapValue(F("ts", Uint(5)), F("tx", MapValue(F("op", Text("mint")), F("to", acct(ownerA)), F("amt", Uint(1)))))
	burn := MapValue(F("ts", Uint(5)), F("tx", MapValue(F("op", Text("burn")), F("from", acct(ownerA)), F("spender", acct(ownerB)), F("amt", Uint(1)))))
	approve := MapValue(F("ts", Uint(5)), F("fee", Uint(3)), F("tx", MapValue(F("op", Text("approve")), F("from", acct(ownerA)), F("spender", acct(ownerB)),
		F("amt", NatValue(mustNat(t, "18446744073709551616"))), F("expected_allowance", Uint(0)), F("expires_at", Uint(99)))))
	for _, tc := range []struct {
		name string
		v    Value
		kind BlockKind
	}{
		{"xfer", xferBlock(nil), BlockTransfer},
		{"xfer with spender", xferBlock(nil, F("spender", acct(ownerB))), BlockTransferFrom},
		{"mint", mint, BlockMint},
		{"burn with spender", burn, BlockBurn},
		{"approve", approve, BlockApprove},
		{"btype 1xfer", without(xferBlock([]Field{F("btype", Text("1xfer"))}), "tx", "op"), BlockTransfer},
		{"btype 2xfer without spender", without(xferBlock([]Field{F("btype", Text("2xfer"))}), "tx", "op"), BlockTransferFrom},
		{"btype wins over op", xferBlock([]Field{F("btype", Text("1burn"))}), BlockBurn},
		{"unknown btype", MapValue(F("btype", Text("107set_fee_collector")), F("ts", Uint(1)), F("tx", Text("anything"))), BlockUnknown},
		{"unknown op", MapValue(F("ts", Uint(1)), F("tx", MapValue(F("op", Text("107set_fee_collector")), F("fee_collector", Blob(nil))))), BlockUnknown},
		{"no op no btype", MapValue(F("ts", Uint(1)), F("tx", MapValue())), BlockUnknown},
		{"no tx no btype", MapValue(F("foo", Uint(1))), BlockUnknown},
		{"unknown kind keeps duplicate other keys", MapValue(F("btype", Text("9x")), F("a", Uint(1)), F("a", Uint(2))), BlockUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ParseBlock(3, tc.v, tc.v.Hash())
			if err != nil {
				t.Fatal(err)
			}
			if b.Kind != tc.kind || b.Hash != tc.v.Hash() || !b.tree().Equal(tc.v) {
				t.Fatalf("kind %q, want %q", b.Kind, tc.kind)
			}
		})
	}
	b, _ := ParseBlock(0, approve, approve.Hash())
	if b.Amount.String() != "18446744073709551616" || *b.ExpiresAt != 99 || b.ExpectedAllowance.String() != "0" || b.EffectiveFee().String() != "3" {
		t.Fatalf("approve fields: %+v", b)
	}
	b, _ = ParseBlock(0, burn, burn.Hash())
	if b.Spender == nil || b.To != nil || b.PHash != nil {
		t.Fatalf("burn fields: %+v", b)
	}
}

func mustNat(t *testing.T, s string) Nat {
	t.Helper()
	n, err := ParseNat(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestParseBlockRejects(t *testing.T) {
	big65 := NatValue(mustNat(t, "18446744073709551616"))
	base := xferBlock(nil)
	for _, tc := range []struct {
		name, field string
		v           Value
	}{
		{"not a map", "block", Text("x")},
		{"phash short", "phash", replace(base, Blob(make([]byte, 31)), "phash")},
		{"phash text", "phash", replace(base, Text(string(make([]byte, 32))), "phash")},
		{"phash on unknown block", "phash", MapValue(F("btype", Text("9x")), F("phash", Blob(nil)))},
		{"ts missing", "ts", without(base, "ts")},
		{"ts text", "ts", replace(base, Text("1"), "ts")},
		{"ts beyond u64", "ts", replace(base, big65, "ts")},
		{"ts int", "ts", replace(base, IntValue(big.NewInt(1)), "ts")},
		{"fee blob", "fee", replace(base, Blob([]byte{10}), "fee")},
		{"tx missing", "tx", MapValue(F("btype", Text("1xfer")), F("ts", Uint(1)))},
		{"tx not a map", "tx", MapValue(F("ts", Uint(1)), F("tx", Text("xfer")))},
		{"tx not a map with btype", "tx", MapValue(F("btype", Text("1mint")), F("ts", Uint(1)), F("tx", Text("xfer")))},
		{"btype not text", "btype", replace(xferBlock([]Field{F("btype", Text("1xfer"))}), Blob([]byte("1xfer")), "btype")},
		{"op not text", "tx.op", replace(base, Blob([]byte("xfer")), "tx", "op")},
		{"amt missing", "tx.amt", without(base, "tx", "amt")},
		{"amt int", "tx.amt", replace(base, IntValue(big.NewInt(5)), "tx", "amt")},
		{"from missing", "tx.from", without(base, "tx", "from")},
		{"to missing", "tx.to", without(base, "tx", "to")},
		{"from not array", "tx.from", replace(base, Blob(ownerA), "tx", "from")},
		{"from empty array", "tx.from", replace(base, ArrayValue(), "tx", "from")},
		{"from three elements", "tx.from", replace(base, ArrayValue(Blob(ownerA), Blob(subA), Blob(subA)), "tx", "from")},
		{"owner too long", "tx.from", replace(base, acct(make([]byte, 30)), "tx", "from")},
		{"owner text", "tx.to", replace(base, ArrayValue(Text("aaaaa-aa")), "tx", "to")},
		{"subaccount short", "tx.to", replace(base, acct(ownerA, make([]byte, 31)), "tx", "to")},
		{"subaccount empty", "tx.to", replace(base, acct(ownerA, []byte{}), "tx", "to")},
		{"memo text", "tx.memo", xferBlock(nil, F("memo", Text("hi")))},
		{"created_at beyond u64", "tx.ts", xferBlock(nil, F("ts", big65))},
		{"expires_at text", "tx.expires_at", xferBlock(nil, F("expires_at", Text("1")))},
		{"tx fee text", "tx.fee", xferBlock(nil, F("fee", Text("1")))},
		{"spender malformed", "tx.spender", xferBlock(nil, F("spender", Blob(ownerA)))},
		{"approve without spender", "tx.spender", MapValue(F("ts", Uint(1)), F("tx", MapValue(F("op", Text("approve")), F("from", acct(ownerA)), F("amt", Uint(1)))))},
		{"mint without to", "tx.to", MapValue(F("ts", Uint(1)), F("tx", MapValue(F("op", Text("mint")), F("amt", Uint(1)))))},
		{"burn without from", "tx.from", MapValue(F("ts", Uint(1)), F("tx", MapValue(F("op", Text("burn")), F("amt", Uint(1)))))},
		{"duplicate top key", "fee", xferBlock([]Field{F("fee", Uint(11))})},
		{"duplicate unknown top key", "x", xferBlock([]Field{F("x", Uint(1)), F("x", Uint(1))})},
		{"duplicate tx key", "tx.to", xferBlock(nil, F("to", acct(ownerA)))},
		{"duplicate tx op", "tx.op", xferBlock(nil, F("op", Text("mint")))},
		{"duplicate spender", "tx.spender", xferBlock(nil, F("spender", acct(ownerA)), F("spender", acct(ownerB)))},
		{"duplicate tx on unknown kind", "tx", MapValue(F("btype", Text("9x")), F("tx", MapValue()), F("tx", MapValue()))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBlock(77, tc.v, tc.v.Hash())
			var be *BlockError
			if !errors.As(err, &be) {
				t.Fatalf("err = %v, want a BlockError", err)
			}
			if be.Index != 77 || be.Field != tc.field {
				t.Fatalf("err = %v, want field %q", err, tc.field)
			}
		})
	}
}
