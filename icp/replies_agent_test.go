package icp

import (
	"fmt"
	"testing"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc3"
)

// The reference side of the reply tests: the ICP ledger's replies encoded
// with agent-go's Candid encoder (explicit idl types, since a func
// reference cannot be reflected).

func blocksArgType() idl.Type {
	return idl.NewRecordType(map[string]idl.Type{"start": idl.Nat64Type(), "length": idl.Nat64Type()})
}

// archiveCallbackType is the archive callback with its result simplified
// to `reserved`: the decoders never look at a func's signature.
func archiveCallbackType() idl.Type {
	return idl.NewFunctionType(
		[]idl.FunctionParameter{{Type: blocksArgType()}},
		[]idl.FunctionParameter{{Type: new(idl.ReservedType)}},
		[]string{"query"},
	)
}

func queryEncodedBlocksType() idl.Type {
	return idl.NewRecordType(map[string]idl.Type{
		"certificate":       idl.NewOptionalType(idl.NewVectorType(idl.Nat8Type())),
		"blocks":            idl.NewVectorType(idl.NewVectorType(idl.Nat8Type())),
		"chain_length":      idl.Nat64Type(),
		"first_block_index": idl.Nat64Type(),
		"archived_blocks": idl.NewVectorType(idl.NewRecordType(map[string]idl.Type{
			"callback": archiveCallbackType(),
			"start":    idl.Nat64Type(),
			"length":   idl.Nat64Type(),
		})),
	})
}

func getEncodedBlocksResultType() idl.Type {
	return idl.NewVariantType(map[string]idl.Type{
		"Ok": idl.NewVectorType(idl.NewVectorType(idl.Nat8Type())),
		"Err": idl.NewVariantType(map[string]idl.Type{
			"BadFirstBlockIndex": idl.NewRecordType(map[string]idl.Type{
				"requested_index": idl.Nat64Type(), "first_valid_index": idl.Nat64Type(),
			}),
			"Other": idl.NewRecordType(map[string]idl.Type{"error_code": idl.Nat64Type(), "error_message": new(idl.TextType)}),
		}),
	})
}

func blobsOf(bs [][]byte) []any {
	out := make([]any, len(bs))
	for i := range bs {
		out[i] = bs[i]
	}
	return out
}

