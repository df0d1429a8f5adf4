package icrc3

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// The page decoders read blocks straight into their encoding (rawValue,
// rawParser); the tree-building reader (value, ParseBlock) they replaced is
// kept as their oracle. These tests and fuzz targets hold the two to the
// same output on the same bytes: the same blocks (encoding, hash, every
// parsed field), the same archive pointers, the same errors.

// tree decodes a block's Value for comparisons.
func (b Block) tree() Value {
	v, err := b.Value()
	if err != nil {
		panic(err)
	}
	return v
}

func treeDecoder(b []byte) *decoder {
	d := newDecoder(bytes.Clone(b))
	d.tree = true
	return d
}

// The tree reader as the page decoders used it, for the benchmarks: the
// blocks' Values stay trees (Raw unset).
func decodeGetBlocksTree(b []byte) (*GetBlocksResult, error) { return treeDecoder(b).getBlocksResult() }

func decodeLegacyTree(b []byte) (*LegacyGetBlocksResult, error) {
	return treeDecoder(b).legacyGetBlocks()
}

// The oracle: the tree reader with each block's Raw set from its tree.
func oracle[R any](b []byte, read func(*decoder) (R, error), blocks func(R) []Block) (R, error) {
	d := treeDecoder(b)
	res, err := read(d)
	if err != nil {
		var zero R
		return zero, err
	}
	return res, encodeTrees(blocks(res), d.trees)
}

func oracleGetBlocks(b []byte) (*GetBlocksResult, error) {
	return oracle(b, (*decoder).getBlocksResult, func(r *GetBlocksResult) []Block { return r.Blocks })
}

func oracleLegacy(b []byte) (*LegacyGetBlocksResult, error) {
	return oracle(b, (*decoder).legacyGetBlocks, func(r *LegacyGetBlocksResult) []Block { return r.Blocks })
}

func oracleLegacyRange(b []byte, first uint64) ([]Block, error) {
	read := func(d *decoder) ([]Block, error) { return d.legacyBlockRange(first) }
	return oracle(b, read, func(bl []Block) []Block { return bl })
}

func encodeTrees(blocks []Block, trees []Value) error {
	if len(blocks) != len(trees) {
		return fmt.Errorf("%d blocks, %d trees", len(blocks), len(trees))
	}
	for i := range blocks {
		blocks[i].Raw = MarshalValue(trees[i])
	}
	return nil
}

// outcomes tallies what the comparisons met, so a test can insist it
// compared successes, malformed blocks and malformed Candid alike.
type outcomes map[string]int

func (o outcomes) add(err error) {
	var be *BlockError
	switch {
	case err == nil:
		o["decoded"]++
	case errors.As(err, &be):
		o["block error"]++
	default:
		o["other error"]++
	}
}

func (o outcomes) require(t *testing.T, kinds ...string) {
	t.Helper()
	for _, k := range kinds {
		if o[k] == 0 {
			t.Fatalf("no comparison ended %q: %v", k, o)
		}
	}
}

// sameOutcome fails unless both readers failed with the same error or
// both succeeded with deeply equal results.
func sameOutcome(t *testing.T, got, want any, err, wantErr error) {
	t.Helper()
	seen.add(err)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("raw reader error %v, tree reader error %v", err, wantErr)
	case err != nil:
		if err.Error() != wantErr.Error() {
			t.Fatalf("errors differ:\n raw  %v\n tree %v", err, wantErr)
		}
		var be, wbe *BlockError
		if errors.As(err, &be) != errors.As(wantErr, &wbe) || errWireTypeIs(err) != errWireTypeIs(wantErr) {
			t.Fatalf("error classes differ: %v / %v", err, wantErr)
		}
	case !reflect.DeepEqual(got, want):
		t.Fatalf("results differ:\n raw  %+v\n tree %+v", got, want)
	}
}

// seen tallies every comparison of the package's tests (they run one at
// a time: none of them is parallel).
var seen = outcomes{}

