package icrc3

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aviate-labs/agent-go/principal"
)

// FixtureBlock is one example block of a newer ICRC standard, transcribed
// from testdata/newer-blocks.
type FixtureBlock struct {
	Name  string // "ICRC-107 example 1"
	BType string // the btype the standard gives it
	Value Value
}

// fixtureFiles are the standards whose example blocks are in testdata.
var fixtureFiles = []string{"107", "122", "123", "124", "152", "153", "154"}

// FixtureBlocks reads every example block of the newer standards. The
// files are Candid-like text with the standards' typos (stray braces,
// comments), so each `## example` section is read by a tolerant reader up
// to the end of its first value.
func FixtureBlocks(t testing.TB) []FixtureBlock {
	t.Helper()
	var out []FixtureBlock
	for _, std := range fixtureFiles {
		raw, err := os.ReadFile(filepath.Join("testdata", "newer-blocks", "ICRC-"+std+"_example_blocks.candid.txt"))
		if err != nil {
			t.Fatal(err)
		}
		sections := strings.Split(string(raw), "\n## example ")
		for _, s := range sections[1:] {
			n, body, _ := strings.Cut(s, "\n")
			r := &fixtureReader{s: body}
			v, err := r.value()
			if err != nil {
				t.Fatalf("ICRC-%s example %s: %v (at %q)", std, n, err, r.rest())
			}
			bt, _ := v.Get("btype")
			out = append(out, FixtureBlock{Name: "ICRC-" + std + " example " + n, BType: bt.Text(), Value: v})
		}
	}
	if len(out) != 24 {
		t.Fatalf("read %d example blocks, want the 24 of the files", len(out))
	}
	return out
}

type fixtureReader struct {
	s   string
	pos int
}

func (r *fixtureReader) rest() string { return r.s[r.pos:min(len(r.s), r.pos+40)] }

// next returns the next token: punctuation, a quoted string (with its
// quotes) or a word; comments and blank space are skipped.
func (r *fixtureReader) next() (string, error) {
	for r.pos < len(r.s) {
		c := r.s[r.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			r.pos++
		case strings.HasPrefix(r.s[r.pos:], "\u00a0"): // the standards' text has no-break spaces
			r.pos += len("\u00a0")
		case strings.HasPrefix(r.s[r.pos:], "//"):
			if i := strings.IndexByte(r.s[r.pos:], '\n'); i >= 0 {
				r.pos += i
			} else {
				r.pos = len(r.s)
			}
		case strings.ContainsRune("{};=:", rune(c)):
			r.pos++
			return string(c), nil
		case c == '"':
			start := r.pos
			for r.pos++; r.pos < len(r.s) && r.s[r.pos] != '"'; r.pos++ {
				if r.s[r.pos] == '\\' {
					r.pos++
				}
			}
			r.pos++
			return r.s[start:min(r.pos, len(r.s))], nil
		default:
			start := r.pos
			for r.pos < len(r.s) && (isWordByte(r.s[r.pos])) {
				r.pos++
			}
			if r.pos == start {
				return "", fmt.Errorf("unexpected %q", c)
			}
			return r.s[start:r.pos], nil
		}
	}
	return "", fmt.Errorf("unexpected end")
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (r *fixtureReader) expect(want string) error {
	tok, err := r.next()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("got %q, want %q", tok, want)
	}
	return nil
}

// peek reports whether the next token is tok, consuming it if so.
func (r *fixtureReader) skip(tok string) bool {
	save := r.pos
	if t, err := r.next(); err == nil && t == tok {
		return true
	}
	r.pos = save
	return false
}

