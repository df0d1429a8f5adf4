package icp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// randomBlocks is the seeded part of the corpus the encoder is checked on.
const randomBlocks = 10_000

// edgeBlocks are the shapes worth naming: every operation, each optional
// field present and absent, 0 and the largest u64 wherever a number goes,
// empty and 32-byte memos, block 0 (no parent).
func edgeBlocks() map[string]*Block {
	ph := [32]byte{0xff, 1, 2, 3, 31: 0xee}
	maxU := uint64(math.MaxUint64)
	memo32 := bytes.Repeat([]byte{0xa5}, 32)
	out := map[string]*Block{}
	for name, b := range sampleBlocks() {
		out["sample/"+name] = b
	}
	add := func(name string, b Block) { out[name] = &b }
	for _, v := range []struct {
		name string
		v    uint64
	}{{"zero", 0}, {"max", maxU}} {
		n, x := v.name, v.v
		add("transfer/all-"+n, Block{ParentHash: &ph, Timestamp: x, Tx: Transaction{Op: OpTransfer, From: acct(1), To: acct(2),
			Amount: x, Fee: u64p(x), Memo: x, ICRC1Memo: memo32, HasICRC1Memo: true, CreatedAtTime: u64p(x)}})
		add("transfer/bare-"+n, Block{Timestamp: x, Tx: Transaction{Op: OpTransfer, From: acct(1), To: acct(2), Amount: x, Fee: u64p(x)}})
		add("transfer_from/all-"+n, Block{ParentHash: &ph, Timestamp: x, Tx: Transaction{Op: OpTransfer, From: acct(1), To: acct(2),
			Spender: acct(3), Amount: x, Fee: u64p(x), ICRC1Memo: []byte{}, HasICRC1Memo: true, CreatedAtTime: u64p(x)}})
		add("approve/all-"+n, Block{ParentHash: &ph, Timestamp: x, Tx: Transaction{Op: OpApprove, From: acct(1), Spender: acct(3),
			Amount: x, Fee: u64p(x), ExpectedAllowance: u64p(x), ExpiresAt: u64p(x), ICRC1Memo: memo32, HasICRC1Memo: true, CreatedAtTime: u64p(x)}})
		add("approve/bare-"+n, Block{ParentHash: &ph, Timestamp: x, Tx: Transaction{Op: OpApprove, From: acct(1), Spender: acct(3),
			Amount: x, Fee: u64p(x)}})
		add("approve/expected-only-"+n, Block{ParentHash: &ph, Timestamp: x, Tx: Transaction{Op: OpApprove, From: acct(1), Spender: acct(3),
			Amount: x, Fee: u64p(x), ExpectedAllowance: u64p(x)}})
		add("approve/expires-only-"+n, Block{ParentHash: &ph, Timestamp: x, Tx: Transaction{Op: OpApprove, From: acct(1), Spender: acct(3),
			Amount: x, Fee: u64p(x), ExpiresAt: u64p(x)}})
		add("mint/all-"+n, Block{ParentHash: &ph, Timestamp: x, Tx: Transaction{Op: OpMint, To: acct(2), Amount: x, Memo: x,
			ICRC1Memo: memo32, HasICRC1Memo: true, CreatedAtTime: u64p(x)}})
		add("mint/bare-"+n, Block{Timestamp: x, Tx: Transaction{Op: OpMint, To: acct(2), Amount: x}})
		add("burn/all-"+n, Block{ParentHash: &ph, Timestamp: x, Tx: Transaction{Op: OpBurn, From: acct(2), Spender: acct(3), Amount: x,
			Memo: x, ICRC1Memo: []byte{}, HasICRC1Memo: true, CreatedAtTime: u64p(x)}})
		add("burn/bare-"+n, Block{ParentHash: &ph, Timestamp: x, Tx: Transaction{Op: OpBurn, From: acct(2), Amount: x}})
	}
	return out
}

// edgeU64 favours the values where varints and proto3 defaults change:
// 0, 1, byte boundaries and the largest.
func edgeU64(r *rand.Rand) uint64 {
	switch r.IntN(6) {
	case 0:
		return 0
	case 1:
		return math.MaxUint64
	case 2:
		return 1<<(7*uint(r.IntN(10))) - uint64(r.IntN(2))
	}
	return r.Uint64() >> r.IntN(64)
}