func errWireTypeIs(err error) bool { return errors.Is(err, errWireType) }

func checkGetBlocksReaders(t *testing.T, data []byte) {
	t.Helper()
	got, err := DecodeGetBlocksResult(data)
	want, wantErr := oracleGetBlocks(data)
	if wantErr != nil {
		// The public function wraps the reader's error.
		wantErr = fmt.Errorf("icrc3: decode icrc3_get_blocks reply: %w", wantErr)
	}
	sameOutcome(t, got, want, err, wantErr)
}

func checkLegacyReaders(t *testing.T, data []byte) {
	t.Helper()
	got, err := DecodeLegacyGetBlocks(data)
	want, wantErr := oracleLegacy(data)
	if wantErr != nil {
		wantErr = fmt.Errorf("icrc3: decode get_blocks reply: %w", wantErr)
	}
	sameOutcome(t, got, want, err, wantErr)
}

func checkLegacyRangeReaders(t *testing.T, data []byte, first uint64) {
	t.Helper()
	got, err := newDecoder(data).legacyBlockRange(first)
	want, wantErr := oracleLegacyRange(data, first)
	sameOutcome(t, got, want, err, wantErr)
}

// mutate flips, drops or inserts a few bytes, so the readers also meet
// near-valid replies (malformed blocks, broken Candid) and not only the
// well-formed pages the generators write.
func mutate(r *rand.Rand, b []byte) []byte {
	b = append([]byte(nil), b...)
	for range 1 + r.IntN(3) {
		if len(b) == 0 {
			break
		}
		i := r.IntN(len(b))
		switch r.IntN(3) {
		case 0:
			b[i] ^= byte(1 << r.IntN(8))
		case 1:
			b = append(b[:i], b[i+1:]...)
		default:
			b = append(b[:i], append([]byte{byte(r.UintN(256))}, b[i:]...)...)
		}
	}
	return b
}

func TestRawReaderMatchesTreeReader(t *testing.T) {
	clear(seen)
	defer seen.require(t, "decoded", "block error", "other error")
	r := rand.New(rand.NewPCG(31, 32))
	for n := range 300 {
		p := page{logLength: randNat(r), values: randChain(r, 5, n%12), archived: randArchived(r)}
		for i := range p.values {
			p.ids = append(p.ids, 5+uint64(i))
		}
		gb := encodeGetBlocks(t, p)
		p.first, p.chainLen = 5, 5+uint64(len(p.values))
		if n%3 == 0 {
			p.cert = randBytes(r, 8)
		}
		lg := encodeLegacy(t, p, n%2 == 0)
		checkGetBlocksReaders(t, gb)
		checkLegacyReaders(t, lg)
		for range 8 {
			checkGetBlocksReaders(t, mutate(r, gb))
			checkLegacyReaders(t, mutate(r, lg))
		}
	}
	for _, extra := range []bool{false, true} {
		for _, overlong := range []bool{false, true} {
			b := legacyBlockRangeCustom(t, extra, overlong)
			checkLegacyRangeReaders(t, b, 7)
			for range 50 {
				checkLegacyRangeReaders(t, mutate(r, b), 7)
			}
		}
	}
}

// TestRawReaderMatchesOnMalformedBlocks puts every kind of malformed block
// the parser knows through both readers.
func TestRawReaderMatchesOnMalformedBlocks(t *testing.T) {
	clear(seen)
	defer seen.require(t, "decoded", "block error")
	for _, tc := range malformedBlocks() {
		p := page{logLength: NatFromUint64(9), ids: []uint64{3}, values: []Value{tc}}
		checkGetBlocksReaders(t, encodeGetBlocks(t, p))
		p.first, p.chainLen = 3, 4
		checkLegacyReaders(t, encodeLegacy(t, p, false))
		checkLegacyReaders(t, encodeLegacy(t, p, true))
	}
}

