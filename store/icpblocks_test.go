package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/reconciled/reconciled"
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

// icrc3WithICPKey is an ICRC-3 transfer chain whose Values carry icp.ValueKey's
// bytes: in block 0's memo, and in block 1 as a top-level field holding a
// blob (ICRC-3 blocks may carry fields of their own), once with bytes that
// are no ICP block and once with an ICP block's protobuf bytes. Each is an
// ICRC-3 block, hashed by its Value.
func icrc3WithICPKey(t *testing.T) []icrc3.Block {
	t.Helper()
	icpRaw := icpChain(t, 1)[0].Native
	extra := [][]icrc3.Field{
		nil,
		{icrc3.F(icp.ValueKey, icrc3.Blob([]byte("not a protobuf block")))},
		{icrc3.F(icp.ValueKey, icrc3.Blob(icpRaw))},
	}
	var out []icrc3.Block
	var phash *icrc3.Hash
	for i, fs := range extra {
		st := uint64(5000)
		tx := icrc3.MapValue(
			icrc3.F("op", icrc3.Text("xfer")),
			icrc3.F("from", icrc3.ArrayValue(icrc3.Blob([]byte{1, 2, 3}))),
			icrc3.F("to", icrc3.ArrayValue(icrc3.Blob([]byte{4, 5, byte(i)}))),
			icrc3.F("amt", icrc3.Uint(uint64(100+i))),
			icrc3.F("memo", icrc3.Blob([]byte("memo "+icp.ValueKey))),
			icrc3.F("ts", icrc3.Uint(st)),
		)
		fs = append(fs, icrc3.F("ts", icrc3.Uint(testTS(uint64(i)))), icrc3.F("tx", tx))
		if phash != nil {
			fs = append(fs, icrc3.F("phash", icrc3.Blob(phash[:])))
		}
		v := icrc3.MapValue(fs...)
		h := v.Hash()
		b, err := icrc3.ParseBlock(uint64(i), v, h)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
		phash = &h
	}
	return out
}

// A block's family is the cache's record, not a guess from its bytes: an
// ICRC-3 block whose Value happens to hold icp.ValueKey (a memo, a field
// of the ledger's own) is cached and read back as the ICRC-3 block it is.
func TestICRC3BlockWithICPKeyReadsAsICRC3(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	bs := icrc3WithICPKey(t)
	if err := s.PutVerified(ctx, ledgerA, bs); err != nil {
		t.Fatalf("put: %v", err)
	}
	got, err := s.ByStamp(ctx, ledgerA, 5000, 0, 2)
	if err != nil {
		t.Fatalf("by stamp: %v", err)
	}
	if len(got) != len(bs) {
		t.Fatalf("%d blocks, want %d", len(got), len(bs))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], bs[i]) {
			t.Fatalf("block %d:\n got %+v\nwant %+v", i, got[i], bs[i])
		}
	}
}