func randAccount(r *rand.Rand) *AccountID {
	var a AccountID
	for i := range a {
		a[i] = byte(r.UintN(256))
	}
	return &a
}

func randomBlock(r *rand.Rand) *Block {
	maybe := func() *uint64 {
		if r.IntN(2) == 0 {
			return nil
		}
		v := edgeU64(r)
		return &v
	}
	var blk Block
	if r.IntN(10) != 0 {
		var h [32]byte
		for i := range h {
			h[i] = byte(r.UintN(256))
		}
		blk.ParentHash = &h
	}
	blk.Timestamp = edgeU64(r)
	t := &blk.Tx
	t.Op = Op(1 + r.IntN(4))
	t.Amount = edgeU64(r)
	switch t.Op {
	case OpBurn:
		t.From = randAccount(r)
		if r.IntN(2) == 0 {
			t.Spender = randAccount(r)
		}
	case OpMint:
		t.To = randAccount(r)
	case OpTransfer:
		t.From, t.To, t.Fee = randAccount(r), randAccount(r), u64p(edgeU64(r))
		if r.IntN(2) == 0 {
			t.Spender = randAccount(r)
		}
	case OpApprove:
		t.From, t.Spender, t.Fee = randAccount(r), randAccount(r), u64p(edgeU64(r))
		t.ExpectedAllowance, t.ExpiresAt = maybe(), maybe()
	}
	if r.IntN(4) == 0 {
		t.Memo = edgeU64(r)
	}
	if r.IntN(2) == 0 {
		t.HasICRC1Memo = true
		t.ICRC1Memo = make([]byte, []int{0, 1, 8, 32}[r.IntN(4)])
		for i := range t.ICRC1Memo {
			t.ICRC1Memo[i] = byte(r.UintN(256))
		}
	}
	t.CreatedAtTime = maybe()
	return &blk
}

// corpus is every block the encoder is checked on, in a fixed order.
func corpus() ([]string, []*Block) {
	edge := edgeBlocks()
	names := make([]string, 0, len(edge)+randomBlocks)
	for n := range edge {
		names = append(names, n)
	}
	sort.Strings(names)
	blocks := make([]*Block, 0, len(names)+randomBlocks)
	for _, n := range names {
		blocks = append(blocks, edge[n])
	}
	r := rand.New(rand.NewPCG(15, 1))
	for i := range randomBlocks {
		names = append(names, fmt.Sprintf("random/%d", i))
		blocks = append(blocks, randomBlock(r))
	}
	return names, blocks
}

// TestEncodeAgreesWithTheLedgerProto checks every corpus block three
// ways against the ledger's compiled .proto: the protobuf module reads our
// bytes back into the same block; our bytes are exactly the message
// DFINITY's into_proto builds, written in prost's order; and the protobuf
// module's own deterministic bytes of that message (same fields, oneof
// written last) decode to the same block.
func TestEncodeAgreesWithTheLedgerProto(t *testing.T) {
	md := schema(t)
	names, blocks := corpus()
	failures := 0
	fail := func(format string, a ...any) {
		t.Helper()
		if failures++; failures <= 10 {
			t.Errorf(format, a...)
		}
	}
	reordered := 0
	for i, blk := range blocks {
		name := names[i]
		raw, err := Encode(blk)
		if err != nil {
			fail("%s: encode: %v", name, err)
			continue
		}
		ref, ok := viaSchema(t, md, raw)
		if !ok {
			fail("%s: the protobuf module refuses our bytes %x", name, raw)
			continue
		}
		if !reflect.DeepEqual(normalize(ref), normalize(blk)) {
			fail("%s: the protobuf module reads our bytes as\n%+v\nwritten from\n%+v", name, ref.Tx, blk.Tx)
		}
		want := intoProto(md, blk)
		if prost := marshalIn(prostOrder, want); !bytes.Equal(prost, raw) {
			fail("%s: our bytes\n%x\nthe ledger's message in prost's order\n%x", name, raw, prost)
		}
		mod, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
		if err != nil {
			fail("%s: the protobuf module cannot write the message: %v", name, err)
			continue
		}
		// marshalIn in the module's order must give the module's bytes, or
		// its prost-order output above proves nothing.
		if mine := marshalIn(goOrder, want); !bytes.Equal(mine, mod) {
			fail("%s: the schema writer in the module's order\n%x\nthe module\n%x", name, mine, mod)
		}
		if !bytes.Equal(mod, raw) {
			reordered++
		}
		got, err := Decode(mod)
		if err != nil || !reflect.DeepEqual(normalize(got), normalize(blk)) {
			fail("%s: the module's bytes %x decode to %+v, %v", name, mod, got, err)
		}
		if got, err := Decode(raw); err != nil || !reflect.DeepEqual(normalize(got), normalize(blk)) {
			fail("%s: round trip gives %+v, %v", name, got, err)
		}
	}
	if failures > 10 {
		t.Errorf("%d failures in all, the first 10 shown", failures)
	}
	// Every Transaction has its operation (fields 1-3) before its memo
	// (4) in prost's order and after it in the module's, so no block's
	// bytes can agree; if they did, one of the orders above is not what
	// its writer does.
	if reordered != len(blocks) {
		t.Errorf("the module wrote %d of %d blocks in a different order from prost, want all", reordered, len(blocks))
	}
	t.Logf("%d blocks (%d named edge cases, %d random) agree with the ledger's .proto", len(blocks), len(blocks)-randomBlocks, randomBlocks)
}