// malformedBlocks are blocks ParseBlock refuses (or reads as unknown), one
// per rule.
func malformedBlocks() []Value {
	acct := ArrayValue(Blob([]byte{1, 2}))
	tx := func(fs ...Field) Field {
		return F("tx", MapValue(append([]Field{F("op", Text("xfer")), F("amt", Uint(1)), F("from", acct), F("to", acct)}, fs...)...))
	}
	ts := F("ts", Uint(1))
	big := NatValue(func() Nat { n, _ := ParseNat("340282366920938463463374607431768211456"); return n }())
	return []Value{
		Blob([]byte{1}),
		ArrayValue(),
		MapValue(ts, ts, tx()),
		MapValue(F("phash", Blob([]byte{1})), ts, tx()),
		MapValue(F("phash", Text("x")), ts, tx()),
		MapValue(F("ts", big), tx()),
		MapValue(F("ts", Text("soon")), tx()),
		MapValue(ts, F("btype", Uint(1)), tx()),
		MapValue(ts, F("tx", Uint(3))),
		MapValue(ts, F("btype", Text("1xfer")), F("tx", Uint(3))),
		MapValue(ts, F("btype", Text("9odd")), F("tx", Uint(3))),
		MapValue(ts, F("tx", MapValue(F("op", Text("xfer")), F("op", Text("mint"))))),
		MapValue(ts, F("tx", MapValue(F("op", Uint(1))))),
		MapValue(ts, F("tx", MapValue(F("op", Text("xfer")), F("spender", acct), F("spender", acct)))),
		MapValue(ts, F("tx", MapValue(F("op", Text("odd")), F("amt", Text("x"))))),
		MapValue(ts, F("x", Uint(1)), F("x", Uint(2)), tx()),
		MapValue(ts, tx(F("memo", Blob(nil)), F("memo", Blob(nil)))),
		MapValue(tx()),
		MapValue(ts, F("fee", Text("ten")), tx()),
		MapValue(ts, F("fee", Uint(10)), tx()),
		MapValue(ts, F("btype", Text("1mint"))),
		MapValue(ts, F("btype", Text("1mint")), F("tx", Blob(nil))),
		MapValue(ts, tx(F("memo", Text("m")))),
		MapValue(ts, tx(F("fee", Text("f")))),
		MapValue(ts, tx(F("ts", big))),
		MapValue(ts, tx(F("expires_at", Text("e")))),
		MapValue(ts, tx(F("expected_allowance", IntValue(big.Nat.Big())))),
		MapValue(ts, F("tx", MapValue(F("op", Text("xfer")), F("amt", Uint(1)), F("from", Blob(nil)), F("to", acct)))),
		MapValue(ts, F("tx", MapValue(F("op", Text("xfer")), F("amt", Uint(1)), F("from", ArrayValue()), F("to", acct)))),
		MapValue(ts, F("tx", MapValue(F("op", Text("xfer")), F("amt", Uint(1)), F("from", ArrayValue(Text("o"))), F("to", acct)))),
		MapValue(ts, F("tx", MapValue(F("op", Text("xfer")), F("amt", Uint(1)), F("from", ArrayValue(Blob(make([]byte, 30)))), F("to", acct)))),
		MapValue(ts, F("tx", MapValue(F("op", Text("xfer")), F("amt", Uint(1)), F("from", ArrayValue(Blob(nil), Blob(make([]byte, 31)))), F("to", acct)))),
		MapValue(ts, F("tx", MapValue(F("op", Text("xfer")), F("amt", Uint(1)), F("from", ArrayValue(Blob(nil), Blob(nil), Blob(nil))), F("to", acct)))),
		MapValue(ts, F("tx", MapValue(F("op", Text("xfer")), F("from", acct), F("to", acct)))),
		MapValue(ts, F("tx", MapValue(F("op", Text("xfer")), F("amt", Uint(1)), F("to", acct)))),
		MapValue(ts, F("tx", MapValue(F("op", Text("xfer")), F("amt", Uint(1)), F("from", acct)))),
		MapValue(ts, F("tx", MapValue(F("op", Text("mint")), F("amt", Uint(1))))),
		MapValue(ts, F("tx", MapValue(F("op", Text("burn")), F("amt", Uint(1))))),
		MapValue(ts, F("tx", MapValue(F("op", Text("approve")), F("amt", Uint(1)), F("from", acct)))),
		MapValue(ts, F("tx", MapValue(F("op", Text("approve")), F("amt", Uint(1)), F("spender", acct)))),
		MapValue(ts, F("btype", Text("2approve")), F("tx", MapValue(F("amt", Uint(1)), F("from", acct), F("spender", acct), F("memo", Blob([]byte{}))))),
	}
}

