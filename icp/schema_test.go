package icp

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// schema is ic_ledger/pb/v1/types.proto's block messages, transcribed field
// by field, read by the protobuf module's own decoder: an independent
// reading of the bytes this package decodes by hand.
func schema(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	msg := func(name string, fs ...*descriptorpb.FieldDescriptorProto) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: fs}
	}
	typ := func(n string) *string { return proto.String(".ic_ledger.pb.v1." + n) }
	sub := func(name string, num int32, of string, oneof ...int32) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:  descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), TypeName: typ(of)}
		if len(oneof) > 0 {
			f.OneofIndex = proto.Int32(oneof[0])
		}
		return f
	}
	scalar := func(name string, k descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(1),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: k.Enum()}
	}
	u64, by := descriptorpb.FieldDescriptorProto_TYPE_UINT64, descriptorpb.FieldDescriptorProto_TYPE_BYTES
	tx := msg("Transaction", sub("burn", 1, "Burn", 0), sub("mint", 2, "Mint", 0), sub("send", 3, "Send", 0),
		sub("memo", 4, "Memo"), sub("created_at", 5, "BlockIndex"), sub("created_at_time", 6, "TimeStamp"),
		sub("icrc1_memo", 7, "Icrc1Memo"))
	tx.OneofDecl = []*descriptorpb.OneofDescriptorProto{{Name: proto.String("transfer")}}
	send := msg("Send", sub("from", 1, "AccountIdentifier"), sub("to", 2, "AccountIdentifier"),
		sub("amount", 3, "Tokens"), sub("max_fee", 4, "Tokens"), sub("approve", 5, "Approve", 0),
		sub("transfer_from", 6, "TransferFrom", 0))
	send.OneofDecl = []*descriptorpb.OneofDescriptorProto{{Name: proto.String("extension")}}
	fd := &descriptorpb.FileDescriptorProto{
		Name: proto.String("ic_ledger/pb/v1/types.proto"), Package: proto.String("ic_ledger.pb.v1"),
		Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			msg("Block", sub("parent_hash", 1, "Hash"), sub("timestamp", 2, "TimeStamp"), sub("transaction", 3, "Transaction")),
			msg("Hash", scalar("hash", by)),
			tx, send,
			msg("TransferFrom", sub("spender", 1, "AccountIdentifier")),
			msg("Approve", sub("allowance", 1, "Tokens"), sub("expires_at", 2, "TimeStamp"), sub("expected_allowance", 3, "Tokens")),
			msg("Mint", sub("to", 2, "AccountIdentifier"), sub("amount", 3, "Tokens")),
			msg("Burn", sub("from", 1, "AccountIdentifier"), sub("amount", 3, "Tokens"), sub("spender", 4, "AccountIdentifier")),
			msg("AccountIdentifier", scalar("hash", by)),
			msg("Memo", scalar("memo", u64)),
			msg("Icrc1Memo", scalar("memo", by)),
			msg("TimeStamp", scalar("timestamp_nanos", u64)),
			msg("Tokens", scalar("e8s", u64)),
			msg("BlockIndex", scalar("height", u64)),
		},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f.Messages().ByName("Block")
}

// viaSchema reads raw with the protobuf module into this package's Block,
// the way the schema says; ok false when the module refuses the bytes.
func viaSchema(t testing.TB, md protoreflect.MessageDescriptor, raw []byte) (*Block, bool) {
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(raw, m); err != nil {
		return nil, false
	}
	get := func(m protoreflect.Message, name string) (protoreflect.Message, bool) {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		if !m.Has(fd) {
			return nil, false
		}
		return m.Get(fd).Message(), true
	}
	one := func(m protoreflect.Message) protoreflect.Value {
		return m.Get(m.Descriptor().Fields().ByNumber(1))
	}
	u := func(m protoreflect.Message, name string) *uint64 {
		s, ok := get(m, name)
		if !ok {
			return nil
		}
		v := one(s).Uint()
		return &v
	}
	acc := func(m protoreflect.Message, name string) *AccountID {
		s, ok := get(m, name)
		if !ok {
			return nil
		}
		var a AccountID
		b := one(s).Bytes()
		if len(b) == 32 {
			b = b[4:]
		}
		copy(a[:], b)
		return &a
	}
	var blk Block
	if p, ok := get(m, "parent_hash"); ok {
		var h [32]byte
		copy(h[:], one(p).Bytes())
		blk.ParentHash = &h
	}
	if ts := u(m, "timestamp"); ts != nil {
		blk.Timestamp = *ts
	}
	txm, _ := get(m, "transaction")
	tx := &blk.Tx
	if v := u(txm, "memo"); v != nil {
		tx.Memo = *v
	}
	tx.CreatedAtTime = u(txm, "created_at_time")
	if s, ok := get(txm, "icrc1_memo"); ok {
		tx.ICRC1Memo, tx.HasICRC1Memo = append([]byte{}, one(s).Bytes()...), true
	}
	deref := func(p *uint64) uint64 {
		if p == nil {
			return 0
		}
		return *p
	}
	if b, ok := get(txm, "burn"); ok {
		tx.Op, tx.From, tx.Spender, tx.Amount = OpBurn, acc(b, "from"), acc(b, "spender"), deref(u(b, "amount"))
	}
	if b, ok := get(txm, "mint"); ok {
		tx.Op, tx.To, tx.Amount = OpMint, acc(b, "to"), deref(u(b, "amount"))
	}
	if s, ok := get(txm, "send"); ok {
		tx.Op, tx.From, tx.To, tx.Amount, tx.Fee = OpTransfer, acc(s, "from"), acc(s, "to"), deref(u(s, "amount")), u(s, "max_fee")
		if a, ok := get(s, "approve"); ok {
			tx.Op, tx.Spender, tx.To = OpApprove, tx.To, nil
			tx.Amount, tx.ExpiresAt, tx.ExpectedAllowance = deref(u(a, "allowance")), u(a, "expires_at"), u(a, "expected_allowance")
		}
		if f, ok := get(s, "transfer_from"); ok {
			tx.Spender = acc(f, "spender")
		}
	}
	return &blk, true
}

// schemaEncode writes blk through the protobuf module (deterministic).
func schemaEncode(t testing.TB, md protoreflect.MessageDescriptor, raw []byte) []byte {
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(raw, m); err != nil {
		t.Fatal(err)
	}
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
