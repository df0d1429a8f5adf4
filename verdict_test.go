package reconciled_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

// TestVerdictJSONGolden holds the verdict's wire form (docs/protocol.md#verdict)
// to bytes recorded from the type before it moved into this package: every
// field, the decimal strings of U64, the omitted and the null parts.
func TestVerdictJSONGolden(t *testing.T) {
	u := func(v uint64) *reconciled.U64 { x := reconciled.U64(v); return &x }
	memo := "6d656d6f"
	vs := []reconciled.Verdict{
		{IntentID: "pay-1", IntentHash: "ab", Seq: 2, Status: reconciled.StatusFound, Final: true,
			Block: &reconciled.BlockRef{Index: 18446744073709551615, TS: 1700000000000000000, Hash: "cd", Kind: "xfer", Match: reconciled.MatchExact},
			NearMisses: []reconciled.NearMiss{
				{Index: 7, Differs: []string{"amount", "memo"}, Block: &reconciled.NearMissBlock{Kind: "xfer", TS: 5, From: "a", To: "b", Spender: "c", Amount: "10", Fee: "1", Memo: &memo}},
				{Index: 8, Differs: []string{"to"}},
			},
			Window: &reconciled.Window{FromTS: 1, ToTS: 2, FirstBlock: u(3), LastBlock: u(4), NarrowedBy: "ingress_expiry"},
			Evidence: &reconciled.Evidence{Verified: "certificate+chain", TipIndex: u(9), TipHash: "ef", CertifiedTime: u(10), BlocksRead: 11,
				IndexSource:    reconciled.IndexByChainPosition,
				HistoryChanged: &reconciled.HistoryChange{Reason: "hash", OldTipIndex: 1, OldTipHash: "aa", NewTipIndex: 2, NewTipHash: "bb", CertifiedAt: 3, BlocksDiscarded: 4}},
			DecidedAt: time.Date(2026, 12, 4, 2, 0, 0, 123456789, time.UTC)},
		{IntentID: "pay-2", Seq: 1, Status: reconciled.StatusInvalid, Final: true,
			Reason:    &reconciled.Reason{Code: "E_X", Field: "args", Message: "m <&>"},
			DecidedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600))},
		{IntentID: "pay-3", Seq: 1, Status: reconciled.StatusNotYet, NearMisses: []reconciled.NearMiss{}},
	}
	var got []byte
	for _, v := range vs {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got = append(append(got, b...), '\n')
	}
	want, err := os.ReadFile("testdata/verdict.golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("verdict JSON changed:\ngot  %s\nwant %s", got, want)
	}
	// And back: decoding the golden bytes gives the same verdicts.
	for i, line := range bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n")) {
		var v reconciled.Verdict
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		b, _ := json.Marshal(v)
		if !bytes.Equal(b, line) {
			t.Fatalf("line %d does not round-trip:\ngot  %s\nwant %s", i+1, b, line)
		}
	}
}

func TestSameDecision(t *testing.T) {
	b := &reconciled.BlockRef{Index: 3, Hash: "h"}
	base := reconciled.Verdict{IntentID: "i", IntentHash: "x", Seq: 1, Status: reconciled.StatusFound, Final: true, Block: b}
	other := *b
	other.Index = 4
	for _, c := range []struct {
		name string
		a, b reconciled.Verdict
		want bool
	}{
		{"re-encoded at another time", base, func() reconciled.Verdict {
			v := base
			v.DecidedAt = time.Unix(9, 0)
			v.Block = &reconciled.BlockRef{Index: 3, Hash: "h"}
			return v
		}(), true},
		{"one without intent_hash", base, func() reconciled.Verdict { v := base; v.IntentHash = ""; return v }(), true},
		{"another body", base, func() reconciled.Verdict { v := base; v.IntentHash = "y"; return v }(), false},
		{"another block", base, func() reconciled.Verdict { v := base; v.Block = &other; return v }(), false},
		{"another status", base, func() reconciled.Verdict { v := base; v.Status = reconciled.StatusAbsent; v.Block = nil; return v }(), false},
	} {
		if got := reconciled.SameDecision(c.a, c.b); got != c.want {
			t.Errorf("%s: SameDecision = %v, want %v", c.name, got, c.want)
		}
	}
}
