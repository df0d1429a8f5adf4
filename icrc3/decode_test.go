package icrc3

import (
	"bytes"
	"errors"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aviate-labs/agent-go/principal"
)

// ---- generators (deterministic seeds) ----

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

var randKeys = []string{"tx", "ts", "fee", "phash", "amt", "to", "from", "memo", "op", "", "ключ", "k\x00", "a", "b"}

func randNat(r *rand.Rand) Nat {
	switch r.IntN(4) {
	case 0:
		return NatFromUint64(r.Uint64N(128))
	case 1:
		return NatFromUint64(r.Uint64())
	case 2:
		n, _ := NatFromBig(new(big.Int).Lsh(new(big.Int).SetUint64(r.Uint64()|1), uint(64+r.IntN(200))))
		return n
	}
	return NatFromUint64(^uint64(0) - r.Uint64N(3))
}

func randInt(r *rand.Rand) *big.Int {
	switch r.IntN(4) {
	case 0:
		return big.NewInt(r.Int64N(256) - 128)
	case 1:
		return big.NewInt(int64(r.Uint64()))
	case 2:
		x := new(big.Int).Lsh(new(big.Int).SetUint64(r.Uint64()|1), uint(64+r.IntN(200)))
		if r.IntN(2) == 0 {
			x.Neg(x)
		}
		return x
	}
	return new(big.Int).Lsh(big.NewInt(-1), 63)
}

func randValue(r *rand.Rand, depth int) Value {
	k := r.IntN(6)
	if depth > 4 {
		k = r.IntN(4)
	}
	switch k {
	case 0:
		return Blob(randBytes(r, r.IntN(3)*r.IntN(40)))
	case 1:
		return Text(randKeys[r.IntN(len(randKeys))] + strings.Repeat("é", r.IntN(3)))
	case 2:
		return NatValue(randNat(r))
	case 3:
		return IntValue(randInt(r))
	case 4:
		vs := make([]Value, r.IntN(5))
		for i := range vs {
			vs[i] = randValue(r, depth+1)
		}
		return ArrayValue(vs...)
	}
	fs := make([]Field, r.IntN(6))
	for i := range fs {
		fs[i] = F(randKeys[r.IntN(len(randKeys))], randValue(r, depth+1)) // duplicates happen
	}
	return MapValue(fs...)
}

func randAccount(r *rand.Rand) Value {
	owner := Blob(randBytes(r, 29-r.IntN(20)))
	if r.IntN(3) == 0 {
		return ArrayValue(owner)
	}
	sub := make([]byte, 32)
	if r.IntN(2) == 0 {
		sub = randBytes(r, 32)
	}
	return ArrayValue(owner, Blob(sub))
}

// randBlock builds a DFINITY-style block (no btype, tx.op) or, now and then,
// a btype block, an unknown block, or one with an extra key of any shape.
func randBlock(r *rand.Rand, i uint64, phash *Hash) Value {
	ts := Uint(1_700_000_000_000_000_000 + i*1_000_000_007)
	var top []Field
	if phash != nil {
		top = append(top, F("phash", Blob(phash[:])))
	}
	top = append(top, F("ts", ts))
	tx := []Field{F("amt", NatValue(randNat(r)))}
	op := []string{"xfer", "xfer", "xfer", "mint", "burn", "approve", "107set_fee_collector"}[r.IntN(7)]
	switch op {
	case "xfer":
		tx = append(tx, F("from", randAccount(r)), F("to", randAccount(r)))
		if r.IntN(4) == 0 {
			tx = append(tx, F("spender", randAccount(r)))
		}
	case "mint":
		tx = append(tx, F("to", randAccount(r)))
	case "burn":
		tx = append(tx, F("from", randAccount(r)))
	case "approve":
		tx = append(tx, F("from", randAccount(r)), F("spender", randAccount(r)))
		if r.IntN(2) == 0 {
			tx = append(tx, F("expected_allowance", Uint(r.Uint64())), F("expires_at", Uint(r.Uint64())))
		}
	}
	if op == "xfer" || op == "approve" {
		if r.IntN(2) == 0 {
			tx = append(tx, F("fee", Uint(10_000)))
		} else {
			top = append(top, F("fee", Uint(10_000)))
		}
	}
	if r.IntN(2) == 0 {
		tx = append(tx, F("memo", Blob(randBytes(r, r.IntN(33)))))
	}
	if r.IntN(2) == 0 {
		tx = append(tx, F("ts", ts))
	}
	if r.IntN(5) == 0 {
		bt := map[string]string{"xfer": "1xfer", "mint": "1mint", "burn": "1burn", "approve": "2approve"}[op]
		if _, ok := MapValue(tx...).Get("spender"); ok && op == "xfer" {
			bt = "2xfer"
		}
		if bt == "" || r.IntN(4) == 0 {
			bt, op = "122freeze", ""
		}
		top = append(top, F("btype", Text(bt)))
	}
	if op != "" && r.IntN(8) != 0 {
		tx = append([]Field{F("op", Text(op))}, tx...)
	}
	if r.IntN(6) == 0 {
		top = append(top, F("extra", randValue(r, 1)))
	}
	r.Shuffle(len(tx), func(a, b int) { tx[a], tx[b] = tx[b], tx[a] })
	top = append(top, F("tx", MapValue(tx...)))
	r.Shuffle(len(top), func(a, b int) { top[a], top[b] = top[b], top[a] })
	return MapValue(top...)
}