// TestParseRawBlockMatchesParseBlock checks the store's entry point on the
// same blocks, and on encodings UnmarshalValue refuses.
func TestParseRawBlockMatchesParseBlock(t *testing.T) {
	clear(seen)
	defer seen.require(t, "decoded", "block error")
	r := rand.New(rand.NewPCG(33, 34))
	vals := malformedBlocks()
	vals = append(vals, randChain(r, 0, 200)...)
	for i, v := range vals {
		raw := MarshalValue(v)
		checkParseRaw(t, uint64(i), raw)
		for range 5 {
			checkParseRaw(t, uint64(i), mutate(r, raw))
		}
	}
}

func checkParseRaw(t *testing.T, index uint64, raw []byte) {
	t.Helper()
	got, err := ParseRawBlock(index, raw, Hash{7})
	v, uerr := UnmarshalValue(raw)
	if uerr != nil {
		if err == nil {
			t.Fatalf("ParseRawBlock accepts an encoding UnmarshalValue refuses (%v)", uerr)
		}
		return
	}
	want, wantErr := ParseBlock(index, v, Hash{7})
	if wantErr == nil {
		// ParseBlock re-encodes the tree; the raw reader keeps the input,
		// which may differ only in the form of its numbers and lengths.
		if !reflect.DeepEqual(MarshalValue(v), want.Raw) {
			t.Fatal("ParseBlock's encoding differs from MarshalValue")
		}
		want.Raw = raw
	}
	sameOutcome(t, got, want, err, wantErr)
}

func FuzzRawReaderGetBlocks(f *testing.F) {
	fuzzSeedsGetBlocks(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkGetBlocksReaders(t, data) })
}

func FuzzRawReaderLegacy(f *testing.F) {
	r := rand.New(rand.NewPCG(35, 36))
	for n := range 4 {
		p := page{first: 9, chainLen: 100, values: randChain(r, 9, n*2), archived: randArchived(r)}
		f.Add(encodeLegacy(f, p, n%2 == 0))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkLegacyReaders(t, data) })
}

func FuzzParseRawBlock(f *testing.F) {
	r := rand.New(rand.NewPCG(37, 38))
	for _, v := range append(malformedBlocks(), randChain(r, 0, 4)...) {
		f.Add(MarshalValue(v))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkParseRaw(t, 3, data) })
}

