package icp

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func u64p(v uint64) *uint64 { return &v }

func acct(b byte) *AccountID {
	id, err := NewAccountID([]byte{b, 1, 2}, nil)
	if err != nil {
		panic(err)
	}
	return &id
}

// sampleBlocks covers every operation DFINITY's ledger writes, with and
// without the optional fields.
func sampleBlocks() map[string]*Block {
	ph := [32]byte{9, 9, 9}
	return map[string]*Block{
		"transfer": {ParentHash: &ph, Timestamp: 1_700_000_000_000_000_000, Tx: Transaction{Op: OpTransfer,
			From: acct(1), To: acct(2), Amount: 12345, Fee: u64p(10000), ICRC1Memo: []byte("hello"), HasICRC1Memo: true,
			CreatedAtTime: u64p(1_699_999_999_000_000_000)}},
		"transfer_from": {ParentHash: &ph, Timestamp: 5, Tx: Transaction{Op: OpTransfer,
			From: acct(1), To: acct(2), Spender: acct(3), Amount: 1, Fee: u64p(10000), CreatedAtTime: u64p(4)}},
		"legacy_send": {Timestamp: 5, Tx: Transaction{Op: OpTransfer, From: acct(1), To: acct(2), Amount: 7,
			Fee: u64p(10000), Memo: 5432845643782906771}},
		"approve": {ParentHash: &ph, Timestamp: 6, Tx: Transaction{Op: OpApprove, From: acct(1), Spender: acct(3),
			Amount: 500, Fee: u64p(10000), ExpectedAllowance: u64p(0), ExpiresAt: u64p(99), CreatedAtTime: u64p(6),
			HasICRC1Memo: true}},
		"approve_plain": {ParentHash: &ph, Timestamp: 6, Tx: Transaction{Op: OpApprove, From: acct(1), Spender: acct(3),
			Amount: 0, Fee: u64p(0)}},
		"mint": {ParentHash: &ph, Timestamp: 7, Tx: Transaction{Op: OpMint, To: acct(2), Amount: 1 << 40, CreatedAtTime: u64p(7)}},
		"burn": {ParentHash: &ph, Timestamp: 8, Tx: Transaction{Op: OpBurn, From: acct(2), Amount: 3, CreatedAtTime: u64p(8)}},
		"burn_from": {ParentHash: &ph, Timestamp: 8, Tx: Transaction{Op: OpBurn, From: acct(2), Spender: acct(3), Amount: 3,
			ICRC1Memo: []byte{0}, HasICRC1Memo: true}},
	}
}

func normalize(b *Block) *Block {
	c := *b
	if c.Tx.HasICRC1Memo && c.Tx.ICRC1Memo == nil {
		c.Tx.ICRC1Memo = []byte{}
	}
	return &c
}

func TestEncodeDecodeAgreeWithTheSchema(t *testing.T) {
	md := schema(t)
	for name, blk := range sampleBlocks() {
		raw, err := Encode(blk)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := Decode(raw)
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if !reflect.DeepEqual(normalize(got), normalize(blk)) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got.Tx, blk.Tx)
		}
		ref, ok := viaSchema(t, md, raw)
		if !ok || !reflect.DeepEqual(normalize(ref), normalize(got)) {
			t.Errorf("%s: the schema reads\n%+v\nthis package\n%+v", name, ref, got)
		}
		// The protobuf module writes oneof fields after the others; prost,
		// DFINITY's encoder, writes every field in number order, as Encode
		// does. Field order changes the bytes (and so the hash) but never
		// the reading: the module's bytes decode to the same block.
		re := schemaEncode(t, md, raw)
		again, err := Decode(re)
		if err != nil || !reflect.DeepEqual(normalize(again), normalize(got)) {
			t.Errorf("%s: the schema's encoding %x reads %+v, %v", name, re, again, err)
		}
	}
}