func randChain(r *rand.Rand, first uint64, n int) []Value {
	vs := make([]Value, n)
	var prev *Hash
	if first > 0 {
		h := Hash(randBytes(r, 32))
		prev = &h
	}
	for i := range vs {
		vs[i] = randBlock(r, first+uint64(i), prev)
		h := vs[i].Hash()
		prev = &h
	}
	return vs
}

func randArchived(r *rand.Rand) []ArchivedBlocks {
	out := make([]ArchivedBlocks, r.IntN(3))
	for i := range out {
		out[i].Callback = Callback{Canister: principal.Principal{Raw: randBytes(r, 10)}, Method: "icrc3_get_blocks"}
		out[i].Args = make([]BlockRange, 1+r.IntN(2))
		for j := range out[i].Args {
			out[i].Args[j] = BlockRange{Start: r.Uint64N(1 << 40), Length: r.Uint64N(2001)}
		}
	}
	return out
}

// ---- differential tests against agent-go ----

func TestDecodeValuesDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		vs := make([]Value, r.IntN(6))
		for i := range vs {
			vs[i] = randValue(r, 0)
		}
		b := encodeBlockRange(t, vs)
		got, hashes, err := decodeValues(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		ag, err := agDecodeLegacy(encodeLegacy(t, page{values: vs}, false))
		if err != nil {
			t.Fatalf("agent-go decode: %v", err)
		}
		if len(got) != len(vs) || len(ag.vals) != len(vs) {
			t.Fatalf("got %d values, agent-go %d, want %d", len(got), len(ag.vals), len(vs))
		}
		for i := range vs {
			if !got[i].Equal(vs[i]) || !got[i].Equal(ag.vals[i]) {
				t.Fatalf("value %d differs:\n got %+v\nwant %+v", i, got[i], vs[i])
			}
			if hashes[i] != vs[i].Hash() || hashes[i] != ag.vals[i].Hash() {
				t.Fatalf("value %d: streaming hash %s, Value.Hash %s", i, hashes[i], vs[i].Hash())
			}
		}
	}
}

func checkBlocks(t *testing.T, got []Block, ids []uint64, want []Value) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d blocks, want %d", len(got), len(want))
	}
	for i := range want {
		exp, err := ParseBlock(ids[i], want[i], want[i].Hash())
		if err != nil {
			t.Fatalf("reference parse of block %d: %v", ids[i], err)
		}
		if got[i].Index != ids[i] || got[i].Hash != exp.Hash || !got[i].tree().Equal(want[i]) {
			t.Fatalf("block %d: index %d hash %s, want %d %s", i, got[i].Index, got[i].Hash, ids[i], exp.Hash)
		}
		if got[i].Kind != exp.Kind || got[i].Op != exp.Op || got[i].BType != exp.BType || got[i].TS != exp.TS {
			t.Fatalf("block %d: typed fields differ", i)
		}
		if i > 0 && got[i].PHash != nil && *got[i].PHash != got[i-1].Hash && ids[i] == ids[i-1]+1 {
			t.Fatalf("block %d: phash does not chain", ids[i])
		}
	}
}

func TestDecodeGetBlocksResultDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 60 {
		first := r.Uint64N(1 << 30)
		p := page{logLength: randNat(r), values: randChain(r, first, r.IntN(40)), archived: randArchived(r)}
		for i := range p.values {
			p.ids = append(p.ids, first+uint64(i))
		}
		b := encodeGetBlocks(t, p)
		got, err := DecodeGetBlocksResult(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		ll, ids, vals, arch, err := agDecodeGetBlocks(b)
		if err != nil {
			t.Fatalf("agent-go: %v", err)
		}
		if !got.LogLength.Equal(p.logLength) || !ll.Equal(p.logLength) {
			t.Fatalf("log_length %s (agent-go %s), want %s", got.LogLength, ll, p.logLength)
		}
		checkBlocks(t, got.Blocks, p.ids, p.values)
		checkBlocks(t, got.Blocks, ids, vals)
		if !archivedEqual(got.Archived, p.archived) || !archivedEqual(arch, p.archived) {
			t.Fatalf("archived %+v (agent-go %+v), want %+v", got.Archived, arch, p.archived)
		}
	}
}

func archivedEqual(a, b []ArchivedBlocks) bool {
	return slices.EqualFunc(a, b, func(x, y ArchivedBlocks) bool {
		return bytes.Equal(x.Callback.Canister.Raw, y.Callback.Canister.Raw) && x.Callback.Method == y.Callback.Method &&
			slices.Equal(x.Args, y.Args)
	})
}

func TestDecodeLegacyGetBlocksDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := range 60 {
		first := r.Uint64N(1 << 30)
		p := page{first: first, chainLen: first + 5000, values: randChain(r, first, r.IntN(40)), archived: randArchived(r)}
		if n%2 == 0 {
			p.cert = randBytes(r, r.IntN(3)*20)
		}
		for i := range p.values {
			p.ids = append(p.ids, first+uint64(i))
		}
		b := encodeLegacy(t, p, n%3 != 0)
		got, err := DecodeLegacyGetBlocks(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		ag, err := agDecodeLegacy(b)
		if err != nil {
			t.Fatalf("agent-go: %v", err)
		}
		if got.FirstIndex != first || got.ChainLength != p.chainLen || ag.first != first || ag.chainLen != p.chainLen {
			t.Fatalf("first %d chain %d", got.FirstIndex, got.ChainLength)
		}
		if (got.Certificate == nil) != (p.cert == nil) || !bytes.Equal(got.Certificate, p.cert) || !bytes.Equal(ag.cert, p.cert) {
			t.Fatalf("certificate %x, want %x", got.Certificate, p.cert)
		}
		checkBlocks(t, got.Blocks, p.ids, p.values)
		checkBlocks(t, got.Blocks, p.ids, ag.vals)
		if len(got.Archived) != len(p.archived) || len(ag.arch) != len(p.archived) {
			t.Fatalf("archived %d, want %d", len(got.Archived), len(p.archived))
		}
		for i, a := range p.archived {
			w := LegacyArchivedRange{Start: a.Args[0].Start, Length: a.Args[0].Length, Callback: a.Callback}
			for _, g := range []LegacyArchivedRange{got.Archived[i], ag.arch[i]} {
				if g.Start != w.Start || g.Length != w.Length || g.Callback.Method != w.Callback.Method ||
					!bytes.Equal(g.Callback.Canister.Raw, w.Callback.Canister.Raw) {
					t.Fatalf("archived %d: %+v, want %+v", i, g, w)
				}
			}
		}

		// The archive callback's reply numbers from the requested start.
		blocks, err := DecodeLegacyBlockRange(encodeBlockRange(t, p.values), first)
		if err != nil {
			t.Fatal(err)
		}
		checkBlocks(t, blocks, p.ids, p.values)
	}
}

// ---- hand-built encodings agent-go never produces ----