// checksummed is the 32-byte form of a 28-byte hash, the checksum
// computed here rather than by AccountID.
func checksummed(h []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(h))
	return append(out, h...)
}

// randomMessage fills a schema message at random, mostly as the ledger
// would and sometimes not: a field left out, an account of the wrong
// length or checksum, a short parent hash, an unknown field.
func randomMessage(r *rand.Rand, m protoreflect.Message) {
	d := m.Descriptor()
	fields := d.Fields()
	for i := 0; i < d.Oneofs().Len(); i++ {
		o := d.Oneofs().Get(i)
		if r.IntN(20) == 0 {
			continue
		}
		fd := o.Fields().Get(r.IntN(o.Fields().Len()))
		randomMessage(r, m.Mutable(fd).Message())
	}
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil {
			continue
		}
		switch fd.Kind() {
		case protoreflect.MessageKind:
			if r.IntN(15) != 0 {
				randomMessage(r, m.Mutable(fd).Message())
			}
		case protoreflect.Uint64Kind:
			m.Set(fd, protoreflect.ValueOfUint64(edgeU64(r)))
		case protoreflect.BytesKind:
			m.Set(fd, protoreflect.ValueOfBytes(randomBytes(r, d.Name())))
		}
	}
	if r.IntN(200) == 0 {
		var u []byte
		n := protowire.Number(8 + r.IntN(20))
		if r.IntN(2) == 0 {
			u = protowire.AppendVarint(protowire.AppendTag(u, n, protowire.VarintType), edgeU64(r))
		} else {
			u = protowire.AppendBytes(protowire.AppendTag(u, n, protowire.BytesType), []byte("x"))
		}
		m.SetUnknown(u)
	}
}

func randomBytes(r *rand.Rand, msg protoreflect.Name) []byte {
	n := func(k int) []byte {
		b := make([]byte, k)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return b
	}
	switch msg {
	case "AccountIdentifier":
		switch p := r.IntN(100); {
		case p < 80:
			return n(28)
		case p < 90:
			return checksummed(n(28))
		case p < 93:
			return n(32) // a checksum that almost surely fails
		default:
			return n(r.IntN(40))
		}
	case "Hash":
		if r.IntN(30) != 0 {
			return n(32)
		}
		return n(r.IntN(40))
	}
	return n([]int{0, 1, 8, 32}[r.IntN(4)])
}

