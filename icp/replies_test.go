package icp

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc3"
)

func TestDecodeEncodedBlocks(t *testing.T) {
	archive := principal.Principal{Raw: []byte{0, 0, 0, 0, 0, 0, 0, 2, 1, 1}}
	for _, want := range []*EncodedBlocksResult{
		{Blocks: [][]byte{}, Archived: []EncodedArchivedRange{}},
		{Certificate: []byte{0xd9, 0xd9, 0xf7}, Blocks: [][]byte{{1, 2}, {}, {3}}, ChainLength: 1003, FirstIndex: 1000,
			Archived: []EncodedArchivedRange{}},
		{Blocks: [][]byte{{9}}, ChainLength: 2001, FirstIndex: 2000, Archived: []EncodedArchivedRange{
			{Callback: icrc3.Callback{Canister: archive, Method: "get_encoded_blocks"}, Start: 0, Length: 1000},
			{Callback: icrc3.Callback{Canister: archive, Method: "get_encoded_blocks"}, Start: 1000, Length: 1000},
		}},
	} {
		got, err := DecodeEncodedBlocks(encodeQueryEncodedBlocks(t, want))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded\n %+v\nwant\n %+v", got, want)
		}
	}
}

// A reply of another type than the ledger's is a wire type error, never a
// result read from the wrong fields.
func TestDecodeEncodedBlocksRefusesOtherTypes(t *testing.T) {
	natChain := idl.NewRecordType(map[string]idl.Type{
		"certificate":       idl.NewOptionalType(idl.NewVectorType(idl.Nat8Type())),
		"blocks":            idl.NewVectorType(idl.NewVectorType(idl.Nat8Type())),
		"chain_length":      new(idl.NatType),
		"first_block_index": idl.Nat64Type(),
		"archived_blocks":   idl.NewVectorType(idl.NewRecordType(map[string]idl.Type{"start": idl.Nat64Type()})),
	})
	b, err := candid.Encode([]idl.Type{natChain}, []any{map[string]any{
		"certificate": nil, "blocks": []any{}, "chain_length": idl.NewNat(uint(5)), "first_block_index": uint64(0),
		"archived_blocks": []any{},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeEncodedBlocks(b); err == nil || !strings.Contains(err.Error(), "wire type mismatch") {
		t.Fatalf("chain_length as nat: %v", err)
	}
	if _, err := DecodeEncodedBlocks(encodeGetEncodedBlocksOk(t, nil)); err == nil || !strings.Contains(err.Error(), "not a record") {
		t.Fatalf("an archive's reply read as the ledger's: %v", err)
	}
}

func TestDecodeGetEncodedBlocksResult(t *testing.T) {
	want := [][]byte{{1}, {}, {2, 3}}
	got, err := DecodeGetEncodedBlocksResult(encodeGetEncodedBlocksOk(t, want))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Ok: %v %v", got, err)
	}
	var ee *EncodedBlocksError
	if _, err := DecodeGetEncodedBlocksResult(encodeGetEncodedBlocksErr(t)); !errors.As(err, &ee) {
		t.Fatalf("Err: %v, want *EncodedBlocksError", err)
	}
	if _, err := DecodeGetEncodedBlocksResult(encodeQueryEncodedBlocks(t, &EncodedBlocksResult{})); err == nil ||
		!strings.Contains(err.Error(), "not a variant") {
		t.Fatalf("the ledger's reply read as an archive's: %v", err)
	}
}

// EncodeBlocksArgs is the GetBlocksArgs agent-go reads.
func TestEncodeBlocksArgs(t *testing.T) {
	_, vs, err := candid.Decode(EncodeBlocksArgs(7, 1<<40))
	if err != nil || len(vs) != 1 {
		t.Fatalf("decode: %v %v", vs, err)
	}
	// agent-go names decoded fields by their hash.
	m, ok := vs[0].(map[string]any)
	start, length := fmt.Sprint(icrc3.CandidFieldID("start")), fmt.Sprint(icrc3.CandidFieldID("length"))
	if !ok || len(m) != 2 || m[start] != uint64(7) || m[length] != uint64(1<<40) {
		t.Fatalf("args %#v", vs[0])
	}
}

// FuzzDecodeICPBlocks holds both reply decoders to their bounds on any
// input (no panic, no read past the reply) and to agent-go: a
// query_encoded_blocks reply the decoder reads, agent-go's generic decoder
// reads the same; and a reply either decoder reads, encoded again by
// agent-go, decodes to the same result. Its seeds (sampleReplies and
// testdata/fuzz) run in go test.
func FuzzDecodeICPBlocks(f *testing.F) {
	for _, s := range sampleReplies(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if res, err := DecodeEncodedBlocks(data); err == nil {
			ag, hasCert, err := agentDecoded(t, data)
			if err != nil {
				t.Fatalf("decoded a reply agent-go does not read (%v): %+v", err, res)
			}
			switch {
			case !hasCert && res.Certificate != nil:
				t.Fatalf("read a certificate agent-go reads as no blob: %x", res.Certificate)
			case !hasCert, res.Certificate == nil && len(ag.Certificate) == 0:
				// A certificate of another wire type than blob reads as
				// absent; agent-go's empty one may be an empty vector of
				// another type.
				ag.Certificate = nil
			}
			if !reflect.DeepEqual(ag, res) {
				t.Fatalf("decoded\n %+v\nagent-go reads\n %+v", res, ag)
			}
			again, err := DecodeEncodedBlocks(encodeQueryEncodedBlocks(t, res))
			if err != nil || !reflect.DeepEqual(again, res) {
				t.Fatalf("query_encoded_blocks reply does not round-trip:\n %+v\n %+v (%v)", res, again, err)
			}
		}
		if bs, err := DecodeGetEncodedBlocksResult(data); err == nil {
			again, err := DecodeGetEncodedBlocksResult(encodeGetEncodedBlocksOk(t, bs))
			if err != nil || !reflect.DeepEqual(again, bs) {
				t.Fatalf("get_encoded_blocks reply does not round-trip:\n %v\n %v (%v)", bs, again, err)
			}
		}
	})
}