// candidBuf assembles Candid by hand for the cases a conforming encoder may
// produce but agent-go does not (type table order, extra fields, overlong LEB).
type candidBuf struct{ b []byte }

func (c *candidBuf) u(v uint64) *candidBuf    { c.b = AppendUvarint(c.b, v); return c }
func (c *candidBuf) s(v int64) *candidBuf     { c.b = AppendSLEB128(c.b, big.NewInt(v)); return c }
func (c *candidBuf) raw(b ...byte) *candidBuf { c.b = append(c.b, b...); return c }
func (c *candidBuf) str(s string) *candidBuf  { c.u(uint64(len(s))); c.b = append(c.b, s...); return c }

type tfield struct {
	name string
	id   uint32
	typ  int64
}

func (c *candidBuf) fields(fs ...tfield) *candidBuf {
	for i := range fs {
		if fs[i].name != "" {
			fs[i].id = fieldID(fs[i].name)
		}
	}
	slices.SortFunc(fs, func(a, b tfield) int { return int(int64(a.id) - int64(b.id)) })
	c.u(uint64(len(fs)))
	for _, f := range fs {
		c.u(uint64(f.id)).s(f.typ)
	}
	return c
}

// legacyBlockRangeCustom encodes one mint block as a conforming encoder
// might: its own type-table order, an Int arm typed nat, a Nat64 amount, an
// extra field in the map-entry record, optionally an extra top-level field
// and an overlong LEB128.
func legacyBlockRangeCustom(t *testing.T, extraField bool, overlong bool) []byte {
	t.Helper()
	var c candidBuf
	c.raw('D', 'I', 'D', 'L')
	// Table, deliberately not in agent-go's order:
	// 0: record { blocks: 1; extra?: text }   1: vec 2   2: Value variant
	// 3: vec 2 (Array)  4: vec 5 (Map)  5: record {0: text; 1: 2; 7: nat}  6: vec nat8
	c.u(7)
	c.s(opRecord)
	if extraField {
		c.fields(tfield{name: "blocks", typ: 1}, tfield{name: "zzz", typ: opText})
	} else {
		c.fields(tfield{name: "blocks", typ: 1})
	}
	c.s(opVec).s(2)
	c.s(opVariant).fields(tfield{name: "Blob", typ: 6}, tfield{name: "Text", typ: opText}, tfield{name: "Nat", typ: opNat},
		tfield{name: "Int", typ: opNat}, tfield{name: "Array", typ: 3}, tfield{name: "Map", typ: 4}, tfield{name: "Nat64", typ: opNat64})
	c.s(opVec).s(2)
	c.s(opVec).s(5)
	c.s(opRecord).fields(tfield{id: 0, typ: opText}, tfield{id: 1, typ: 2}, tfield{id: 7, typ: opNat})
	c.s(opVec).s(opNat8)
	c.u(1).s(0)
	// Value: one block Map { "ts": Nat 1 (overlong if asked), "tx": Map { "op": Text "mint", "amt": Int(nat) 5, "to": Array[Blob 01] } }
	tag := func(name string) uint64 {
		ids := []uint32{fieldID("Blob"), fieldID("Text"), fieldID("Nat"), fieldID("Int"), fieldID("Array"), fieldID("Map"), fieldID("Nat64")}
		slices.Sort(ids)
		return uint64(slices.Index(ids, fieldID(name)))
	}
	if extraField { // "zzz" sorts before "blocks" by field id
		c.str("ignored")
	}
	c.u(1) // one block
	c.u(tag("Map")).u(2)
	c.str("ts").u(tag("Nat"))
	if overlong {
		c.raw(0x81, 0x80, 0x00)
	} else {
		c.u(1)
	}
	c.u(99) // field 7 of the entry record: skipped
	c.str("tx").u(tag("Map")).u(3)
	c.str("op").u(tag("Text")).str("mint").u(0)
	c.str("amt").u(tag("Nat64")).raw(5, 0, 0, 0, 0, 0, 0, 0).u(0)
	c.str("to").u(tag("Array")).u(1).u(tag("Blob")).u(1).raw(1).u(0)
	c.u(0)
	return c.b
}

