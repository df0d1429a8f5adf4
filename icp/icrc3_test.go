package icp

import (
	"testing"

	"github.com/reconciled/reconciled/icrc3"
)

func TestToICRC3(t *testing.T) {
	kinds := map[string]icrc3.BlockKind{"transfer": icrc3.BlockTransfer, "transfer_from": icrc3.BlockTransferFrom,
		"approve": icrc3.BlockApprove, "mint": icrc3.BlockMint, "burn": icrc3.BlockBurn, "burn_from": icrc3.BlockBurn}
	for name, kind := range kinds {
		blk := sampleBlocks()[name]
		raw, err := Encode(blk)
		if err != nil {
			t.Fatal(err)
		}
		b, back, err := ToICRC3(7, raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b.Kind != kind || b.Hash != icrc3.Hash(BlockHash(raw)) || b.PHash == nil || *b.PHash != icrc3.Hash(*blk.ParentHash) ||
			b.TS != blk.Timestamp || back.Tx.Op != blk.Tx.Op {
			t.Errorf("%s: %+v", name, b)
		}
		if (b.CreatedAt == nil) != (blk.Tx.CreatedAtTime == nil) {
			t.Errorf("%s: created_at %v", name, b.CreatedAt)
		}
		if got, ok, err := FromICRC3(&b); !ok || err != nil || got.Tx.Op != blk.Tx.Op {
			t.Errorf("%s: FromICRC3 = %v %v %v", name, got, ok, err)
		}
		if v, err := b.Value(); err != nil {
			t.Errorf("%s: Value: %v", name, err)
		} else if r, ok := RawFromValue(v); !ok || string(r) != string(raw) {
			t.Errorf("%s: Value does not carry the bytes", name)
		}
		// Bytes changed after verification are refused, not read.
		b.Native = append(append([]byte{}, raw...), 0)
		if _, ok, err := FromICRC3(&b); !ok || err == nil {
			t.Errorf("%s: altered bytes read", name)
		}
	}
	raw, _ := Encode(sampleBlocks()["transfer"])
	if _, _, err := ToICRC3(0, raw); err == nil {
		t.Error("block 0 with a parent hash accepted")
	}
	raw, _ = Encode(sampleBlocks()["legacy_send"])
	if _, _, err := ToICRC3(3, raw); err == nil {
		t.Error("block 3 without a parent hash accepted")
	}
	if b, _, err := ToICRC3(0, raw); err != nil || b.PHash != nil || b.CreatedAt != nil {
		t.Errorf("block 0: %+v %v", b, err)
	}
	other := icrc3.Block{Raw: icrc3.MarshalValue(icrc3.MapValue())}
	if _, ok, _ := FromICRC3(&other); ok {
		t.Error("an ICRC-3 block read as an ICP block")
	}
}
