package icrc3

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"
)

// This file holds the reference side of the differential tests: replies are
// encoded with agent-go's Candid encoder (explicit idl types, since a func
// reference cannot be reflected) and decoded back with agent-go's generic
// decoder, whose output is mapped onto our types here.

// agValue is the ICRC-3 Value as agent-go reflects it (a recursive variant).
type agValue struct {
	Blob  *[]byte       `ic:"Blob,variant"`
	Text  *string       `ic:"Text,variant"`
	Nat   *idl.Nat      `ic:"Nat,variant"`
	Int   *idl.Int      `ic:"Int,variant"`
	Array *[]agValue    `ic:"Array,variant"`
	Map   *[]agMapEntry `ic:"Map,variant"`
}

type agMapEntry struct {
	Key   string  `ic:"0,tuple"`
	Value agValue `ic:"1,tuple"`
}

// agLegacyValue adds the legacy Nat64 arm.
type agLegacyValue struct {
	Blob  *[]byte             `ic:"Blob,variant"`
	Text  *string             `ic:"Text,variant"`
	Nat   *idl.Nat            `ic:"Nat,variant"`
	Nat64 *uint64             `ic:"Nat64,variant"`
	Int   *idl.Int            `ic:"Int,variant"`
	Array *[]agLegacyValue    `ic:"Array,variant"`
	Map   *[]agLegacyMapEntry `ic:"Map,variant"`
}

type agLegacyMapEntry struct {
	Key   string        `ic:"0,tuple"`
	Value agLegacyValue `ic:"1,tuple"`
}

func toAg(v Value) agValue {
	var a agValue
	switch v.Kind {
	case KindBlob:
		b := append([]byte{}, v.Bytes...)
		a.Blob = &b
	case KindText:
		s := string(v.Bytes)
		a.Text = &s
	case KindNat:
		n := idl.NewBigNat(v.Nat.Big())
		a.Nat = &n
	case KindInt:
		i := idl.NewBigInt(v.Int)
		a.Int = &i
	case KindArray:
		xs := make([]agValue, len(v.Array))
		for i := range v.Array {
			xs[i] = toAg(v.Array[i])
		}
		a.Array = &xs
	case KindMap:
		xs := make([]agMapEntry, len(v.Map))
		for i := range v.Map {
			xs[i] = agMapEntry{Key: v.Map[i].Key, Value: toAg(v.Map[i].Value)}
		}
		a.Map = &xs
	}
	return a
}

// toAgLegacy writes Nats that fit in 64 bits as Nat64 when nat64 is set, as
// the DFINITY ledger's legacy endpoint does.
func toAgLegacy(v Value, nat64 bool) agLegacyValue {
	var a agLegacyValue
	switch v.Kind {
	case KindBlob:
		b := append([]byte{}, v.Bytes...)
		a.Blob = &b
	case KindText:
		s := string(v.Bytes)
		a.Text = &s
	case KindNat:
		if u, ok := v.Nat.Uint64(); ok && nat64 {
			a.Nat64 = &u
		} else {
			n := idl.NewBigNat(v.Nat.Big())
			a.Nat = &n
		}
	case KindInt:
		i := idl.NewBigInt(v.Int)
		a.Int = &i
	case KindArray:
		xs := make([]agLegacyValue, len(v.Array))
		for i := range v.Array {
			xs[i] = toAgLegacy(v.Array[i], nat64)
		}
		a.Array = &xs
	case KindMap:
		xs := make([]agLegacyMapEntry, len(v.Map))
		for i := range v.Map {
			xs[i] = agLegacyMapEntry{Key: v.Map[i].Key, Value: toAgLegacy(v.Map[i].Value, nat64)}
		}
		a.Map = &xs
	}
	return a
}

