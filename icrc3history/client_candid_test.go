package icrc3history

import (
	"bytes"
	"testing"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// The hand-encoded arguments must decode, with agent-go's decoder, to the
// ranges they were made from (the type table order may differ from
// agent-go's own encoder, which Candid allows).
func TestCandidArgs(t *testing.T) {
	type rng struct {
		Start  idl.Nat `ic:"start"`
		Length idl.Nat `ic:"length"`
	}
	args := []icrc3.BlockRange{{Start: 0, Length: 100}, {Start: 1 << 40, Length: 1 << 33}, {Start: 1<<64 - 1, Length: 1}}
	var got []rng
	if err := candid.Unmarshal(encodeGetBlocksArgs(args...), []any{&got}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(args) {
		t.Fatalf("%d ranges", len(got))
	}
	for i, r := range got {
		if r.Start.BigInt().Uint64() != args[i].Start || r.Length.BigInt().Uint64() != args[i].Length {
			t.Errorf("range %d: %v+%v, want %+v", i, r.Start, r.Length, args[i])
		}
	}
	var one rng
	if err := candid.Unmarshal(encodeLegacyGetBlocksArgs(12345, 2000), []any{&one}); err != nil {
		t.Fatal(err)
	}
	if one.Start.BigInt().Uint64() != 12345 || one.Length.BigInt().Uint64() != 2000 {
		t.Fatalf("legacy args %v+%v", one.Start, one.Length)
	}
	want, err := candid.Marshal([]any{rng{idl.NewNat(uint64(12345)), idl.NewNat(uint64(2000))}})
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeLegacyGetBlocksArgs(12345, 2000); !bytes.Equal(got, want) {
		t.Fatalf("legacy args\n got %x\nwant %x", got, want)
	}
	var empty []rng
	if err := candid.Unmarshal(encodeGetBlocksArgs(), []any{&empty}); err != nil || len(empty) != 0 {
		t.Fatalf("empty args: %v %v", empty, err)
	}
	if _, _, err := candid.Decode(icrc1.NoArgs); err != nil {
		t.Fatal(err)
	}
	want, err = candid.Marshal([]any{struct {
		From *principal.Principal `ic:"from,omitempty"`
	}{}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(candidGetArchivesArgs, want) {
		t.Fatalf("get_archives args\n got %x\nwant %x", candidGetArchivesArgs, want)
	}
}