// refusals are the reasons the strict decoder must refuse m, each a
// string its error names. Where DFINITY's own from_proto is laxer, the
// ledger never writes such a block: it defaults a missing max_fee to the
// standard fee, ignores an approve's amount and skips unknown fields,
// while every block it writes has a max_fee, an approve amount of 0 and
// no unknown field. A laxer reading would let one block mean two things.
func refusals(m protoreflect.Message) []string {
	var why []string
	add := func(s string) { why = append(why, s) }
	var walk func(protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if len(m.GetUnknown()) > 0 {
			add("unknown field")
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if fd.Kind() == protoreflect.MessageKind {
				walk(v.Message())
			}
			return true
		})
	}
	walk(m)
	name := func(m protoreflect.Message, f string) string { return string(m.Descriptor().Name()) + "." + f }
	need := func(m protoreflect.Message, f string) (protoreflect.Message, bool) {
		s, ok := sub(m, f)
		if !ok {
			add(name(m, f) + ": missing")
		}
		return s, ok
	}
	account := func(m protoreflect.Message, f string, required bool) {
		s, ok := sub(m, f)
		if !ok {
			if required {
				add(name(m, f) + ": missing")
			}
			return
		}
		b := inner(s).Bytes()
		if len(b) == 32 && bytes.Equal(checksummed(b[4:]), b) || len(b) == 28 {
			return
		}
		add(name(m, f))
	}
	if p, ok := sub(m, "parent_hash"); ok && len(inner(p).Bytes()) != 32 {
		add("parent_hash")
	}
	if _, ok := sub(m, "timestamp"); !ok {
		add("no timestamp")
	}
	tx, ok := sub(m, "transaction")
	if !ok {
		add("no transaction")
		return why
	}
	if b, ok := sub(tx, "burn"); ok {
		account(b, "from", true)
		need(b, "amount")
		account(b, "spender", false)
	} else if b, ok := sub(tx, "mint"); ok {
		account(b, "to", true)
		need(b, "amount")
	} else if s, ok := sub(tx, "send"); ok {
		account(s, "from", true)
		account(s, "to", true)
		amount, hasAmount := need(s, "amount")
		need(s, "max_fee")
		if a, ok := sub(s, "approve"); ok {
			if hasAmount && inner(amount).Uint() != 0 {
				add("on an approve")
			}
			need(a, "allowance")
		}
		if f, ok := sub(s, "transfer_from"); ok {
			account(f, "spender", true)
		}
	} else {
		add("0 operations")
	}
	return why
}

// TestDecodeAgreesWithTheLedgerProtoOnRandomMessages writes random
// schema messages with the protobuf module (and in prost's order) and
// requires the strict decoder to read each as the module does, or to
// refuse it for a reason refusals names.
func TestDecodeAgreesWithTheLedgerProtoOnRandomMessages(t *testing.T) {
	const n = 20_000
	md := schema(t)
	r := rand.New(rand.NewPCG(15, 2))
	accepted, refused := 0, map[string]int{}
	failures := 0
	fail := func(format string, a ...any) {
		t.Helper()
		if failures++; failures <= 10 {
			t.Errorf(format, a...)
		}
	}
	for i := range n {
		m := dynamicpb.NewMessage(md)
		randomMessage(r, m)
		var raw []byte
		if i%2 == 0 {
			raw = marshalIn(prostOrder, m)
		} else {
			var err error
			if raw, err = (proto.MarshalOptions{Deterministic: true}).Marshal(m); err != nil {
				t.Fatal(err)
			}
		}
		why := refusals(m)
		got, err := Decode(raw)
		switch {
		case err == nil && len(why) > 0:
			fail("%x: accepted, want a refusal naming one of %q", raw, why)
		case err != nil && len(why) == 0:
			fail("%x: refused (%v), but the ledger's .proto reads it as a whole block", raw, err)
		case err != nil:
			named := ""
			for _, w := range why {
				if strings.Contains(err.Error(), w) {
					named = w
				}
			}
			if named == "" {
				fail("%x: refused with %q, which names none of %q", raw, err, why)
			}
			refused[strings.TrimSuffix(named, ": missing")]++
		default:
			accepted++
			if want := fromMessage(m); !reflect.DeepEqual(normalize(got), normalize(want)) {
				fail("%x: decoded as\n%+v\nthe protobuf module reads\n%+v", raw, got.Tx, want.Tx)
			}
		}
	}
	if failures > 10 {
		t.Errorf("%d failures in all, the first 10 shown", failures)
	}
	// Both outcomes must be common, or the comparison tests little.
	if accepted < n/4 || len(refused) < 10 {
		t.Errorf("accepted %d of %d, refusals %v: the generator no longer covers both sides", accepted, n, refused)
	}
	t.Logf("%d random messages: %d read alike, refused %v", n, accepted, refused)
}
