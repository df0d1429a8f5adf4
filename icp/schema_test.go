package icp

import (
	"context"
	"sort"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// schema compiles testdata/ic_ledger/pb/v1/types.proto, DFINITY's block
// messages, and returns its Block: the protobuf module reads and writes
// bytes by that schema, an independent reading of what this package
// decodes and encodes by hand. protoc is not needed: protocompile parses
// and links .proto text in Go.
func schema(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{ImportPaths: []string{"testdata"}}}
	files, err := c.Compile(context.Background(), "ic_ledger/pb/v1/types.proto")
	if err != nil {
		t.Fatalf("compile the ledger's .proto: %v", err)
	}
	md := files[0].Messages().ByName("Block")
	if md == nil {
		t.Fatal("the ledger's .proto has no Block")
	}
	return md
}

// sub is the message field name of m, or false when it is not set.
func sub(m protoreflect.Message, name string) (protoreflect.Message, bool) {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("schema has no field " + string(m.Descriptor().FullName()) + "." + name)
	}
	if !m.Has(fd) {
		return nil, false
	}
	return m.Get(fd).Message(), true
}

// inner is the one field of a wrapper message (Tokens, TimeStamp, Hash...).
func inner(m protoreflect.Message) protoreflect.Value {
	return m.Get(m.Descriptor().Fields().Get(0))
}

// viaSchema reads raw with the protobuf module into this package's Block,
// the way the schema says; ok false when the module refuses the bytes.
func viaSchema(t testing.TB, md protoreflect.MessageDescriptor, raw []byte) (*Block, bool) {
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(raw, m); err != nil {
		return nil, false
	}
	return fromMessage(m), true
}

// fromMessage is the block a schema message holds. A 32-byte account is
// read as its last 28 bytes (the hash after the checksum) whether or not
// the checksum holds: checking it is the decoder's business.
func fromMessage(m protoreflect.Message) *Block {
	u := func(m protoreflect.Message, name string) *uint64 {
		s, ok := sub(m, name)
		if !ok {
			return nil
		}
		v := inner(s).Uint()
		return &v
	}
	acc := func(m protoreflect.Message, name string) *AccountID {
		s, ok := sub(m, name)
		if !ok {
			return nil
		}
		var a AccountID
		b := inner(s).Bytes()
		if len(b) == 32 {
			b = b[4:]
		}
		copy(a[:], b)
		return &a
	}
	deref := func(p *uint64) uint64 {
		if p == nil {
			return 0
		}
		return *p
	}
	var blk Block
	if p, ok := sub(m, "parent_hash"); ok {
		var h [32]byte
		copy(h[:], inner(p).Bytes())
		blk.ParentHash = &h
	}
	blk.Timestamp = deref(u(m, "timestamp"))
	txm, ok := sub(m, "transaction")
	if !ok {
		return &blk
	}
	tx := &blk.Tx
	tx.Memo = deref(u(txm, "memo"))
	tx.CreatedAtTime = u(txm, "created_at_time")
	if s, ok := sub(txm, "icrc1_memo"); ok {
		tx.ICRC1Memo, tx.HasICRC1Memo = append([]byte{}, inner(s).Bytes()...), true
	}
	if b, ok := sub(txm, "burn"); ok {
		tx.Op, tx.From, tx.Spender, tx.Amount = OpBurn, acc(b, "from"), acc(b, "spender"), deref(u(b, "amount"))
	}
	if b, ok := sub(txm, "mint"); ok {
		tx.Op, tx.To, tx.Amount = OpMint, acc(b, "to"), deref(u(b, "amount"))
	}
	if s, ok := sub(txm, "send"); ok {
		tx.Op, tx.From, tx.To, tx.Amount, tx.Fee = OpTransfer, acc(s, "from"), acc(s, "to"), deref(u(s, "amount")), u(s, "max_fee")
		if a, ok := sub(s, "approve"); ok {
			tx.Op, tx.Spender, tx.To = OpApprove, tx.To, nil
			tx.Amount, tx.ExpiresAt, tx.ExpectedAllowance = deref(u(a, "allowance")), u(a, "expires_at"), u(a, "expected_allowance")
		}
		if f, ok := sub(s, "transfer_from"); ok {
			tx.Spender = acc(f, "spender")
		}
	}
	return &blk
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

// intoProto builds the schema message DFINITY's ledger builds from blk
// (`impl ToProto for Block` and `for Transaction`, into_proto, in
// rs/ledger_suite/icp/src/validate_endpoints.rs): parent_hash,
// icrc1_memo, created_at_time, a burn's spender and an approve's
// expires_at and expected_allowance only when the block has them; the
// timestamp, the memo (even 0), every account and amount and the fee
// always; created_at never; an approve as a Send with amount 0 and the
// spender in `to`.
func intoProto(md protoreflect.MessageDescriptor, blk *Block) *dynamicpb.Message {
	set := func(m protoreflect.Message, name string) protoreflect.Message {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			panic("schema has no field " + string(m.Descriptor().FullName()) + "." + name)
		}
		s := m.Mutable(fd).Message()
		return s
	}
	wrapU := func(m protoreflect.Message, name string, v uint64) {
		s := set(m, name)
		s.Set(s.Descriptor().Fields().Get(0), protoreflect.ValueOfUint64(v))
	}
	wrapB := func(m protoreflect.Message, name string, v []byte) {
		s := set(m, name)
		s.Set(s.Descriptor().Fields().Get(0), protoreflect.ValueOfBytes(append([]byte{}, v...)))
	}
	acc := func(m protoreflect.Message, name string, a *AccountID) {
		if a != nil {
			wrapB(m, name, a[:])
		}
	}
	m := dynamicpb.NewMessage(md)
	if blk.ParentHash != nil {
		wrapB(m, "parent_hash", blk.ParentHash[:])
	}
	wrapU(m, "timestamp", blk.Timestamp)
	t := &blk.Tx
	txm := set(m, "transaction")
	switch t.Op {
	case OpBurn:
		b := set(txm, "burn")
		acc(b, "from", t.From)
		wrapU(b, "amount", t.Amount)
		acc(b, "spender", t.Spender)
	case OpMint:
		b := set(txm, "mint")
		acc(b, "to", t.To)
		wrapU(b, "amount", t.Amount)
	case OpTransfer, OpApprove:
		s := set(txm, "send")
		acc(s, "from", t.From)
		if t.Fee != nil {
			wrapU(s, "max_fee", *t.Fee)
		}
		if t.Op == OpApprove {
			acc(s, "to", t.Spender)
			wrapU(s, "amount", 0)
			a := set(s, "approve")
			wrapU(a, "allowance", t.Amount)
			if t.ExpiresAt != nil {
				wrapU(a, "expires_at", *t.ExpiresAt)
			}
			if t.ExpectedAllowance != nil {
				wrapU(a, "expected_allowance", *t.ExpectedAllowance)
			}
			break
		}
		acc(s, "to", t.To)
		wrapU(s, "amount", t.Amount)
		if t.Spender != nil {
			acc(set(s, "transfer_from"), "spender", t.Spender)
		}
	}
	wrapU(txm, "memo", t.Memo)
	if t.HasICRC1Memo {
		wrapB(txm, "icrc1_memo", t.ICRC1Memo)
	}
	if t.CreatedAtTime != nil {
		wrapU(txm, "created_at_time", *t.CreatedAtTime)
	}
	return m
}