// A store written by schema version 14 holds no family: 0015 records each
// cached history's from its blocks' Values, once, so the upgraded store
// rebuilds its old cache by the right rule: the ICP ledger's blocks from
// their protobuf bytes, and an ICRC-3 history's blocks, though a memo
// holds the ICP Value's key, as ICRC-3 blocks. A history without blocks is
// left without a family, and takes the one its next blocks bring.
func TestFamilyMigrationBackFills(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "recon.db")
	w := openAtVersion(t, path, 14)
	icrc := icrc3WithICPKey(t)[:1]
	icpBs := icpChain(t, 4)
	put := func(key string, fam family, bs []icrc3.Block) {
		t.Helper()
		cbs := make([]CachedBlock, len(bs))
		for i := range bs {
			st, err := stampOf(bs[i].Index, bs[i].TS, bs[i].Raw, bs[i].Hash, fam)
			if err != nil {
				t.Fatal(err)
			}
			cbs[i] = CachedBlock{Index: bs[i].Index, TS: bs[i].TS, Hash: bs[i].Hash, Raw: bs[i].Raw, Stamp: st}
		}
		var id int64
		if err := w.GetContext(ctx, &id, `INSERT INTO histories (key) VALUES (?) RETURNING id`, key); err != nil {
			t.Fatal(err)
		}
		meta, vals, err := encodeRun(nil, nil, cbs)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := tsBounds(cbs)
		if _, err := w.ExecContext(ctx, insertRunSQL, id, int64(cbs[0].Index), int64(cbs[len(cbs)-1].Index),
			int64(lo), int64(hi), meta, vals); err != nil {
			t.Fatal(err)
		}
		for _, c := range cbs {
			if c.Stamp != nil {
				if _, err := w.ExecContext(ctx, stampsSQL(1), id, stampArg(c.Stamp), int64(c.Index)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	put("icrc", familyICRC3, icrc)
	put("icp", familyICP, icpBs)
	if _, err := w.ExecContext(ctx, `INSERT INTO histories (key) VALUES ('empty')`); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path)
	for key, want := range map[string]sql.NullString{
		"icrc": {String: "icrc3", Valid: true}, "icp": {String: "icp", Valid: true}, "empty": {},
	} {
		var got sql.NullString
		if err := s.r.GetContext(ctx, &got, `SELECT family FROM histories WHERE key = ?`, key); err != nil || got != want {
			t.Fatalf("%s: family %v (%v), want %v", key, got, err, want)
		}
	}
	if got, err := s.ByStamp(ctx, "icrc", 5000, 0, 0); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], icrc[0]) {
		t.Fatalf("ICRC-3 block after migration: %+v %v", got, err)
	}
	if got, err := s.ByStamp(ctx, "icp", 1002, 0, 3); err != nil || len(got) != 1 || string(got[0].Native) != string(icpBs[2].Native) {
		t.Fatalf("ICP block after migration: %+v %v", got, err)
	}
	if err := s.PutVerified(ctx, "empty", icpBs); err != nil {
		t.Fatalf("first blocks of a history without a family: %v", err)
	}
	if got, err := s.ByStamp(ctx, "empty", 1001, 0, 3); err != nil || len(got) != 1 || got[0].Native == nil {
		t.Fatalf("ICP block of the formerly empty history: %+v %v", got, err)
	}
}

// One history's blocks are of one family: blocks of another family than
// those cached are a conflict, and a batch mixing the two is refused. Once
// the chain is discarded (a reinstalled ledger), the history takes the
// family of the blocks cached next.
func TestHistoryFamilyIsOne(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	icpBs := icpChain(t, 2)
	icrc := parsedRange(t, 0, 2)
	if err := s.PutVerified(ctx, ledgerA, []icrc3.Block{icpBs[0], icrc[1]}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("mixed batch: %v, want ErrInvalid", err)
	}
	if err := s.PutVerified(ctx, ledgerA, icpBs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.PutVerified(ctx, ledgerA, icrc[1:]); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("ICRC-3 blocks over an ICP history: %v, want ErrBlockConflict", err)
	}
	if err := s.PutBlocks(ctx, ledgerA, blocks(1, 2)); !errors.Is(err, ErrBlockConflict) {
		t.Fatalf("ICRC-3 rows over an ICP history: %v, want ErrBlockConflict", err)
	}
	if err := s.Discard(ctx, ledgerA, reconciled.HistoryChange{Reason: "hash"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutVerified(ctx, ledgerA, icrc); err != nil {
		t.Fatalf("ICRC-3 blocks after the ICP chain was discarded: %v", err)
	}
	if got, err := s.ByStamp(ctx, ledgerA, testStamp(1), 0, 1); err != nil || len(got) != 2 || !reflect.DeepEqual(got[1], icrc[1]) {
		t.Fatalf("ICRC-3 blocks read back: %+v %v", got, err)
	}
}