func TestDecodeAcceptsOtherValidEncodings(t *testing.T) {
	want := MapValue(F("ts", Uint(1)), F("tx", MapValue(F("op", Text("mint")), F("amt", Uint(5)), F("to", ArrayValue(Blob([]byte{1}))))))
	for _, tc := range []struct{ extra, overlong bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		blocks, err := DecodeLegacyBlockRange(legacyBlockRangeCustom(t, tc.extra, tc.overlong), 7)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if len(blocks) != 1 || !blocks[0].tree().Equal(want) || blocks[0].Hash != want.Hash() || blocks[0].Index != 7 || blocks[0].Kind != BlockMint {
			t.Fatalf("%+v: got %+v", tc, blocks)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	good := legacyBlockRangeCustom(t, true, false)
	if _, err := DecodeLegacyBlockRange(good, 0); err != nil {
		t.Fatal(err)
	}
	// Every truncation of a valid reply must fail cleanly.
	for i := range len(good) {
		if _, err := DecodeLegacyBlockRange(good[:i], 0); err == nil {
			t.Fatalf("truncated at %d: no error", i)
		}
	}
	// Trailing garbage.
	if _, err := DecodeLegacyBlockRange(append(slices.Clone(good), 0), 0); err == nil {
		t.Fatal("trailing byte accepted")
	}

	deep := func(n int) []byte {
		var c candidBuf
		c.raw('D', 'I', 'D', 'L').u(3)
		c.s(opRecord).fields(tfield{name: "blocks", typ: 1})
		c.s(opVec).s(2)
		c.s(opVariant).fields(tfield{name: "Array", typ: 1})
		c.u(1).s(0).u(1)
		for range n {
			c.u(0).u(1)
		}
		c.u(0).u(0)
		return c.b
	}
	if _, _, err := decodeValues(deep(MaxValueDepth - 2)); err != nil {
		t.Fatalf("depth %d: %v", MaxValueDepth-2, err)
	}
	if _, _, err := decodeValues(deep(MaxValueDepth + 1)); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Fatalf("too deep: %v", err)
	}

	cases := map[string]func(c *candidBuf){
		"unknown Value tag": func(c *candidBuf) {
			c.u(3).s(opRecord).fields(tfield{name: "blocks", typ: 1}).s(opVec).s(2).
				s(opVariant).fields(tfield{name: "Bool", typ: opBool}).u(1).s(0).u(0)
		},
		"Nat arm with int": func(c *candidBuf) {
			c.u(3).s(opRecord).fields(tfield{name: "blocks", typ: 1}).s(opVec).s(2).
				s(opVariant).fields(tfield{name: "Nat", typ: opInt}).u(1).s(0).u(0)
		},
		"huge vec length": func(c *candidBuf) {
			c.u(3).s(opRecord).fields(tfield{name: "blocks", typ: 1}).s(opVec).s(2).
				s(opVariant).fields(tfield{name: "Nat", typ: opNat}).u(1).s(0).u(1 << 60)
		},
		"bad type ref": func(c *candidBuf) {
			c.u(1).s(opRecord).fields(tfield{name: "blocks", typ: 9}).u(1).s(0).u(0)
		},
		"fields out of order": func(c *candidBuf) {
			c.u(1).s(opRecord).u(2).u(5).s(opNat).u(3).s(opNat).u(1).s(0).u(0).u(0)
		},
		"missing blocks": func(c *candidBuf) {
			c.u(1).s(opRecord).fields(tfield{name: "other", typ: opNat}).u(1).s(0).u(0)
		},
		"two values": func(c *candidBuf) {
			c.u(0).u(2).s(opNat).s(opNat).u(0).u(0)
		},
		"variant index out of range": func(c *candidBuf) {
			c.u(3).s(opRecord).fields(tfield{name: "blocks", typ: 1}).s(opVec).s(2).
				s(opVariant).fields(tfield{name: "Nat", typ: opNat}).u(1).s(0).u(1).u(1).u(0)
		},
		"invalid utf8 text": func(c *candidBuf) {
			c.u(3).s(opRecord).fields(tfield{name: "blocks", typ: 1}).s(opVec).s(2).
				s(opVariant).fields(tfield{name: "Text", typ: opText}).u(1).s(0).u(1).u(0).u(1).raw(0xff)
		},
		"zero-width vec bomb": func(c *candidBuf) {
			// record { blocks: vec Value; junk: vec vec null } with 40*40 nulls per byte.
			c.u(5).s(opRecord).fields(tfield{name: "blocks", typ: 1}, tfield{name: "junk", typ: 3}).s(opVec).s(2).
				s(opVariant).fields(tfield{name: "Nat", typ: opNat}).s(opVec).s(4).s(opVec).s(opNull).u(1).s(0)
			if fieldID("junk") < fieldID("blocks") {
				c.u(1 << 10)
				for range 1 << 10 {
					c.u(1 << 10)
				}
				c.u(0)
			} else {
				c.u(0).u(1 << 10)
				for range 1 << 10 {
					c.u(1 << 10)
				}
			}
		},
	}
	for name, build := range cases {
		c := &candidBuf{}
		c.raw('D', 'I', 'D', 'L')
		build(c)
		if _, err := DecodeLegacyBlockRange(c.b, 0); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestDecodeRejectsMalformedBlock(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	vs := randChain(r, 10, 3)
	vs[1] = MapValue(F("ts", Text("soon")), F("tx", MapValue(F("op", Text("mint")), F("amt", Uint(1)), F("to", randAccount(r)))))
	_, err := DecodeGetBlocksResult(encodeGetBlocks(t, page{values: vs, ids: []uint64{10, 11, 12}}))
	var be *BlockError
	if !errors.As(err, &be) || be.Index != 11 || be.Field != "ts" {
		t.Fatalf("err = %v", err)
	}
}

// legacyWithCertificate hand-encodes an empty legacy get_blocks reply whose
// certificate field has the given wire type (0 = absent) and value bytes.
func legacyWithCertificate(certType []byte, certValue []byte) []byte {
	var c candidBuf
	c.raw('D', 'I', 'D', 'L')
	fs := []tfield{{name: "first_index", typ: opNat}, {name: "chain_length", typ: opNat64}, {name: "blocks", typ: 1}, {name: "archived_blocks", typ: 3}}
	ntypes := uint64(6)
	if certType != nil {
		fs = append(fs, tfield{name: "certificate", typ: 6})
		ntypes++
	}
	c.u(ntypes).s(opRecord).fields(fs...)
	c.s(opVec).s(2)
	c.s(opVariant).fields(tfield{name: "Nat", typ: opNat})
	c.s(opVec).s(4)
	c.s(opRecord).fields(tfield{name: "start", typ: opNat}, tfield{name: "length", typ: opNat}, tfield{name: "callback", typ: 5})
	c.s(opFunc).u(0).u(0).u(1).raw(1)
	if certType != nil {
		c.raw(certType...)
	}
	c.u(1).s(0)
	// Values in field-id order: certificate, first_index, blocks, chain_length, archived_blocks.
	if certType != nil {
		c.raw(certValue...)
	}
	c.u(5).u(0).raw(9, 0, 0, 0, 0, 0, 0, 0).u(0)
	return c.b
}

func TestDecodeLegacyCertificateOptRules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		typ, val  []byte
		want      []byte
		wantError bool
	}{
		{"absent", nil, nil, nil, false},
		{"opt null", []byte{0x6e, 0x7f}, []byte{0}, nil, false},
		{"bare blob", []byte{0x6d, 0x7b}, []byte{2, 0xaa, 0xbb}, []byte{0xaa, 0xbb}, false}, // vec nat8 read as opt
		{"opt text", []byte{0x6e, 0x71}, []byte{1, 1, 'x'}, nil, false},                     // not a blob: reads as null
		{"bad opt flag", []byte{0x6e, 0x71}, []byte{2}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := DecodeLegacyGetBlocks(legacyWithCertificate(tc.typ, tc.val))
			if tc.wantError {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.Certificate, tc.want) || (res.Certificate == nil) != (tc.want == nil) {
				t.Fatalf("certificate %x, want %x", res.Certificate, tc.want)
			}
			if res.FirstIndex != 5 || res.ChainLength != 9 || len(res.Blocks) != 0 {
				t.Fatalf("header %+v", res)
			}
		})
	}
}