// value reads `variant { Kind = payload }`.
func (r *fixtureReader) value() (Value, error) {
	if err := r.expect("variant"); err != nil {
		return Value{}, err
	}
	if err := r.expect("{"); err != nil {
		return Value{}, err
	}
	kind, err := r.next()
	if err != nil {
		return Value{}, err
	}
	if err := r.expect("="); err != nil {
		return Value{}, err
	}
	var v Value
	switch kind {
	case "Text":
		s, err := r.str()
		if err != nil {
			return v, err
		}
		v = Text(string(s))
	case "Blob":
		if err := r.expect("blob"); err != nil {
			return v, err
		}
		b, err := r.str()
		if err != nil {
			return v, err
		}
		v = Blob(b)
	case "Nat":
		tok, err := r.next()
		if err != nil {
			return v, err
		}
		n, err := ParseNat(strings.ReplaceAll(tok, "_", ""))
		if err != nil {
			return v, err
		}
		if r.skip(":") {
			if err := r.expect("nat"); err != nil {
				return v, err
			}
		}
		v = NatValue(n)
	case "Array", "Map":
		if err := r.expect("vec"); err != nil {
			return v, err
		}
		if err := r.expect("{"); err != nil {
			return v, err
		}
		v = Value{Kind: KindArray}
		if kind == "Map" {
			v = Value{Kind: KindMap}
		}
		for !r.skip("}") {
			if kind == "Array" {
				e, err := r.value()
				if err != nil {
					return v, err
				}
				v.Array = append(v.Array, e)
			} else {
				if err := r.expect("record"); err != nil {
					return v, err
				}
				if err := r.expect("{"); err != nil {
					return v, err
				}
				k, err := r.str()
				if err != nil {
					return v, err
				}
				if err := r.expect(";"); err != nil {
					return v, err
				}
				e, err := r.value()
				if err != nil {
					return v, err
				}
				r.skip(";")
				if err := r.expect("}"); err != nil {
					return v, err
				}
				v.Map = append(v.Map, F(string(k), e))
			}
			r.skip(";")
		}
	default:
		return v, fmt.Errorf("value kind %q", kind)
	}
	r.skip(";")
	return v, r.expect("}")
}

// str reads a quoted string: `\hh` is a byte in hex, `\"` and `\\` the
// character, anything else itself.
func (r *fixtureReader) str() ([]byte, error) {
	tok, err := r.next()
	if err != nil {
		return nil, err
	}
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return nil, fmt.Errorf("got %q, want a string", tok)
	}
	s := tok[1 : len(tok)-1]
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b = append(b, s[i])
			continue
		}
		if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			var x byte
			fmt.Sscanf(s[i+1:i+3], "%02x", &x)
			b = append(b, x)
			i += 2
			continue
		}
		b = append(b, s[i+1])
		i++
	}
	return b, nil
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// withPHash is v with its phash replaced (or, given nil, removed).
func withPHash(v Value, h *Hash) Value {
	out := Value{Kind: KindMap}
	for _, f := range v.Map {
		if f.Key != "phash" {
			out.Map = append(out.Map, f)
		}
	}
	if h != nil {
		out.Map = append(out.Map, F("phash", Blob(h[:])))
	}
	return out
}

