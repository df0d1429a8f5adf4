package icrc3_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
)

// TestDecodeLedgertestReplies decodes the test ledger's own Candid (its
// direct encoder, not agent-go's) and checks every block against the
// ledger's record: same Value, same hash, an unbroken phash chain to the tip.
func TestDecodeLedgertestReplies(t *testing.T) {
	rangeType := idl.NewRecordType(map[string]idl.Type{"start": new(idl.NatType), "length": new(idl.NatType)})
	rangeArg := func(start, length uint64) map[string]any {
		return map[string]any{"start": idl.NewNat(start), "length": idl.NewNat(length)}
	}
	for _, style := range []ledgertest.BlockStyle{ledgertest.StyleDFINITY, ledgertest.StyleSpec} {
		srv, err := ledgertest.NewServer(ledgertest.WithSeed(int64(style) + 1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		l, err := srv.NewLedger(ledgertest.LedgerConfig{BlockStyle: style, ArchiveThreshold: 400, ArchiveBatch: 200})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.GenerateHistory(700, 7, time.Hour); err != nil {
			t.Fatal(err)
		}
		n := l.Len()
		ctx := ledgertest.CallContext{Time: srv.Now()}

		check := func(what string, blocks []icrc3.Block) {
			t.Helper()
			if len(blocks) == 0 {
				t.Fatalf("%s: no blocks", what)
			}
			for i, b := range blocks {
				want, ok := l.Block(b.Index)
				if !ok || !bytes.Equal(icrc3.MarshalValue(want), b.Raw) || b.Hash != want.Hash() {
					t.Fatalf("%s: block %d differs from the ledger's", what, b.Index)
				}
				if b.Kind == icrc3.BlockUnknown || b.Amount == nil {
					t.Fatalf("%s: block %d not parsed: kind %q", what, b.Index, b.Kind)
				}
				if i > 0 && (b.Index != blocks[i-1].Index+1 || b.PHash == nil || *b.PHash != blocks[i-1].Hash) {
					t.Fatalf("%s: chain broken at %d", what, b.Index)
				}
				if b.Index == n-1 && b.Hash != l.TipHash() {
					t.Fatalf("%s: tip hash differs", what)
				}
			}
		}

		var local uint64 // first block still on the ledger
		for _, ai := range l.Archives() {
			local = max(local, ai.End+1)
		}
		if local == 0 || local >= n {
			t.Fatalf("history not archived as configured: local from %d of %d", local, n)
		}
		arg, err := candid.Encode([]idl.Type{idl.NewVectorType(rangeType)}, []any{[]any{rangeArg(0, 50), rangeArg(local, n-local)}})
		if err != nil {
			t.Fatal(err)
		}
		out, rej := l.Query(ctx, "icrc3_get_blocks", arg)
		if rej != nil {
			t.Fatalf("icrc3_get_blocks: %+v", rej)
		}
		res, err := icrc3.DecodeGetBlocksResult(out)
		if err != nil {
			t.Fatalf("style %d: %v", style, err)
		}
		if v, _ := res.LogLength.Uint64(); v != n || len(res.Archived) == 0 {
			t.Fatalf("log_length %s, %d archived entries", res.LogLength, len(res.Archived))
		}
		if len(res.Blocks) != int(min(100, n-local)) || res.Blocks[0].Index != local {
			t.Fatalf("icrc3_get_blocks: %d blocks from %d, want %d from %d", len(res.Blocks), res.Blocks[0].Index, min(100, n-local), local)
		}
		check("icrc3_get_blocks", res.Blocks)
		for _, a := range res.Archived {
			found := false
			for _, ai := range l.Archives() {
				found = found || bytes.Equal(ai.ID.Raw, a.Callback.Canister.Raw)
			}
			if !found || a.Callback.Method != "icrc3_get_blocks" || len(a.Args) == 0 {
				t.Fatalf("archived pointer %+v not to a known archive", a)
			}
		}

		arg, err = candid.Encode([]idl.Type{rangeType}, []any{rangeArg(0, n)}) // archived prefix, then local blocks
		if err != nil {
			t.Fatal(err)
		}
		out, rej = l.Query(ctx, "get_blocks", arg)
		if rej != nil {
			t.Fatalf("get_blocks: %+v", rej)
		}
		legacy, err := icrc3.DecodeLegacyGetBlocks(out)
		if err != nil {
			t.Fatalf("style %d legacy: %v", style, err)
		}
		if legacy.ChainLength != n || len(legacy.Archived) == 0 || legacy.Blocks[0].Index != legacy.FirstIndex {
			t.Fatalf("legacy header: first %d chain %d archived %d", legacy.FirstIndex, legacy.ChainLength, len(legacy.Archived))
		}
		check("get_blocks", legacy.Blocks)
	}
}