// TestRawReaderRepeatedKeysAmongBlocks puts blocks with repeated keys
// (refused, or unknown and kept) among well-formed ones, before and after
// them, through both readers: the page decoders skip the duplicate checks
// of a block whose keys they saw to be distinct, and a flag carried to the
// wrong block would let a repeated key through.
func TestRawReaderRepeatedKeysAmongBlocks(t *testing.T) {
	clear(seen)
	defer seen.require(t, "decoded", "block error")
	r := rand.New(rand.NewPCG(39, 40))
	acct := ArrayValue(Blob([]byte{1, 2}))
	xfer := func(extra ...Field) Value {
		return MapValue(F("ts", Uint(1)), F("tx", MapValue(append([]Field{F("op", Text("xfer")), F("amt", Uint(1)), F("from", acct), F("to", acct)}, extra...)...)))
	}
	repeats := []Value{
		MapValue(F("ts", Uint(1)), F("ts", Uint(2)), F("tx", xfer().Map[1].Value)),
		xfer(F("to", acct)),
		xfer(F("op", Text("mint"))),
		xfer(F("spender", acct), F("spender", acct)),
		xfer(F("memo", Blob(nil)), F("memo", Blob([]byte{1}))),
		MapValue(F("btype", Text("9x")), F("a", Uint(1)), F("a", Uint(2))),
		MapValue(F("btype", Text("9x")), F("tx", MapValue(F("op", Text("odd")), F("k", Uint(1)), F("k", Uint(1))))),
		// Repeats deeper down, or in another Map, are no duplicate.
		MapValue(F("ts", Uint(1)), F("extra", MapValue(F("k", Uint(1)), F("k", Uint(2)))), F("tx", xfer().Map[1].Value)),
		MapValue(F("ts", Uint(1)), F("tx", MapValue(append(xfer().Map[1].Value.Map, F("memo", Blob(nil)), F("deep", MapValue(F("k", Uint(1)), F("k", Uint(1)))))...))),
	}
	for _, rep := range repeats {
		good := randChain(r, 0, 3)
		for _, vals := range [][]Value{
			{good[0], good[1], rep},
			{rep, good[2]},
			{good[0], rep, good[1], rep},
		} {
			checkPageReaders(t, vals, 10, 100)
		}
	}
}

// TestRawReaderShortLeavesInWideValues puts Arrays and Maps of many
// leaves (blobs, texts and numbers, most short enough for the one-load
// hash), nested and side by side, through both readers: wide containers
// outgrow the raw reader's scratch and its kept pair orders, and the
// tree reader hashes every leaf the plain way.
func TestRawReaderShortLeavesInWideValues(t *testing.T) {
	clear(seen)
	defer seen.require(t, "decoded")
	r := rand.New(rand.NewPCG(45, 46))
	leaf := func() Value {
		switch r.IntN(4) {
		case 0:
			return Blob(randBytes(r, r.IntN(60)))
		case 1:
			return Text(strings.Repeat("t", 17+r.IntN(40)))
		case 2:
			return Uint(r.Uint64())
		}
		return NatValue(randNat(r))
	}
	var value func(depth int) Value
	value = func(depth int) Value {
		if depth > 3 || r.IntN(3) == 0 {
			return leaf()
		}
		n := r.IntN(20)
		if r.IntN(2) == 0 {
			vs := make([]Value, n)
			for i := range vs {
				vs[i] = value(depth + 1)
			}
			return ArrayValue(vs...)
		}
		// Distinct keys from a small pool, in a random order: Maps of one
		// size with other keys, or the same keys in another order.
		fs := make([]Field, n)
		for i, k := range r.Perm(24)[:n] {
			fs[i] = F(fmt.Sprintf("k%d", k), value(depth+1))
		}
		return MapValue(fs...)
	}
	for round := range 30 {
		vals := make([]Value, 1+r.IntN(4))
		for i := range vals {
			vals[i] = value(0)
			if vals[i].Kind != KindMap {
				vals[i] = MapValue(F("a", value(1)), F("b", leaf()), F("c", value(1)), F("d", leaf()))
			}
		}
		p := page{logLength: NatFromUint64(100), values: vals}
		for i := range vals {
			p.ids = append(p.ids, uint64(round*10+i))
		}
		checkGetBlocksReaders(t, encodeGetBlocks(t, p))
		p.first, p.chainLen = uint64(round*10), uint64(round*10+len(vals))
		checkLegacyReaders(t, encodeLegacy(t, p, round%2 == 0))
	}
}