// The standards' example blocks of the newer types (fee collector, mint
// and burn by privileged methods, freezes, pause) are hashed alike by the
// decoder and by Value.Hash, parsed as blocks of unknown kind, and refused
// when their phash is not 32 bytes.
func TestNewerBlockTypesHashAndParse(t *testing.T) {
	for i, fb := range FixtureBlocks(t) {
		t.Run(fb.Name, func(t *testing.T) {
			// ICRC-152..154 are the methods whose blocks ICRC-122..124 define.
			std := fb.Name[len("ICRC-") : len("ICRC-")+3]
			if want := map[string]string{"152": "122", "153": "123", "154": "124"}[std]; want != "" {
				std = want
			}
			if !strings.HasPrefix(fb.BType, std) {
				t.Errorf("btype %q is not one of ICRC-%s's", fb.BType, std)
			}
			want := fb.Value.Hash()
			enc := encodeGetBlocks(t, page{logLength: NatFromUint64(uint64(i + 1)), ids: []uint64{uint64(i)}, values: []Value{fb.Value}})
			res, decErr := DecodeGetBlocksResult(enc)
			b, err := ParseBlock(uint64(i), fb.Value, want)
			ph, _ := fb.Value.Get("phash")
			if len(ph.Bytes) != 32 {
				// ICRC-124 example 2: a 31-byte phash cannot link a chain.
				var be *BlockError
				if err == nil || !asBlockError(err, &be) || be.Field != "phash" {
					t.Fatalf("%d-byte phash: ParseBlock = %v, want a phash BlockError", len(ph.Bytes), err)
				}
				if decErr == nil {
					t.Fatal("a reply holding it decoded: a page is trusted only whole")
				}
				return
			}
			if err != nil || decErr != nil {
				t.Fatalf("parse %v, decode %v", err, decErr)
			}
			if got := res.Blocks[0].Hash; got != want {
				t.Fatalf("hash while decoding %s, Value.Hash %s", got, want)
			}
			if b.Kind != BlockUnknown || res.Blocks[0].Kind != BlockUnknown || b.BType != fb.BType {
				t.Fatalf("kind %q btype %q: want an unknown kind with btype %q", b.Kind, b.BType, fb.BType)
			}
			if b.CreatedAt != nil || b.From != nil || b.To != nil || b.Amount != nil {
				t.Fatalf("an unknown block exposes transfer fields: %+v", b)
			}
			if b.PHash == nil || *b.PHash != Hash(ph.Bytes) || b.TS == 0 {
				t.Fatalf("phash %v ts %d", b.PHash, b.TS)
			}
		})
	}
}

func asBlockError(err error, be **BlockError) bool {
	e, ok := err.(*BlockError)
	*be = e
	return ok
}

// A chain through every valid example block (each re-linked to the one
// before) verifies from a certified tip down to block 0; changing any of
// them breaks it there.
func TestNewerBlockTypesChain(t *testing.T) {
	mintTo := ArrayValue(Blob(principal.AnonymousID.Raw))
	vals := []Value{MapValue(F("btype", Text("1mint")), F("ts", Uint(1)),
		F("tx", MapValue(F("to", mintTo), F("amt", Uint(5)))))}
	for _, fb := range FixtureBlocks(t) {
		if ph, _ := fb.Value.Get("phash"); len(ph.Bytes) != 32 {
			continue
		}
		h := vals[len(vals)-1].Hash()
		vals = append(vals, withPHash(fb.Value, &h))
	}
	h := vals[len(vals)-1].Hash()
	vals = append(vals, MapValue(F("btype", Text("1xfer")), F("phash", Blob(h[:])), F("ts", Uint(2_000_000_000_000_000_000)),
		F("tx", MapValue(F("from", mintTo), F("to", mintTo), F("amt", Uint(1))))))
	ids := make([]uint64, len(vals))
	for i := range ids {
		ids[i] = uint64(i)
	}
	decode := func(vs []Value) []Block {
		t.Helper()
		res, err := DecodeGetBlocksResult(encodeGetBlocks(t, page{logLength: NatFromUint64(uint64(len(vs))), ids: ids, values: vs}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Blocks
	}
	blocks := decode(vals)
	tip := Anchor{Index: uint64(len(vals) - 1), Hash: blocks[len(blocks)-1].Hash}
	v := NewVerifier(tip)
	if err := v.PushPage(blocks); err != nil || !v.Done() || v.Checked() != uint64(len(vals)) {
		t.Fatalf("chain through the newer block types: %v (done %t, %d checked)", err, v.Done(), v.Checked())
	}
	for i := 1; i < len(vals)-1; i++ {
		changed := append([]Value(nil), vals...)
		m := append([]Field(nil), vals[i].Map...)
		m = append(m, F("extra", Text("x")))
		changed[i] = Value{Kind: KindMap, Map: m}
		v := NewVerifier(tip)
		wantChainBreak(t, v.PushPage(decode(changed)), uint64(i))
	}
}
