package ledgertest

import (
	"bytes"
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/leb128"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc3"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The ICRC-3 README's 1xfer and 2approve examples, built from typed block
// records, must hash to the vectors (hash-vectors.md E.1) in both styles:
// this pins field names, fee placement, account encoding and the fast hash.
func TestSpecExampleBlocks(t *testing.T) {
	tab := newAccountTable()
	zero := make([]byte, 32)
	xfer := blockRec{
		op: opXfer, ts: 1_701_109_006_692_276_133, amt: icrc3.NatFromUint64(609_618),
		fee: icrc3.NatFromUint64(10), flags: fBlockFee,
		from: tab.intern(icrc3.Account{Owner: principal.Principal{Raw: unhex(t, "0000000000f013780101")}, Subaccount: zero}),
		to:   tab.intern(icrc3.Account{Owner: principal.Principal{Raw: unhex(t, "20ef1f835a730a3fdcd579e7cc539f0b1461ac9ffbf06266f3a9c74402")}, Subaccount: zero}),
	}
	approve := blockRec{
		op: opApprove, ts: 1_701_167_840_950_358_788, amt: icrc3.NatFromUint64(math.MaxUint64),
		fee: icrc3.NatFromUint64(10), flags: fBlockFee,
		from:    tab.intern(icrc3.Account{Owner: principal.Principal{Raw: unhex(t, "1663e19176ebe529843ab28013cc090201a8035b58a5a0d31fe4c37b02")}}),
		spender: tab.intern(icrc3.Account{Owner: principal.Principal{Raw: unhex(t, "0000000000e01d490101")}}),
	}
	cases := []struct {
		name   string
		rec    blockRec
		phash  string
		style  BlockStyle
		expect string
	}{
		{"1xfer btype", xfer, "682c2c9782ff2e9c78266ca265e74b465676d189be4ac5c5ad2c685c3ccacebe", StyleSpec, "9d5543f76b10728c857e8c4e6f5265e3cd881df508f321bd8cb87e4320fd43e6"},
		{"xfer op", xfer, "682c2c9782ff2e9c78266ca265e74b465676d189be4ac5c5ad2c685c3ccacebe", StyleDFINITY, "e53d0c25d80536a466981e6c341e9a94f0580eb0d2fafdf0e18a867805316715"},
		{"2approve btype", approve, "3bf7be74b690b7ea32f498a5b060a56c6933dc584e1f232332b5dbdeb1b302f5", StyleSpec, "70a2c9c106fa28bf67eb7e87123604693ffdb1f894c62aa6766b4e151ea50c3d"},
		{"approve op", approve, "3bf7be74b690b7ea32f498a5b060a56c6933dc584e1f232332b5dbdeb1b302f5", StyleDFINITY, "93d4c75d1a20b943dd610b7d8f70706e731c8e7778a253af9e74755bfbd54625"},
	}
	rh := newRIHasher()
	for _, c := range cases {
		var ph icrc3.Hash
		copy(ph[:], unhex(t, c.phash))
		r := c.rec
		r.txHash = rh.txHash(&r, tab, c.style)
		fast := rh.blockHash(&r, &ph, c.style)
		v := blockValue(&r, &ph, tab, c.style)
		if got := v.Hash().String(); got != c.expect {
			t.Errorf("%s: Value hash %s, want %s", c.name, got, c.expect)
		}
		if fast.String() != c.expect {
			t.Errorf("%s: fast hash %s, want %s", c.name, fast, c.expect)
		}
		tx, _ := v.Get("tx")
		if tx.Hash() != r.txHash {
			t.Errorf("%s: tx hash differs from the tx Value's hash", c.name)
		}
	}
}

// Fee placement and accounts as sent, through real calls.
func TestBlockFeePlacementAndAccounts(t *testing.T) {
	for _, style := range []BlockStyle{StyleDFINITY, StyleSpec} {
		h := newFakeHost()
		l, alice, bob := newTestLedger(t, h, LedgerConfig{BlockStyle: style})
		i1, _ := l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(1)})
		i2, _ := l.Transfer(alice, TransferArg{FromSubaccount: ptr(make([]byte, 32)), To: acc(bob, make([]byte, 32)), Amount: nat(1), Fee: ptr(nat(10_000))})
		b1, _ := l.Block(i1)
		b2, _ := l.Block(i2)
		tx1, _ := b1.Get("tx")
		tx2, _ := b2.Get("tx")
		if natOf(t, b1, "fee") != 10_000 {
			t.Error("fee None: the top-level fee must be the ledger fee")
		}
		if _, ok := tx1.Get("fee"); ok {
			t.Error("fee None: tx.fee must be absent")
		}
		if _, ok := b2.Get("fee"); ok {
			t.Error("fee Some: no top-level fee")
		}
		if natOf(t, tx2, "fee") != 10_000 {
			t.Error("fee Some: tx.fee must be recorded")
		}
		from1, _ := tx1.Get("from")
		from2, _ := tx2.Get("from")
		to2, _ := tx2.Get("to")
		if len(from1.Array) != 1 || len(from2.Array) != 2 || len(to2.Array) != 2 || !bytes.Equal(to2.Array[1].Bytes, make([]byte, 32)) {
			t.Errorf("accounts not recorded as sent: %+v / %+v / %+v", from1, from2, to2)
		}
		_, hasOp := tx1.Get("op")
		bt, hasBT := b1.Get("btype")
		if style == StyleDFINITY && (!hasOp || hasBT) {
			t.Error("DFINITY style: tx.op and no btype")
		}
		if style == StyleSpec && (hasOp || bt.Text() != "1xfer") {
			t.Errorf("spec style: btype 1xfer and no tx.op, got %q %v", bt.Text(), hasOp)
		}
		if _, ok := b1.Get("phash"); !ok {
			t.Error("block 1+ has no phash")
		}
		b0, _ := l.Block(0)
		if _, ok := b0.Get("phash"); ok {
			t.Error("block 0 has a phash")
		}
		if natOf(t, b2, "ts") != h.Now() {
			t.Error("ts must be the ledger time")
		}
	}
}

