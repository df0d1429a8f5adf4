package store

import (
	"context"
	"errors"
	"testing"

	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc3"
)

func icpChain(t *testing.T, n int) []icrc3.Block {
	t.Helper()
	var out []icrc3.Block
	var parent *[32]byte
	for i := 0; i < n; i++ {
		from, _ := icp.NewAccountID([]byte{1, byte(i)}, nil)
		to, _ := icp.NewAccountID([]byte{2, byte(i)}, nil)
		fee, st := uint64(10_000), uint64(1000+i)
		raw, err := icp.Encode(&icp.Block{ParentHash: parent, Timestamp: uint64(2000 + i), Tx: icp.Transaction{Op: icp.OpTransfer,
			From: &from, To: &to, Amount: uint64(i), Fee: &fee, CreatedAtTime: &st}})
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := icp.ToICRC3(uint64(i), raw)
		if err != nil {
			t.Fatal(err)
		}
		h := icp.BlockHash(raw)
		parent = &h
		out = append(out, b)
	}
	return out
}

func TestICPBlocksCachedAndRebuiltFromTheirBytes(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	bs := icpChain(t, 4)
	if err := s.PutVerified(ctx, "icp", bs); err != nil {
		t.Fatal(err)
	}
	got, err := s.ByStamp(ctx, "icp", 1002, 0, 3)
	if err != nil || len(got) != 1 {
		t.Fatalf("by stamp: %v %v", got, err)
	}
	b := got[0]
	if b.Index != 2 || b.Hash != bs[2].Hash || string(b.Native) != string(bs[2].Native) || b.Kind != icrc3.BlockTransfer {
		t.Fatalf("rebuilt %+v", b)
	}
	if blk, ok, err := icp.FromICRC3(&b); !ok || err != nil || blk.Tx.Amount != 2 {
		t.Fatalf("rebuilt block does not read as ICP: %v %v", ok, err)
	}
	// A Value whose bytes do not hash to the verified hash is refused.
	bad := icpChain(t, 1)
	bad[0].Hash[0] ^= 1
	if err := s.PutVerified(ctx, "icp2", bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("mismatching hash stored: %v", err)
	}
}