// fieldOrder says where a set field goes among its message's fields.
type fieldOrder func(a, b protoreflect.FieldDescriptor) bool

// prostOrder is how prost, DFINITY's encoder, writes a message: its
// derive sorts fields by their lowest tag, a oneof taking the lowest tag
// of all its members ("Sort the fields by tag number so that fields will
// be encoded in tag order", prost-derive src/lib.rs).
func prostOrder(a, b protoreflect.FieldDescriptor) bool {
	key := func(f protoreflect.FieldDescriptor) protoreflect.FieldNumber {
		o := f.ContainingOneof()
		if o == nil {
			return f.Number()
		}
		low := o.Fields().Get(0).Number()
		for i := 1; i < o.Fields().Len(); i++ {
			low = min(low, o.Fields().Get(i).Number())
		}
		return low
	}
	return key(a) < key(b)
}

// goOrder is the protobuf module's deterministic order for a message
// without generated code (its LegacyFieldOrder): fields outside a oneof by
// number, then oneof members by oneof then number. It differs from prost's
// for a Transaction, whose operation (fields 1-3) it writes after the memo.
func goOrder(a, b protoreflect.FieldDescriptor) bool {
	oa, ob := a.ContainingOneof(), b.ContainingOneof()
	if (oa == nil) != (ob == nil) {
		return oa == nil
	}
	if oa != nil && ob != nil && oa != ob {
		return oa.Index() < ob.Index()
	}
	return a.Number() < b.Number()
}

// marshalIn writes m's set fields in the given order, proto3's way: a
// message field when set (even if empty), a scalar when not zero. Driven by
// the schema alone, it shares nothing with Encode but protowire's varints.
func marshalIn(order fieldOrder, m protoreflect.Message) []byte {
	var fds []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fds = append(fds, fd)
		return true
	})
	sort.Slice(fds, func(i, j int) bool { return order(fds[i], fds[j]) })
	var b []byte
	for _, fd := range fds {
		v := m.Get(fd)
		switch fd.Kind() {
		case protoreflect.MessageKind:
			b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
			b = protowire.AppendBytes(b, marshalIn(order, v.Message()))
		case protoreflect.BytesKind:
			b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
			b = protowire.AppendBytes(b, v.Bytes())
		case protoreflect.Uint64Kind:
			b = protowire.AppendTag(b, fd.Number(), protowire.VarintType)
			b = protowire.AppendVarint(b, v.Uint())
		default:
			panic("the block schema has no " + fd.Kind().String() + " field")
		}
	}
	return append(b, m.GetUnknown()...)
}
