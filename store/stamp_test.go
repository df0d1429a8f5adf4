package store

import (
	"context"
	"math/big"
	"testing"

	"github.com/reconciled/reconciled/icrc3"
)

// stampValues are block Values of every shape the stamp reader must read
// or refuse: the kinds, unknown kinds, missing and repeated keys, fields of
// the wrong kind, numbers beyond 64 bits and deep nesting.
func stampValues() map[string]icrc3.Value {
	acct := func(b byte) icrc3.Value { return icrc3.ArrayValue(icrc3.Blob([]byte{b, 2, 3})) }
	tx := func(extra ...icrc3.Field) icrc3.Value {
		fs := []icrc3.Field{icrc3.F("from", acct(1)), icrc3.F("to", acct(4)), icrc3.F("amt", icrc3.Uint(7))}
		return icrc3.MapValue(append(fs, extra...)...)
	}
	stamp := icrc3.F("ts", icrc3.Uint(1791547000000000123))
	op := icrc3.F("op", icrc3.Text("xfer"))
	big65 := new(big.Int).Lsh(big.NewInt(1), 64)
	deep := icrc3.Uint(1)
	for range icrc3.MaxValueDepth + 2 {
		deep = icrc3.ArrayValue(deep)
	}
	phash := icrc3.F("phash", icrc3.Blob(make([]byte, 32)))
	ts := icrc3.F("ts", icrc3.Uint(1791547000000000999))
	return map[string]icrc3.Value{
		"transfer":              icrc3.MapValue(phash, ts, icrc3.F("tx", tx(op, stamp))),
		"transfer, no stamp":    icrc3.MapValue(ts, icrc3.F("tx", tx(op))),
		"btype mint":            icrc3.MapValue(icrc3.F("btype", icrc3.Text("1mint")), ts, icrc3.F("tx", tx(stamp))),
		"approve":               icrc3.MapValue(ts, icrc3.F("tx", tx(icrc3.F("op", icrc3.Text("approve")), icrc3.F("spender", acct(9)), stamp))),
		"unknown op, stamped":   icrc3.MapValue(ts, icrc3.F("tx", tx(icrc3.F("op", icrc3.Text("7zap")), stamp))),
		"unknown btype":         icrc3.MapValue(icrc3.F("btype", icrc3.Text("107feecol")), ts, icrc3.F("tx", tx(stamp))),
		"no tx":                 icrc3.MapValue(ts),
		"no ts":                 icrc3.MapValue(icrc3.F("tx", tx(op, stamp))),
		"tx not a map":          icrc3.MapValue(icrc3.F("btype", icrc3.Text("1xfer")), ts, icrc3.F("tx", icrc3.Text("x"))),
		"two tx":                icrc3.MapValue(ts, icrc3.F("tx", tx(op)), icrc3.F("tx", tx(op, stamp))),
		"two ts":                icrc3.MapValue(ts, ts, icrc3.F("tx", tx(op, stamp))),
		"two stamps":            icrc3.MapValue(ts, icrc3.F("tx", tx(op, stamp, icrc3.F("ts", icrc3.Uint(5))))),
		"stamp an Int":          icrc3.MapValue(ts, icrc3.F("tx", tx(op, icrc3.F("ts", icrc3.IntValue(big.NewInt(5)))))),
		"stamp beyond 64 bits":  icrc3.MapValue(ts, icrc3.F("tx", tx(op, icrc3.F("ts", icrc3.NatValue(mustNat(big65)))))),
		"ts beyond 64 bits":     icrc3.MapValue(icrc3.F("ts", icrc3.NatValue(mustNat(big65))), icrc3.F("tx", tx(op, stamp))),
		"stamp of 2^64-1":       icrc3.MapValue(ts, icrc3.F("tx", tx(op, icrc3.F("ts", icrc3.Uint(^uint64(0)))))),
		"deep value beside":     icrc3.MapValue(ts, icrc3.F("x", deep), icrc3.F("tx", tx(op, stamp))),
		"stamp in a nested map": icrc3.MapValue(ts, icrc3.F("tx", tx(op, icrc3.F("inner", icrc3.MapValue(stamp))))),
		"not a map":             icrc3.ArrayValue(ts.Value),
	}
}

