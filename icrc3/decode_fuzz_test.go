package icrc3

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The fuzz targets are differential: agent-go's generic decoder, mapped onto
// the expected type, must agree with ours. Allowed differences, each checked:
//   - we reject wire types that are not subtypes of the expected type
//     (errWireType); agent-go decodes any well-formed Candid;
//   - we reject known blocks that ParseBlock finds malformed (BlockError):
//     the same block from agent-go must fail ParseBlock too;
//   - we bound nesting (MaxValueDepth) and work on zero-width values;
//   - a func reference's method name is Candid text: we require UTF-8,
//     agent-go does not;
//   - for the legacy `certificate : opt blob`, a wire value of another type
//     reads as null, as Candid's opt rule says.
// agent-go is only run on inputs whose type table we accept and that hold no
// principal, service or future types and no vector of zero-width values: it
// sizes buffers from unchecked lengths in type tables and principals (the
// fuzzer would exhaust memory) and is quadratic on nested zero-width vectors.

func agentSafe(data []byte) bool {
	d := newDecoder(data)
	ref, err := d.readHeader()
	if err != nil || ref == opPrincipal {
		return false
	}
	// agent-go decodes vectors of zero-width values element by element, so
	// nested ones take time quadratic in the input: keep them from it.
	zero := make(map[int64]bool)
	var zeroWidth func(ref int64) bool
	zeroWidth = func(ref int64) bool {
		if ref < 0 {
			return ref == opNull || ref == opReserved
		}
		if z, seen := zero[ref]; seen {
			return z
		}
		zero[ref] = true // a recursive record is taken as zero-width: conservative
		z := d.types[ref].op == opRecord
		if z {
			for _, f := range d.types[ref].fields {
				z = z && zeroWidth(f.typ)
			}
		}
		zero[ref] = z
		return z
	}
	for _, t := range d.types {
		if t.op == opVec && zeroWidth(t.inner) {
			return false
		}
		if t.op == opService || t.op < opPrincipal || t.inner == opPrincipal {
			return false
		}
		if t.op == opRecord || t.op == opVariant {
			for _, f := range t.fields {
				if f.typ == opPrincipal {
					return false
				}
			}
		}
	}
	return true
}

func allowedDifference(err error) bool {
	var be *BlockError
	return errors.Is(err, errWireType) || errors.As(err, &be) ||
		strings.Contains(err.Error(), "nested deeper") || strings.Contains(err.Error(), "work budget") ||
		strings.Contains(err.Error(), "method name is not valid UTF-8")
}

func safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("agent-go panicked: %v", r)
		}
	}()
	return f()
}

func fuzzSeedsGetBlocks(f *testing.F) {
	r := rand.New(rand.NewPCG(21, 22))
	for n := range 4 {
		p := page{logLength: randNat(r), values: randChain(r, 3, n*2), archived: randArchived(r)}
		for i := range p.values {
			p.ids = append(p.ids, 3+uint64(i))
		}
		f.Add(encodeGetBlocks(f, p))
	}
}

func FuzzDecodeGetBlocksResult(f *testing.F) {
	fuzzSeedsGetBlocks(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := DecodeGetBlocksResult(data)
		if !agentSafe(data) {
			if err == nil {
				t.Fatal("decoded a reply whose type table agentSafe rejects")
			}
			return
		}
		var (
			ll   Nat
			ids  []uint64
			vals []Value
			arch []ArchivedBlocks
		)
		agErr := safely(func() (e error) { ll, ids, vals, arch, e = agDecodeGetBlocks(data); return })
		switch {
		case err == nil && agErr != nil:
			t.Fatalf("we decode, agent-go fails: %v", agErr)
		case err != nil && agErr == nil:
			if !allowedDifference(err) {
				t.Fatalf("agent-go decodes, we fail: %v", err)
			}
			var be *BlockError
			if errors.As(err, &be) {
				for i := range vals {
					if ids[i] == be.Index {
						if _, perr := ParseBlock(ids[i], vals[i], vals[i].Hash()); perr == nil {
							t.Fatalf("block %d: our ParseBlock error %v, agent-go's value parses", be.Index, err)
						}
					}
				}
			}
		case err == nil:
			if !res.LogLength.Equal(ll) || len(res.Blocks) != len(vals) || !archivedEqual(res.Archived, arch) {
				t.Fatalf("results differ")
			}
			for i := range vals {
				if res.Blocks[i].Index != ids[i] || !res.Blocks[i].tree().Equal(vals[i]) || res.Blocks[i].Hash != vals[i].Hash() {
					t.Fatalf("block %d differs", i)
				}
			}
		}
	})
}

func FuzzDecodeLegacyGetBlocks(f *testing.F) {
	r := rand.New(rand.NewPCG(23, 24))
	for n := range 4 {
		p := page{first: 9, chainLen: 100, values: randChain(r, 9, n*2), archived: randArchived(r)}
		if n%2 == 1 {
			p.cert = randBytes(r, 8)
		}
		f.Add(encodeLegacy(f, p, n%2 == 0))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := DecodeLegacyGetBlocks(data)
		if !agentSafe(data) {
			if err == nil {
				t.Fatal("decoded a reply whose type table agentSafe rejects")
			}
			return
		}
		var ag *agLegacy
		agErr := safely(func() (e error) { ag, e = agDecodeLegacy(data); return })
		switch {
		case err == nil && agErr != nil:
			t.Fatalf("we decode, agent-go fails: %v", agErr)
		case err != nil && agErr == nil:
			if !allowedDifference(err) {
				t.Fatalf("agent-go decodes, we fail: %v", err)
			}
			var be *BlockError
			if errors.As(err, &be) && be.Index >= ag.first && be.Index-ag.first < uint64(len(ag.vals)) {
				v := ag.vals[be.Index-ag.first]
				if _, perr := ParseBlock(be.Index, v, v.Hash()); perr == nil {
					t.Fatalf("block %d: our ParseBlock error %v, agent-go's value parses", be.Index, err)
				}
			}
		case err == nil:
			if res.FirstIndex != ag.first || res.ChainLength != ag.chainLen || string(res.Certificate) != string(ag.cert) ||
				(res.Certificate == nil) != (ag.cert == nil) || len(res.Blocks) != len(ag.vals) || len(res.Archived) != len(ag.arch) {
				t.Fatalf("results differ")
			}
			for i := range ag.vals {
				if res.Blocks[i].Index != ag.first+uint64(i) || !res.Blocks[i].tree().Equal(ag.vals[i]) || res.Blocks[i].Hash != ag.vals[i].Hash() {
					t.Fatalf("block %d differs", i)
				}
			}
			for i := range ag.arch {
				a, b := res.Archived[i], ag.arch[i]
				if a.Start != b.Start || a.Length != b.Length || a.Callback.Method != b.Callback.Method || string(a.Callback.Canister.Raw) != string(b.Callback.Canister.Raw) {
					t.Fatalf("archived %d differs", i)
				}
			}
		}
	})
}