// TestRawReaderHashesAcrossFlushes reads pages long enough that the raw
// reader runs its queued hashes many times, in the lanes and one by one:
// every hashFlushBlocks blocks, before the page's slice of blocks grows
// past its first 2048, and within a block whose repeated key needs its
// values hashed at once. A sum written to a slot of the wrong block, or
// read before its children were run, is a block hash the tree reader does
// not give.
func TestRawReaderHashesAcrossFlushes(t *testing.T) {
	bothSHA256Paths(t, testRawReaderHashesAcrossFlushes)
}

func testRawReaderHashesAcrossFlushes(t *testing.T) {
	clear(seen)
	defer seen.require(t, "decoded")
	r := rand.New(rand.NewPCG(47, 48))
	vals := randChain(r, 0, 2100)
	acct := ArrayValue(Blob([]byte{1, 2}), Blob(randBytes(r, 32)))
	for _, i := range []int{5, 63, 64, 65, 700, 2047, 2048, 2099} {
		// Repeated keys deeper than the block's own Maps are no duplicate,
		// so the block decodes, but its Map is hashed as it is read.
		fs := append([]Field(nil), vals[i].Map...)
		vals[i] = MapValue(append(fs, F("x", MapValue(F("k", acct), F("k", Uint(2)), F("j", Blob(randBytes(r, 40))))))...)
	}
	checkPageReaders(t, vals, 100, 5000)
}

// checkPageReaders holds both readers to each other on vals as blocks
// from first on, in an icrc3_get_blocks page and in legacy pages of both
// layouts.
func checkPageReaders(t *testing.T, vals []Value, first, logLength uint64) {
	t.Helper()
	p := page{logLength: NatFromUint64(logLength), values: vals}
	for i := range vals {
		p.ids = append(p.ids, first+uint64(i))
	}
	checkGetBlocksReaders(t, encodeGetBlocks(t, p))
	p.first, p.chainLen = first, first+uint64(len(vals))
	checkLegacyReaders(t, encodeLegacy(t, p, false))
	checkLegacyReaders(t, encodeLegacy(t, p, true))
}

// TestRawReaderClaimedCountsCostNoMemory gives the raw reader Maps nested
// 62 deep, each claiming 200,000 pairs (as many as the megabyte of zeros
// after them could hold) and holding one: a reader that reserved its
// hash slots for the claimed count would reserve 62 × 200,000 pairs'
// slots before failing at the end of the input.
func TestRawReaderClaimedCountsCostNoMemory(t *testing.T) {
	v := Uint(0)
	for range 62 {
		v = MapValue(F("", v))
	}
	enc := encodeBlockRange(t, []Value{v})
	// Each level is the Map's variant tag, a count of 1 and the empty key.
	at := -1
	for i := 0; i+3*62 <= len(enc) && at < 0; i++ {
		at = i
		for k := range 62 {
			if enc[i+3*k] != enc[i] || enc[i+3*k+1] != 1 || enc[i+3*k+2] != 0 {
				at = -1
				break
			}
		}
	}
	if at < 0 {
		t.Fatal("no 62 nested one-pair Maps in the encoding")
	}
	tag := enc[at]
	hostile := append([]byte(nil), enc[:at]...)
	for range 62 {
		hostile = append(hostile, tag, 0xc0, 0x9a, 0x0c, 0) // 200,000 pairs, then the empty key
	}
	hostile = append(hostile, enc[at+3*62:]...)
	hostile = append(hostile, make([]byte, 1<<20)...)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := newDecoder(hostile).legacyBlockRange(0)
	runtime.ReadMemStats(&after)
	// The tree reader fails the same way, but it too builds each Map for
	// its claimed count (1.5 GB here): it is an oracle, not a reader of
	// untrusted replies.
	if err == nil || !strings.HasSuffix(err.Error(), ": unexpected end of input") {
		t.Fatalf("error %v, want the end of the input", err)
	}
	// What it reads, some 330,000 pairs, takes about 270 MB with the
	// arena's growth (the reader before the hash queue took as much);
	// slots for the claimed counts took 4 GB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<30 {
		t.Fatalf("reading %d bytes allocated %d MB", len(hostile), got>>20)
	}
}