func mustNat(b *big.Int) icrc3.Nat {
	n, err := icrc3.NatFromBig(b)
	if err != nil {
		panic(err)
	}
	return n
}

// checkStampRead holds readStamp to what the block index relies on: where
// it reads a Value, the full parse of that Value finds its ts, and finds
// tx.ts only where readStamp found the same (see stamp.go).
func checkStampRead(t *testing.T, name string, raw []byte) (ok bool) {
	t.Helper()
	r, ok := readStamp(raw)
	if !ok {
		return false
	}
	var h icrc3.Hash
	b, err := icrc3.ParseRawBlock(0, raw, h)
	if err != nil {
		return true // the full parse refuses it: so does the cache
	}
	if b.TS != r.ts {
		t.Errorf("%s: read ts %d, the full parse %d", name, r.ts, b.TS)
	}
	if b.CreatedAt != nil && (!r.hasStamp || r.stamp != *b.CreatedAt) {
		t.Errorf("%s: read stamp %d (%t), the full parse %d", name, r.stamp, r.hasStamp, *b.CreatedAt)
	}
	return true
}

func TestReadStampAgreesWithFullParse(t *testing.T) {
	// Values the walk stores every day must be read without the full parse.
	plain := map[string]bool{"transfer": true, "transfer, no stamp": true, "btype mint": true, "approve": true,
		"unknown op, stamped": true, "unknown btype": true, "no tx": true, "stamp of 2^64-1": true, "stamp in a nested map": true}
	for name, v := range stampValues() {
		raw := icrc3.MarshalValue(v)
		if ok := checkStampRead(t, name, raw); ok != plain[name] {
			t.Errorf("%s: read %t, want %t", name, ok, plain[name])
		}
		// Truncated, extended and re-versioned encodings are malformed.
		for n := range len(raw) {
			if _, ok := readStamp(raw[:n]); ok {
				t.Errorf("%s: read truncated to %d of %d bytes", name, n, len(raw))
			}
		}
		if _, ok := readStamp(append(raw[:len(raw):len(raw)], 0)); ok {
			t.Errorf("%s: read with a byte after the Value", name)
		}
		other := append([]byte{icrc3.ValueCodecV1 + 1}, raw[1:]...)
		if _, ok := readStamp(other); ok {
			t.Errorf("%s: read as format version %d", name, other[0])
		}
	}
	r, _ := readStamp(icrc3.MarshalValue(stampValues()["transfer"]))
	if want := (stampRead{ts: 1791547000000000999, stamp: 1791547000000000123, hasStamp: true}); r != want {
		t.Errorf("transfer read as %+v, want %+v", r, want)
	}
}

func FuzzReadStamp(f *testing.F) {
	for _, v := range stampValues() {
		f.Add(icrc3.MarshalValue(v))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkStampRead(t, "fuzzed", raw) })
}

// A verified block whose Value is stamped though its kind is unknown has
// no stamp (the full parse gives it none): the reader's stamp does not
// refuse it, and it is indexed under none.
func TestPutVerifiedUnknownKindKeepsNoStamp(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	v := stampValues()["unknown btype"]
	raw := icrc3.MarshalValue(v)
	b, err := icrc3.ParseRawBlock(5, raw, v.Hash())
	if err != nil || b.CreatedAt != nil || b.Kind != icrc3.BlockUnknown {
		t.Fatalf("parsed %+v %v, want an unknown kind without a stamp", b, err)
	}
	if err := s.PutVerified(ctx, ledgerA, []icrc3.Block{b}); err != nil {
		t.Fatal(err)
	}
	got, err := s.CachedBlocks(ctx, ledgerA, 5, 6)
	if err != nil || len(got) != 1 || got[0].Stamp != nil {
		t.Fatalf("cached %+v %v, want block 5 without a stamp", got, err)
	}
}
