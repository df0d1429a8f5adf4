package icp

import (
	"bytes"
	"fmt"
	"math/rand/v2"
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

// readable is the block's Value for people, as a tree: the oracle
// appendReadable is held to.
func readable(raw []byte, blk *Block) icrc3.Value {
	tx := &blk.Tx
	t := []icrc3.Field{icrc3.F("op", icrc3.Text(tx.Op.String()))}
	acc := func(k string, a *AccountID) {
		if a != nil {
			t = append(t, icrc3.F(k, icrc3.Text(a.String())))
		}
	}
	acc("from", tx.From)
	acc("to", tx.To)
	acc("spender", tx.Spender)
	t = append(t, icrc3.F("amt", icrc3.Uint(tx.Amount)))
	if tx.Fee != nil {
		t = append(t, icrc3.F("fee", icrc3.Uint(*tx.Fee)))
	}
	if tx.ExpectedAllowance != nil {
		t = append(t, icrc3.F("expected_allowance", icrc3.Uint(*tx.ExpectedAllowance)))
	}
	if tx.ExpiresAt != nil {
		t = append(t, icrc3.F("expires_at", icrc3.Uint(*tx.ExpiresAt)))
	}
	t = append(t, icrc3.F("legacy_memo", icrc3.Uint(tx.Memo)))
	if tx.HasICRC1Memo {
		t = append(t, icrc3.F("memo", icrc3.Blob(tx.ICRC1Memo)))
	}
	if tx.CreatedAtTime != nil {
		t = append(t, icrc3.F("ts", icrc3.Uint(*tx.CreatedAtTime)))
	}
	fs := []icrc3.Field{icrc3.F(ValueKey, icrc3.Blob(raw))}
	if blk.ParentHash != nil {
		fs = append(fs, icrc3.F("phash", icrc3.Blob(blk.ParentHash[:])))
	}
	fs = append(fs, icrc3.F("ts", icrc3.Uint(blk.Timestamp)), icrc3.F("tx", icrc3.MapValue(t...)))
	return icrc3.MapValue(fs...)
}

// The block-cache encoding written without a Value is MarshalValue's of
// the readable Value, byte for byte, for every sample block and for
// blocks of random fields.
func TestAppendReadableIsMarshalValue(t *testing.T) {
	check := func(name string, blk *Block) {
		t.Helper()
		raw, err := Encode(blk)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dec, err := Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := icrc3.MarshalValue(readable(raw, dec))
		if got := appendReadable(nil, raw, dec); !bytes.Equal(got, want) {
			t.Fatalf("%s: appendReadable\n%x\nMarshalValue\n%x", name, got, want)
		}
	}
	for name, blk := range sampleBlocks() {
		check(name, blk)
	}
	r := rand.New(rand.NewPCG(5, 6))
	u := func() *uint64 {
		if r.IntN(2) == 0 {
			return nil
		}
		v := r.Uint64() >> r.IntN(64)
		return &v
	}
	for i := range 2000 {
		blk := &Block{Timestamp: r.Uint64() >> r.IntN(64)}
		if r.IntN(8) != 0 {
			ph := [32]byte{byte(i), byte(i >> 8)}
			blk.ParentHash = &ph
		}
		tx := &blk.Tx
		tx.Memo, tx.CreatedAtTime, tx.Amount = r.Uint64()>>r.IntN(64), u(), r.Uint64()>>r.IntN(64)
		if r.IntN(2) == 0 {
			tx.ICRC1Memo, tx.HasICRC1Memo = make([]byte, r.IntN(40)), true
		}
		switch r.IntN(5) {
		case 0:
			tx.Op, tx.To = OpMint, acct(byte(i))
		case 1:
			tx.Op, tx.From = OpBurn, acct(byte(i))
			if r.IntN(2) == 0 {
				tx.Spender = acct(byte(i + 1))
			}
		case 2:
			tx.Op, tx.From, tx.Spender, tx.Fee = OpApprove, acct(byte(i)), acct(byte(i+1)), u()
			if tx.Fee == nil {
				tx.Fee = new(uint64)
			}
			tx.ExpectedAllowance, tx.ExpiresAt = u(), u()
		default:
			tx.Op, tx.From, tx.To, tx.Fee = OpTransfer, acct(byte(i)), acct(byte(i+2)), new(uint64)
			if r.IntN(2) == 0 {
				tx.Spender = acct(byte(i + 3))
			}
		}
		check(fmt.Sprintf("random %d", i), blk)
	}
}

// BenchmarkToICRC3 is the ICP family's conversion of one block into the
// engine's model and its block-cache encoding, the CPU an ICP walk spends
// per block beside the SHA-256 of its bytes.
func BenchmarkToICRC3(b *testing.B) {
	var raws [][]byte
	for _, blk := range sampleBlocks() {
		if blk.ParentHash == nil {
			continue // block 0 only
		}
		raw, err := Encode(blk)
		if err != nil {
			b.Fatal(err)
		}
		raws = append(raws, raw)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, err := ToICRC3(uint64(1+i%len(raws)), raws[i%len(raws)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
