package ledgertest

import (
	"bytes"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// agent-go's generic decoder keys records and variant arms by the Candid
// hash of the name, so looking fields up by name hash checks the names too.
func field(t *testing.T, m any, name string) any {
	t.Helper()
	rec, ok := m.(map[string]any)
	if !ok {
		t.Fatalf("not a record: %T", m)
	}
	v, ok := rec[strconv.FormatUint(uint64(idlHash(name)), 10)]
	if !ok {
		t.Fatalf("record has no field %q: %v", name, rec)
	}
	return v
}

func bytesOf(t *testing.T, x any) []byte {
	t.Helper()
	vs, ok := x.([]any)
	if !ok {
		t.Fatalf("blob decoded as %T", x)
	}
	out := make([]byte, len(vs))
	for i, b := range vs {
		out[i] = b.(uint8)
	}
	return out
}

// valueFromIDL converts agent-go's generic decoding of a Value back to icrc3.Value.
func valueFromIDL(t *testing.T, x any) icrc3.Value {
	t.Helper()
	v, ok := x.(*idl.Variant)
	if !ok {
		t.Fatalf("value decoded as %T", x)
	}
	arm := func(n string) string { return strconv.FormatUint(uint64(idlHash(n)), 10) }
	switch v.Name {
	case arm("Blob"):
		return icrc3.Blob(bytesOf(t, v.Value))
	case arm("Text"):
		return icrc3.Text(v.Value.(string))
	case arm("Nat"):
		n, err := icrc3.NatFromBig(v.Value.(idl.Nat).BigInt())
		if err != nil {
			t.Fatal(err)
		}
		return icrc3.NatValue(n)
	case arm("Nat64"):
		return icrc3.Uint(v.Value.(uint64))
	case arm("Int"):
		return icrc3.IntValue(v.Value.(idl.Int).BigInt())
	case arm("Array"):
		var out []icrc3.Value
		for _, e := range v.Value.([]any) {
			out = append(out, valueFromIDL(t, e))
		}
		return icrc3.ArrayValue(out...)
	case arm("Map"):
		var fs []icrc3.Field
		for _, e := range v.Value.([]any) {
			rec := e.(map[string]any)
			fs = append(fs, icrc3.F(rec["0"].(string), valueFromIDL(t, rec["1"])))
		}
		return icrc3.MapValue(fs...)
	}
	t.Fatalf("unknown Value arm %s", v.Name)
	return icrc3.Value{}
}

func randValue(rng *rand.Rand, depth int) icrc3.Value {
	k := rng.IntN(6)
	if depth > 3 {
		k = rng.IntN(4)
	}
	switch k {
	case 0:
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return icrc3.Blob(b)
	case 1:
		return icrc3.Text(fmt.Sprintf("t%dé", rng.IntN(1000))[:rng.IntN(3)])
	case 2:
		switch rng.IntN(3) {
		case 0:
			return icrc3.Uint(rng.Uint64())
		case 1:
			return icrc3.Uint(uint64(rng.IntN(200)))
		}
		b := new(big.Int).Lsh(big.NewInt(rng.Int64()), uint(64+rng.IntN(100)))
		n, _ := icrc3.NatFromBig(b.Abs(b))
		return icrc3.NatValue(n)
	case 3:
		b := new(big.Int).Lsh(big.NewInt(rng.Int64()-rng.Int64()), uint(rng.IntN(100)))
		return icrc3.IntValue(b)
	case 4:
		var vs []icrc3.Value
		for range rng.IntN(4) {
			vs = append(vs, randValue(rng, depth+1))
		}
		return icrc3.ArrayValue(vs...)
	}
	var fs []icrc3.Field
	for range rng.IntN(4) {
		fs = append(fs, icrc3.F(fmt.Sprintf("k%d", rng.IntN(3)), randValue(rng, depth+1)))
	}
	return icrc3.MapValue(fs...)
}

func TestCandidEncoderRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	arch := principal.Principal{Raw: []byte{0, 0, 0, 0, 0, 0, 0, 7, 1, 1}}
	for iter := 0; iter < 200; iter++ {
		var blocks []indexedBlock
		var vals []icrc3.Value
		var legacy []indexedBlock
		for i := range rng.IntN(6) {
			v := randValue(rng, 0)
			blocks = append(blocks, indexedBlock{id: uint64(i) * 1000, enc: encodeValue(&v, false)})
			legacy = append(legacy, indexedBlock{id: uint64(i) * 1000, enc: encodeValue(&v, true)})
			vals = append(vals, v)
		}
		groups := []archivedGroup{{archive: arch, ranges: []blockRange{{0, 5}, {1 << 40, 3}}}}
		_, out, err := candid.Decode(encodeGetBlocksResult(1<<50, blocks, groups))
		if err != nil {
			t.Fatalf("iter %d: agent-go rejects our GetBlocksResult: %v", iter, err)
		}
		res := out[0]
		if n := field(t, res, "log_length").(idl.Nat).BigInt().Uint64(); n != 1<<50 {
			t.Fatalf("log_length %d", n)
		}
		got := field(t, res, "blocks").([]any)
		if len(got) != len(blocks) {
			t.Fatalf("blocks %d, want %d", len(got), len(blocks))
		}
		for i, g := range got {
			if id := field(t, g, "id").(idl.Nat).BigInt().Uint64(); id != blocks[i].id {
				t.Fatalf("id %d", id)
			}
			if v := valueFromIDL(t, field(t, g, "block")); !v.Equal(vals[i]) || v.Hash() != vals[i].Hash() {
				t.Fatalf("iter %d block %d: decoded %+v, want %+v", iter, i, v, vals[i])
			}
		}
		ab := field(t, res, "archived_blocks").([]any)
		if len(ab) != 1 {
			t.Fatalf("archived %d", len(ab))
		}
		pm := field(t, ab[0], "callback").(*idl.PrincipalMethod)
		if !bytes.Equal(pm.Principal.Raw, arch.Raw) || pm.Method != "icrc3_get_blocks" {
			t.Fatalf("callback %v %q", pm.Principal, pm.Method)
		}
		args := field(t, ab[0], "args").([]any)
		if len(args) != 2 || field(t, args[1], "start").(idl.Nat).BigInt().Uint64() != 1<<40 || field(t, args[1], "length").(idl.Nat).BigInt().Uint64() != 3 {
			t.Fatalf("args %v", args)
		}

		// Legacy response and BlockRange: same values, Nat64 for small Nats.
		_, out, err = candid.Decode(encodeLegacyResponse(17, 1<<33, []byte{9, 8}, legacy, []legacyArchived{{arch, blockRange{3, 4}}}))
		if err != nil {
			t.Fatalf("iter %d: agent-go rejects our GetBlocksResponse: %v", iter, err)
		}
		res = out[0]
		if field(t, res, "chain_length").(uint64) != 1<<33 || field(t, res, "first_index").(idl.Nat).BigInt().Uint64() != 17 {
			t.Fatal("legacy header fields")
		}
		cert := field(t, res, "certificate")
		if cert == nil || !bytes.Equal(bytesOf(t, cert), []byte{9, 8}) {
			t.Fatalf("certificate %v", cert)
		}
		lb := field(t, res, "blocks").([]any)
		for i := range lb {
			if v := valueFromIDL(t, lb[i]); !v.Equal(vals[i]) {
				t.Fatalf("legacy block %d: %+v vs %+v", i, v, vals[i])
			}
		}
		la := field(t, res, "archived_blocks").([]any)
		pm = field(t, la[0], "callback").(*idl.PrincipalMethod)
		if pm.Method != "get_blocks" || field(t, la[0], "start").(idl.Nat).BigInt().Uint64() != 3 {
			t.Fatalf("legacy archived %v", la)
		}
		_, out, err = candid.Decode(encodeBlockRange(legacy))
		if err != nil {
			t.Fatalf("BlockRange: %v", err)
		}
		br := field(t, out[0], "blocks").([]any)
		if len(br) != len(vals) {
			t.Fatal("BlockRange length")
		}
		for i := range br {
			if v := valueFromIDL(t, br[i]); !v.Equal(vals[i]) {
				t.Fatalf("BlockRange block %d differs", i)
			}
		}
	}
	// An absent certificate is opt null.
	_, out, err := candid.Decode(encodeLegacyResponse(0, 0, nil, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if c := field(t, out[0], "certificate"); c != nil {
		t.Fatal("nil certificate must decode as null")
	}
}

// A typed client (agent-go reflection, as the daemon's fallback decoder
// would use) decodes a real ledger page into the same blocks.
type tValue struct {
	Blob  *[]byte   `ic:"Blob,variant"`
	Text  *string   `ic:"Text,variant"`
	Nat   *idl.Nat  `ic:"Nat,variant"`
	Int   *idl.Int  `ic:"Int,variant"`
	Array *[]tValue `ic:"Array,variant"`
	Map   *[]tField `ic:"Map,variant"`
}

type tField struct {
	Key   string `ic:"0,tuple"`
	Value tValue `ic:"1,tuple"`
}

type tBlock struct {
	ID    idl.Nat `ic:"id"`
	Block tValue  `ic:"block"`
}

type tArchived struct {
	Args     []getBlocksArg `ic:"args"`
	Callback idl.Function   `ic:"callback"`
}

type tResult struct {
	LogLength idl.Nat     `ic:"log_length"`
	Blocks    []tBlock    `ic:"blocks"`
	Archived  []tArchived `ic:"archived_blocks"`
}

func (v tValue) toValue() icrc3.Value {
	switch {
	case v.Blob != nil:
		return icrc3.Blob(*v.Blob)
	case v.Text != nil:
		return icrc3.Text(*v.Text)
	case v.Nat != nil:
		return icrc3.NatValue(icrc1.NatFromIDL(*v.Nat))
	case v.Int != nil:
		return icrc3.IntValue(v.Int.BigInt())
	case v.Array != nil:
		var vs []icrc3.Value
		for _, e := range *v.Array {
			vs = append(vs, e.toValue())
		}
		return icrc3.ArrayValue(vs...)
	case v.Map != nil:
		var fs []icrc3.Field
		for _, f := range *v.Map {
			fs = append(fs, icrc3.F(f.Key, f.Value.toValue()))
		}
		return icrc3.MapValue(fs...)
	}
	return icrc3.Value{}
}

func TestCandidTypedDecode(t *testing.T) {
	h := newFakeHost()
	l, _, _ := newTestLedger(t, h, LedgerConfig{ArchiveThreshold: 50, ArchiveBatch: 20})
	if err := l.GenerateHistory(120, 5, 0); err != nil {
		t.Fatal(err)
	}
	out, rej := l.Query(h.queryCtx(), "icrc3_get_blocks", mustEncode(t, []getBlocksArg{{nat(0), nat(l.Len())}}))
	if rej != nil {
		t.Fatal(rej)
	}
	var res tResult
	decodeOne(t, out, &res)
	if len(res.Blocks) == 0 || len(res.Archived) == 0 {
		t.Fatalf("want local and archived blocks: %d %d", len(res.Blocks), len(res.Archived))
	}
	for _, b := range res.Blocks {
		want, _ := l.Block(b.ID.BigInt().Uint64())
		if got := b.Block.toValue(); got.Hash() != want.Hash() {
			t.Fatalf("block %s decodes differently", b.ID)
		}
	}
	if res.Archived[0].Callback.Method.Method != "icrc3_get_blocks" {
		t.Fatalf("callback %+v", res.Archived[0].Callback.Method)
	}
}

type tLegacyValue struct {
	Blob  *[]byte         `ic:"Blob,variant"`
	Text  *string         `ic:"Text,variant"`
	Nat   *idl.Nat        `ic:"Nat,variant"`
	Nat64 *uint64         `ic:"Nat64,variant"`
	Int   *idl.Int        `ic:"Int,variant"`
	Array *[]tLegacyValue `ic:"Array,variant"`
	Map   *[]tLegacyField `ic:"Map,variant"`
}

type tLegacyField struct {
	Key   string       `ic:"0,tuple"`
	Value tLegacyValue `ic:"1,tuple"`
}

type tLegacyArchivedRg struct {
	Start    idl.Nat      `ic:"start"`
	Length   idl.Nat      `ic:"length"`
	Callback idl.Function `ic:"callback"`
}

func (v tLegacyValue) toValue() icrc3.Value {
	switch {
	case v.Nat64 != nil:
		return icrc3.Uint(*v.Nat64)
	case v.Array != nil:
		var vs []icrc3.Value
		for _, e := range *v.Array {
			vs = append(vs, e.toValue())
		}
		return icrc3.ArrayValue(vs...)
	case v.Map != nil:
		var fs []icrc3.Field
		for _, f := range *v.Map {
			fs = append(fs, icrc3.F(f.Key, f.Value.toValue()))
		}
		return icrc3.MapValue(fs...)
	}
	return tValue{Blob: v.Blob, Text: v.Text, Nat: v.Nat, Int: v.Int}.toValue()
}

// BenchmarkLegacyGetBlocks2000 measures a full legacy page (2000 blocks,
// materialised and encoded) as the ledger serves it.
func BenchmarkLegacyGetBlocks2000(b *testing.B) {
	h := newFakeHost()
	l, err := newLedger(h, LedgerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.GenerateHistory(2000, 1, 0); err != nil {
		b.Fatal(err)
	}
	arg, err := candid.Marshal([]any{getBlocksArg{idl.NewNat(uint64(0)), idl.NewNat(uint64(2000))}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := CallContext{Time: h.Now()}
	b.ReportAllocs()
	var size int
	for b.Loop() {
		out, rej := l.Query(ctx, "get_blocks", arg)
		if rej != nil {
			b.Fatal(rej)
		}
		size = len(out)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2000, "ns/block")
	b.ReportMetric(float64(size), "reply-bytes")
}