func TestSpecStyleBlockTypes(t *testing.T) {
	h := newFakeHost()
	l, alice, bob := newTestLedger(t, h, LedgerConfig{BlockStyle: StyleSpec})
	m := l.MintingAccount()
	want := map[uint64]string{0: "1mint"}
	i, _ := l.Approve(alice, ApproveArg{Spender: acc(bob, nil), Amount: nat(1_000_000)})
	want[i] = "2approve"
	i, _ = l.TransferFrom(bob, TransferFromArg{From: acc(alice, nil), To: acc(bob, nil), Amount: nat(1)})
	want[i] = "2xfer"
	i, _ = l.TransferFrom(bob, TransferFromArg{From: acc(alice, nil), To: m.ToCandid(), Amount: nat(10_000)})
	want[i] = "1burn"
	i, _ = l.Transfer(alice, TransferArg{To: m.ToCandid(), Amount: nat(10_000)})
	want[i] = "1burn"
	for idx, bt := range want {
		b, _ := l.Block(idx)
		if got, _ := b.Get("btype"); got.Text() != bt {
			t.Errorf("block %d btype %q, want %q", idx, got.Text(), bt)
		}
	}
}

// The certified data is the root of the tip tree, and every block's phash
// chains to the certified tip; checked with agent-go's hashtree as the
// independent implementation, for both tip formats.
func TestChainAndTipCertificate(t *testing.T) {
	for _, format := range []TipFormat{TipLEB128, TipLegacy} {
		h := newFakeHost()
		l, _, _ := newTestLedger(t, h, LedgerConfig{TipFormat: format})
		if err := l.GenerateHistory(300, 7, time.Hour); err != nil {
			t.Fatal(err)
		}
		out, rej := l.Query(h.queryCtx(), "icrc3_get_tip_certificate", mustEncode(t))
		if rej != nil {
			t.Fatal(rej)
		}
		var dc *dataCertificate
		decodeOne(t, out, &dc)
		if dc == nil {
			t.Fatal("no tip certificate in a query")
		}
		tree, err := hashtree.Deserialize(dc.HashTree)
		if err != nil {
			t.Fatal(err)
		}
		root := tree.Reconstruct()
		if !bytes.Equal(root[:], l.CertifiedData()) || !bytes.Equal(dc.Certificate, append([]byte("cert:"), root[:]...)) {
			t.Fatalf("format %d: tree root %x, certified %x", format, root, l.CertifiedData())
		}
		var idx uint64
		var tip []byte
		if format == TipLegacy {
			ib, err := hashtree.Lookup(tree, hashtree.Label("last_block_index"))
			if err != nil || len(ib) != 8 {
				t.Fatalf("legacy index %x %v", ib, err)
			}
			for _, b := range ib {
				idx = idx<<8 | uint64(b)
			}
			tip, err = hashtree.Lookup(tree, hashtree.Label("tip_hash"))
			if err != nil {
				t.Fatal(err)
			}
		} else {
			ib, err := hashtree.Lookup(tree, hashtree.Label("last_block_index"))
			if err != nil {
				t.Fatal(err)
			}
			bi, err := leb128.DecodeUnsigned(bytes.NewReader(ib))
			if err != nil {
				t.Fatal(err)
			}
			idx = bi.Uint64()
			if tip, err = hashtree.Lookup(tree, hashtree.Label("last_block_hash")); err != nil {
				t.Fatal(err)
			}
		}
		if idx != l.Len()-1 {
			t.Fatalf("certified index %d, len %d", idx, l.Len())
		}
		want := tip
		for i := int(idx); i >= 0; i-- {
			b, _ := l.Block(uint64(i))
			hb := b.Hash()
			if !bytes.Equal(hb[:], want) {
				t.Fatalf("block %d hash %x does not match %x", i, hb, want)
			}
			ph, ok := b.Get("phash")
			if i == 0 {
				if ok {
					t.Fatal("block 0 has a phash")
				}
				break
			}
			want = ph.Bytes
		}
		// A replicated call gets no certificate.
		out, rej = l.Update(CallContext{Caller: principal.AnonymousID, Time: h.Now(), Replicated: true}, "icrc3_get_tip_certificate", mustEncode(t))
		if rej != nil {
			t.Fatal(rej)
		}
		dc = nil
		decodeOne(t, out, &dc)
		if dc != nil {
			t.Fatal("a replicated call returned a tip certificate")
		}
	}
}