func mustType(t testing.TB, v any) idl.Type {
	t.Helper()
	typ, err := idl.TypeOf(v)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

func rangeArgType() idl.Type {
	return idl.NewRecordType(map[string]idl.Type{"start": new(idl.NatType), "length": new(idl.NatType)})
}

// callbackType is the archive callback with its result simplified to
// `reserved`: the decoders never look at a func's signature.
func callbackType(arg idl.Type) idl.Type {
	return idl.NewFunctionType(
		[]idl.FunctionParameter{{Type: arg}},
		[]idl.FunctionParameter{{Type: new(idl.ReservedType)}},
		[]string{"query"},
	)
}

func getBlocksResultType(t testing.TB) idl.Type {
	return idl.NewRecordType(map[string]idl.Type{
		"log_length": new(idl.NatType),
		"blocks": idl.NewVectorType(idl.NewRecordType(map[string]idl.Type{
			"id":    new(idl.NatType),
			"block": mustType(t, agValue{}),
		})),
		"archived_blocks": idl.NewVectorType(idl.NewRecordType(map[string]idl.Type{
			"args":     idl.NewVectorType(rangeArgType()),
			"callback": callbackType(idl.NewVectorType(rangeArgType())),
		})),
	})
}

func legacyGetBlocksType(t testing.TB) idl.Type {
	return idl.NewRecordType(map[string]idl.Type{
		"first_index":  new(idl.NatType),
		"chain_length": idl.Nat64Type(),
		"certificate":  idl.NewOptionalType(idl.NewVectorType(idl.Nat8Type())),
		"blocks":       idl.NewVectorType(mustType(t, agLegacyValue{})),
		"archived_blocks": idl.NewVectorType(idl.NewRecordType(map[string]idl.Type{
			"start":    new(idl.NatType),
			"length":   new(idl.NatType),
			"callback": callbackType(rangeArgType()),
		})),
	})
}

func blockRangeType(t testing.TB) idl.Type {
	return idl.NewRecordType(map[string]idl.Type{"blocks": idl.NewVectorType(mustType(t, agLegacyValue{}))})
}

// page is the content of a reply, independent of its encoding.
type page struct {
	logLength Nat
	first     uint64 // legacy
	chainLen  uint64 // legacy
	cert      []byte // legacy; nil = null
	ids       []uint64
	values    []Value
	archived  []ArchivedBlocks
}

func encodeGetBlocks(t testing.TB, p page) []byte {
	t.Helper()
	blocks := make([]any, len(p.values))
	for i := range p.values {
		blocks[i] = map[string]any{"id": idl.NewNat(p.ids[i]), "block": toAg(p.values[i])}
	}
	arch := make([]any, len(p.archived))
	for i, a := range p.archived {
		args := make([]any, len(a.Args))
		for j, r := range a.Args {
			args[j] = map[string]any{"start": idl.NewNat(r.Start), "length": idl.NewNat(r.Length)}
		}
		arch[i] = map[string]any{
			"args":     args,
			"callback": &idl.PrincipalMethod{Principal: a.Callback.Canister, Method: a.Callback.Method},
		}
	}
	b, err := candid.Encode([]idl.Type{getBlocksResultType(t)}, []any{map[string]any{
		"log_length":      idl.NewBigNat(p.logLength.Big()),
		"blocks":          blocks,
		"archived_blocks": arch,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encodeLegacy(t testing.TB, p page, nat64 bool) []byte {
	t.Helper()
	blocks := make([]any, len(p.values))
	for i := range p.values {
		blocks[i] = toAgLegacy(p.values[i], nat64)
	}
	arch := make([]any, len(p.archived))
	for i, a := range p.archived {
		var r BlockRange
		if len(a.Args) > 0 {
			r = a.Args[0]
		}
		arch[i] = map[string]any{
			"start": idl.NewNat(r.Start), "length": idl.NewNat(r.Length),
			"callback": &idl.PrincipalMethod{Principal: a.Callback.Canister, Method: a.Callback.Method},
		}
	}
	var cert any
	if p.cert != nil {
		cert = p.cert
	}
	b, err := candid.Encode([]idl.Type{legacyGetBlocksType(t)}, []any{map[string]any{
		"first_index":     idl.NewNat(p.first),
		"chain_length":    p.chainLen,
		"certificate":     cert,
		"blocks":          blocks,
		"archived_blocks": arch,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encodeBlockRange(t testing.TB, vs []Value) []byte {
	t.Helper()
	blocks := make([]any, len(vs))
	for i := range vs {
		blocks[i] = toAgLegacy(vs[i], false)
	}
	b, err := candid.Encode([]idl.Type{blockRangeType(t)}, []any{map[string]any{"blocks": blocks}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// roundTripCandid encodes v with agent-go and reads it back with our Value
// decoder, returning the value and the hash computed while decoding.
func roundTripCandid(t testing.TB, v Value) (Value, Hash) {
	t.Helper()
	vals, hashes, err := decodeValues(encodeBlockRange(t, []Value{v}))
	if err != nil || len(vals) != 1 {
		t.Fatalf("decode: %v (%d values)", err, len(vals))
	}
	return vals[0], hashes[0]
}

// decodeValues reads a record { blocks : vec Value } without parsing blocks.
func decodeValues(b []byte) ([]Value, []Hash, error) {
	d := newDecoder(b)
	ref, err := d.readHeader()
	if err != nil {
		return nil, nil, err
	}
	rec, err := d.record(ref, "BlockRange")
	if err != nil {
		return nil, nil, err
	}
	if len(rec.fields) != 1 || rec.fields[0].id != idBlocks {
		return nil, nil, fmt.Errorf("unexpected record")
	}
	inner, err := d.vecOf(rec.fields[0].typ, "blocks")
	if err != nil {
		return nil, nil, err
	}
	if err := d.checkValue(inner); err != nil {
		return nil, nil, err
	}
	blocks, err := d.blockVec(inner)
	if err != nil {
		return nil, nil, err
	}
	if err := d.finish(); err != nil {
		return nil, nil, err
	}
	vals := make([]Value, len(blocks))
	hashes := make([]Hash, len(blocks))
	for i := range blocks {
		vals[i], hashes[i] = blocks[i].tree(), blocks[i].Hash
	}
	return vals, hashes, nil
}

// ---- agent-go generic decoding mapped onto our types ----

func idName(name string) string { return strconv.FormatUint(uint64(fieldID(name)), 10) }

func agField(rec any, name string) (any, bool) {
	m, ok := rec.(map[string]any)
	if !ok {
		return nil, false
	}
	v, ok := m[idName(name)]
	return v, ok
}

func agNat(x any) (Nat, error) {
	n, ok := x.(idl.Nat)
	if !ok {
		return Nat{}, fmt.Errorf("not a nat: %T", x)
	}
	return NatFromBig(n.BigInt())
}

func agNatU64(x any) (uint64, error) {
	n, err := agNat(x)
	if err != nil {
		return 0, err
	}
	u, ok := n.Uint64()
	if !ok {
		return 0, fmt.Errorf("nat exceeds 64 bits")
	}
	return u, nil
}

func agBytes(x any) ([]byte, error) {
	xs, ok := x.([]any)
	if !ok {
		return nil, fmt.Errorf("not a vec: %T", x)
	}
	b := make([]byte, len(xs))
	for i, e := range xs {
		c, ok := e.(byte)
		if !ok {
			return nil, fmt.Errorf("not a nat8: %T", e)
		}
		b[i] = c
	}
	return b, nil
}

func agToValue(x any, depth int) (Value, error) {
	if depth >= MaxValueDepth {
		return Value{}, fmt.Errorf("too deep")
	}
	v, ok := x.(*idl.Variant)
	if !ok {
		return Value{}, fmt.Errorf("not a variant: %T", x)
	}
	id, err := strconv.ParseUint(v.Name, 10, 32)
	if err != nil {
		return Value{}, err
	}
	switch uint32(id) {
	case idBlob:
		b, err := agBytes(v.Value)
		return Blob(b), err
	case idText:
		s, ok := v.Value.(string)
		if !ok {
			return Value{}, fmt.Errorf("Text: %T", v.Value)
		}
		return Text(s), nil
	case idNat:
		n, err := agNat(v.Value)
		return NatValue(n), err
	case idNat64:
		u, ok := v.Value.(uint64)
		if !ok {
			return Value{}, fmt.Errorf("Nat64: %T", v.Value)
		}
		return Uint(u), nil
	case idInt:
		switch i := v.Value.(type) {
		case idl.Int:
			return IntValue(i.BigInt()), nil
		case idl.Nat:
			return IntValue(i.BigInt()), nil
		}
		return Value{}, fmt.Errorf("Int: %T", v.Value)
	case idArray:
		xs, ok := v.Value.([]any)
		if !ok {
			return Value{}, fmt.Errorf("Array: %T", v.Value)
		}
		out := make([]Value, len(xs))
		for i := range xs {
			if out[i], err = agToValue(xs[i], depth+1); err != nil {
				return Value{}, err
			}
		}
		return ArrayValue(out...), nil
	case idMap:
		xs, ok := v.Value.([]any)
		if !ok {
			return Value{}, fmt.Errorf("Map: %T", v.Value)
		}
		out := make([]Field, len(xs))
		for i := range xs {
			m, ok := xs[i].(map[string]any)
			if !ok {
				return Value{}, fmt.Errorf("Map entry: %T", xs[i])
			}
			k, ok := m["0"].(string)
			if !ok {
				return Value{}, fmt.Errorf("Map key: %T", m["0"])
			}
			val, err := agToValue(m["1"], depth+1)
			if err != nil {
				return Value{}, err
			}
			out[i] = F(k, val)
		}
		return MapValue(out...), nil
	}
	return Value{}, fmt.Errorf("unknown variant %s", v.Name)
}

func agCallback(x any) (Callback, error) {
	pm, ok := x.(*idl.PrincipalMethod)
	if !ok {
		return Callback{}, fmt.Errorf("callback: %T", x)
	}
	return Callback{Canister: principal.Principal{Raw: pm.Principal.Raw}, Method: pm.Method}, nil
}

func agRange(x any) (BlockRange, error) {
	s, ok1 := agField(x, "start")
	l, ok2 := agField(x, "length")
	if !ok1 || !ok2 {
		return BlockRange{}, fmt.Errorf("range fields missing")
	}
	start, err := agNatU64(s)
	if err != nil {
		return BlockRange{}, err
	}
	length, err := agNatU64(l)
	return BlockRange{Start: start, Length: length}, err
}

// agDecodeGetBlocks decodes with agent-go and maps the result onto the
// expected type; blocks are returned as Values (not parsed).
func agDecodeGetBlocks(b []byte) (logLength Nat, ids []uint64, vals []Value, arch []ArchivedBlocks, err error) {
	_, xs, err := candid.Decode(b)
	if err != nil {
		return
	}
	if len(xs) != 1 {
		err = fmt.Errorf("%d values", len(xs))
		return
	}
	r := xs[0]
	ll, ok := agField(r, "log_length")
	if !ok {
		err = fmt.Errorf("log_length missing")
		return
	}
	if logLength, err = agNat(ll); err != nil {
		return
	}
	bl, _ := agField(r, "blocks")
	blocks, ok := bl.([]any)
	if !ok {
		err = fmt.Errorf("blocks: %T", bl)
		return
	}
	for _, e := range blocks {
		idv, ok1 := agField(e, "id")
		bv, ok2 := agField(e, "block")
		if !ok1 || !ok2 {
			err = fmt.Errorf("block entry fields missing")
			return
		}
		var id uint64
		if id, err = agNatU64(idv); err != nil {
			return
		}
		var v Value
		if v, err = agToValue(bv, 0); err != nil {
			return
		}
		ids = append(ids, id)
		vals = append(vals, v)
	}
	ab, _ := agField(r, "archived_blocks")
	archived, ok := ab.([]any)
	if !ok {
		err = fmt.Errorf("archived_blocks: %T", ab)
		return
	}
	for _, e := range archived {
		var a ArchivedBlocks
		cb, _ := agField(e, "callback")
		if a.Callback, err = agCallback(cb); err != nil {
			return
		}
		av, _ := agField(e, "args")
		args, ok := av.([]any)
		if !ok {
			err = fmt.Errorf("args: %T", av)
			return
		}
		a.Args = []BlockRange{}
		for _, x := range args {
			var br BlockRange
			if br, err = agRange(x); err != nil {
				return
			}
			a.Args = append(a.Args, br)
		}
		arch = append(arch, a)
	}
	return
}

type agLegacy struct {
	first, chainLen uint64
	cert            []byte
	vals            []Value
	arch            []LegacyArchivedRange
}

func agDecodeLegacy(b []byte) (*agLegacy, error) {
	_, xs, err := candid.Decode(b)
	if err != nil {
		return nil, err
	}
	if len(xs) != 1 {
		return nil, fmt.Errorf("%d values", len(xs))
	}
	r := xs[0]
	var out agLegacy
	fi, _ := agField(r, "first_index")
	if out.first, err = agNatU64(fi); err != nil {
		return nil, err
	}
	cl, _ := agField(r, "chain_length")
	u, ok := cl.(uint64)
	if !ok {
		return nil, fmt.Errorf("chain_length: %T", cl)
	}
	out.chainLen = u
	if c, ok := agField(r, "certificate"); ok && c != nil {
		// Candid's opt rule: a value of another type reads as null.
		if b, err := agBytes(c); err == nil {
			out.cert = b
		}
	}
	bl, _ := agField(r, "blocks")
	blocks, ok := bl.([]any)
	if !ok {
		return nil, fmt.Errorf("blocks: %T", bl)
	}
	for _, e := range blocks {
		v, err := agToValue(e, 0)
		if err != nil {
			return nil, err
		}
		out.vals = append(out.vals, v)
	}
	ab, _ := agField(r, "archived_blocks")
	archived, ok := ab.([]any)
	if !ok {
		return nil, fmt.Errorf("archived_blocks: %T", ab)
	}
	for _, e := range archived {
		br, err := agRange(e)
		if err != nil {
			return nil, err
		}
		cb, _ := agField(e, "callback")
		c, err := agCallback(cb)
		if err != nil {
			return nil, err
		}
		out.arch = append(out.arch, LegacyArchivedRange{Start: br.Start, Length: br.Length, Callback: c})
	}
	return &out, nil
}