func TestDecodeRefusesWhatTheLedgerNeverWrites(t *testing.T) {
	good, err := Encode(sampleBlocks()["transfer"])
	if err != nil {
		t.Fatal(err)
	}
	tag := func(n protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, n, typ) }
	msg := func(n protowire.Number, body []byte) []byte { return msgField(nil, n, body) }
	txOnly := func(tx []byte) []byte {
		return append(msg(fBlockTimestamp, u64Body(1)), msg(fBlockTransaction, tx)...)
	}
	send := msgField(msgField(msgField(msgField(nil, fSendFrom, accountBody(acct(1))), fSendTo, accountBody(acct(2))),
		fSendAmount, u64Body(1)), fSendMaxFee, u64Body(1))
	cases := map[string]struct {
		raw  []byte
		want string
	}{
		"unknown field":       {append(append([]byte{}, good...), msg(9, nil)...), "unknown field 9"},
		"repeated field":      {append(append([]byte{}, good...), msg(fBlockTimestamp, u64Body(2))...), "field 2 repeated"},
		"wrong wire type":     {append(tag(fBlockTimestamp, protowire.VarintType), 1), "wire type"},
		"truncated":           {good[:len(good)-1], "Block"},
		"overlong varint":     {txOnly(msg(fTxSend, send))[:0:0], ""},
		"no transaction":      {msg(fBlockTimestamp, u64Body(1)), "no transaction"},
		"no timestamp":        {msg(fBlockTransaction, msg(fTxSend, send)), "no timestamp"},
		"two operations":      {txOnly(append(msg(fTxSend, send), msg(fTxMint, msgField(msgField(nil, fMintTo, accountBody(acct(1))), fMintAmount, nil))...)), "2 operations"},
		"no operation":        {txOnly(msg(fTxMemo, nil)), "0 operations"},
		"short parent hash":   {append(msg(fBlockParentHash, bytesBody([]byte{1, 2})), txOnly(msg(fTxSend, send))...), "parent_hash"},
		"short account":       {txOnly(msg(fTxMint, msgField(msgField(nil, fMintTo, bytesBody([]byte{1})), fMintAmount, nil))), "Mint.to"},
		"send without fee":    {txOnly(msg(fTxSend, send[:len(send)-len(msgField(nil, fSendMaxFee, u64Body(1)))])), "max_fee"},
		"approve with amount": {txOnly(msg(fTxSend, append(append([]byte{}, send...), msg(fSendApprove, msg(fApproveAllowance, nil))...))), "on an approve"},
		"both extensions": {txOnly(msg(fTxSend, append(append(append([]byte{}, send...), msg(fSendApprove, nil)...),
			msg(fSendTransferFrom, nil)...))), "both extensions"},
		"bad checksummed account": {txOnly(msg(fTxMint, msgField(msgField(nil, fMintTo, bytesBody(make([]byte, 32))), fMintAmount, nil))), "checksum"},
	}
	// A varint written in more bytes than needed: 1 as 0x81 0x00.
	over := append(msg(fBlockTimestamp, []byte{0x08, 0x81, 0x00}), msg(fBlockTransaction, msg(fTxSend, send))...)
	cases["overlong varint"] = struct {
		raw  []byte
		want string
	}{over, "not minimally encoded"}
	for name, c := range cases {
		_, err := Decode(c.raw)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one naming %q", name, err, c.want)
		}
	}
}

// FuzzDecodeAgreesWithTheSchema: whatever this decoder accepts, the
// protobuf module reads the same way, and Encode writes it back as the
// ledger would (the message its into_proto builds, in prost's order).
func FuzzDecodeAgreesWithTheSchema(f *testing.F) {
	for _, b := range edgeBlocks() {
		raw, err := Encode(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	md := schema(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := Decode(raw)
		if err != nil {
			return
		}
		ref, ok := viaSchema(t, md, raw)
		if !ok {
			t.Fatalf("accepted bytes the protobuf module refuses: %x", raw)
		}
		if !reflect.DeepEqual(normalize(ref), normalize(got)) {
			t.Fatalf("%x: the schema reads\n%+v\nthis package\n%+v", raw, ref.Tx, got.Tx)
		}
		re, err := Encode(got)
		if err != nil {
			t.Fatalf("%x: decoded, but encoding it back fails: %v", raw, err)
		}
		if want := marshalIn(prostOrder, intoProto(md, got)); !bytes.Equal(re, want) {
			t.Fatalf("%x: re-encoded as\n%x\nthe ledger writes\n%x", raw, re, want)
		}
	})
}

func TestNewAccountIDTreatsAbsentSubaccountAsZeros(t *testing.T) {
	a, err := NewAccountID([]byte{1, 2, 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewAccountID([]byte{1, 2, 3}, make([]byte, 32))
	if err != nil || a != b {
		t.Fatalf("absent and zero subaccount differ: %s %s %v", a, b, err)
	}
	sub := make([]byte, 32)
	sub[31] = 1
	c, _ := NewAccountID([]byte{1, 2, 3}, sub)
	if c == a {
		t.Fatal("subaccount 1 gives the default account's identifier")
	}
	if _, err := NewAccountID([]byte{1}, []byte{1}); err == nil {
		t.Fatal("a 1-byte subaccount was accepted")
	}
}