func TestTipTreeVectors(t *testing.T) {
	var hsh icrc3.Hash
	for i := range hsh {
		hsh[i] = byte(i)
	}
	tt := newTipTree(TipLEB128, 1235, hsh)
	if r := tt.rootHash(); hex.EncodeToString(r[:]) != "a9624cf719396ebf4fa12dfe5dbfbf3a4c052708ea5c0f16d1cf1bbd8561047b" {
		t.Fatalf("root %x", r)
	}
	if r := newTipTree(TipLEB128, 0, hsh).rootHash(); hex.EncodeToString(r[:]) != "4e3ed35c4e2d1ee89996483fb6260a64cffb6c47dbab216e7930e82f8190d120" {
		t.Fatalf("empty root %x", r)
	}
	for _, tt := range []tipTree{newTipTree(TipLEB128, 0, hsh), newTipTree(TipLEB128, 1235, hsh), newTipTree(TipLegacy, 300, hsh)} {
		n, err := hashtree.Deserialize(tt.cbor())
		if err != nil {
			t.Fatal(err)
		}
		if n.Reconstruct() != tt.rootHash() {
			t.Fatal("agent-go reconstructs a different root from our CBOR")
		}
	}
}

// The fast hash equals Value.Hash() for every shape GenerateHistory makes.
func TestFastHashMatchesValueHash(t *testing.T) {
	for _, style := range []BlockStyle{StyleDFINITY, StyleSpec} {
		h := newFakeHost()
		l, _, _ := newTestLedger(t, h, LedgerConfig{BlockStyle: style})
		if err := l.GenerateHistory(2000, 3, time.Hour); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for i := uint64(0); i < l.Len(); i++ {
			b, _ := l.Block(i)
			if b.Hash() != l.chain[i].hash {
				t.Fatalf("style %d block %d: Value hash differs from fast hash", style, i)
			}
			tx, _ := b.Get("tx")
			for _, f := range tx.Map {
				seen[f.Key] = true
			}
		}
		for _, k := range []string{"amt", "from", "to", "spender", "fee", "memo", "ts", "expires_at"} {
			if !seen[k] {
				t.Errorf("style %d: history never wrote tx.%s", style, k)
			}
		}
	}
}
