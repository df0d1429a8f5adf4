package icrc3history

import (
	"encoding/hex"
	"testing"

	"github.com/aviate-labs/agent-go/candid"

	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// Replies that crash agent-go's reflection decoder (found by fuzzing): a
// record that contains itself (stack overflow) and a principal claiming
// 2^40 bytes (out of memory). Both kill the process, so without the screen
// this test does not fail politely: it takes the test binary down.
func TestUnmarshalCandidRefusesHostileReplies(t *testing.T) {
	for _, h := range []string{
		"4449444c016c0100000100",
		"4449444c026c02fbca0101d8a38ca80d7d6c01b3b0dac3036801000180808080802005",
	} {
		raw, _ := hex.DecodeString(h)
		var out *icrc3.CandidAccount
		if err := icrc1.UnmarshalReply(raw, &out); err == nil {
			t.Fatalf("%s decoded", h)
		}
	}
	// Well-formed replies still decode (the minting account is covered by
	// the detection tests against the test ledger).
	var raw []byte
	var err error
	var types []struct {
		BlockType string `ic:"block_type"`
		URL       string `ic:"url"`
	}
	in := []struct {
		BlockType string `ic:"block_type"`
		URL       string `ic:"url"`
	}{{"1xfer", "https://example.org/icrc1"}}
	if raw, err = candid.Marshal([]any{in}); err != nil {
		t.Fatal(err)
	}
	if err := icrc1.UnmarshalReply(raw, &types); err != nil || len(types) != 1 || types[0].BlockType != "1xfer" {
		t.Fatalf("decode block types: %+v %v", types, err)
	}
}