// encodeQueryEncodedBlocks is the ledger's reply holding r.
func encodeQueryEncodedBlocks(t testing.TB, r *EncodedBlocksResult) []byte {
	t.Helper()
	arch := make([]any, len(r.Archived))
	for i, a := range r.Archived {
		arch[i] = map[string]any{
			"start": a.Start, "length": a.Length,
			"callback": &idl.PrincipalMethod{Principal: a.Callback.Canister, Method: a.Callback.Method},
		}
	}
	var cert any
	if r.Certificate != nil {
		cert = r.Certificate
	}
	b, err := candid.Encode([]idl.Type{queryEncodedBlocksType()}, []any{map[string]any{
		"certificate":       cert,
		"blocks":            blobsOf(r.Blocks),
		"chain_length":      r.ChainLength,
		"first_block_index": r.FirstIndex,
		"archived_blocks":   arch,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encodeGetEncodedBlocksOk is an archive's Ok reply holding blocks.
func encodeGetEncodedBlocksOk(t testing.TB, blocks [][]byte) []byte {
	t.Helper()
	b, err := candid.Encode([]idl.Type{getEncodedBlocksResultType()}, []any{idl.Variant{Name: "Ok", Value: blobsOf(blocks)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encodeGetEncodedBlocksErr is an archive's Err reply.
func encodeGetEncodedBlocksErr(t testing.TB) []byte {
	t.Helper()
	b, err := candid.Encode([]idl.Type{getEncodedBlocksResultType()}, []any{idl.Variant{Name: "Err",
		Value: idl.Variant{Name: "BadFirstBlockIndex", Value: map[string]any{"requested_index": uint64(7), "first_valid_index": uint64(9)}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleReplies are replies of both shapes, the seeds of the reply tests
// and of FuzzDecodeICPBlocks.
func sampleReplies(t testing.TB) [][]byte {
	t.Helper()
	archive := principal.Principal{Raw: []byte{0, 0, 0, 0, 0, 0, 0, 2, 1, 1}}
	var blocks [][]byte
	for i := range 3 {
		blocks = append(blocks, []byte{0x0a, byte(i), 0x12, 0x02, 0xff, byte(i)})
	}
	return [][]byte{
		encodeQueryEncodedBlocks(t, &EncodedBlocksResult{ChainLength: 0}),
		encodeQueryEncodedBlocks(t, &EncodedBlocksResult{Certificate: []byte{0xd9, 0xd9, 0xf7, 1, 2}, Blocks: blocks,
			ChainLength: 1003, FirstIndex: 1000}),
		encodeQueryEncodedBlocks(t, &EncodedBlocksResult{Blocks: blocks[:1], ChainLength: 2001, FirstIndex: 2000,
			Archived: []EncodedArchivedRange{
				{Callback: icrc3.Callback{Canister: archive, Method: "get_encoded_blocks"}, Start: 0, Length: 1000},
				{Callback: icrc3.Callback{Canister: archive, Method: "get_encoded_blocks"}, Start: 1000, Length: 1000},
			}}),
		encodeGetEncodedBlocksOk(t, blocks),
		encodeGetEncodedBlocksOk(t, nil),
		encodeGetEncodedBlocksErr(t),
	}
}

// agentDecoded is what agent-go's generic decoder reads from a reply
// that DecodeEncodedBlocks decoded, mapped onto the result's fields: the
// differential reference of FuzzDecodeICPBlocks. Fields agent-go names by
// their hash. hasCert is false where the decoder reads a certificate of
// another wire type than blob as absent (Candid's opt rule), which agent-go
// decodes as whatever it is.
func agentDecoded(t testing.TB, reply []byte) (res *EncodedBlocksResult, hasCert bool, err error) {
	t.Helper()
	_, vs, err := candid.Decode(reply)
	if err != nil {
		return nil, false, err
	}
	if len(vs) != 1 {
		return nil, false, fmt.Errorf("%d values", len(vs))
	}
	m, ok := vs[0].(map[string]any)
	if !ok {
		return nil, false, fmt.Errorf("reply is %T", vs[0])
	}
	field := func(name string) any { return m[fmt.Sprint(icrc3.CandidFieldID(name))] }
	res = &EncodedBlocksResult{}
	if c := field("certificate"); c != nil {
		res.Certificate, hasCert = agentBlob(c)
	} else {
		hasCert = true
	}
	if res.Blocks, err = agentBlobs(field("blocks")); err != nil {
		return nil, false, err
	}
	res.ChainLength, ok = field("chain_length").(uint64)
	if !ok {
		return nil, false, fmt.Errorf("chain_length is %T", field("chain_length"))
	}
	if res.FirstIndex, ok = field("first_block_index").(uint64); !ok {
		return nil, false, fmt.Errorf("first_block_index is %T", field("first_block_index"))
	}
	arch, ok := field("archived_blocks").([]any)
	if !ok {
		return nil, false, fmt.Errorf("archived_blocks is %T", field("archived_blocks"))
	}
	res.Archived = []EncodedArchivedRange{}
	for _, a := range arch {
		am, ok := a.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf("archived entry is %T", a)
		}
		get := func(name string) any { return am[fmt.Sprint(icrc3.CandidFieldID(name))] }
		cb, ok1 := get("callback").(*idl.PrincipalMethod)
		start, ok2 := get("start").(uint64)
		length, ok3 := get("length").(uint64)
		if !ok1 || !ok2 || !ok3 {
			return nil, false, fmt.Errorf("archived entry %#v", am)
		}
		res.Archived = append(res.Archived, EncodedArchivedRange{Start: start, Length: length,
			Callback: icrc3.Callback{Canister: principal.Principal{Raw: append([]byte{}, cb.Principal.Raw...)}, Method: cb.Method}})
	}
	return res, hasCert, nil
}

// agentBlob is a blob as agent-go decodes one (a slice of uint8); ok is
// false for a value of another type.
func agentBlob(v any) ([]byte, bool) {
	xs, ok := v.([]any)
	if !ok {
		return nil, false
	}
	b := make([]byte, 0, len(xs))
	for _, x := range xs {
		c, ok := x.(uint8)
		if !ok {
			return nil, false
		}
		b = append(b, c)
	}
	return b, true
}

func agentBlobs(v any) ([][]byte, error) {
	xs, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("blobs are %T", v)
	}
	out := make([][]byte, 0, len(xs))
	for _, x := range xs {
		b, ok := agentBlob(x)
		if !ok {
			return nil, fmt.Errorf("blob is %T", x)
		}
		out = append(out, b)
	}
	return out, nil
}
