package matcher

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// parseJSONRef is the parser parseJSON replaced, on encoding/json's
// tokenizer: the reference the scanner must agree with.
func parseJSONRef(data []byte) (*jsonValue, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValueRef(dec, "")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func readValueRef(dec *json.Decoder, path string) (*jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("unexpected end of JSON")
		}
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &jsonValue{kind: jsonNull}, nil
	case bool:
		return &jsonValue{kind: jsonBool}, nil
	case string:
		return &jsonValue{kind: jsonString, str: t}, nil
	case json.Number:
		return &jsonValue{kind: jsonNumber, str: string(t)}, nil
	case json.Delim:
		switch t {
		case '{':
			v := &jsonValue{kind: jsonObject, obj: map[string]*jsonValue{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				p := k
				if path != "" {
					p = path + "." + k
				}
				if _, dup := v.obj[k]; dup {
					return nil, &dupKeyError{path: p}
				}
				child, err := readValueRef(dec, p)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k)
				v.obj[k] = child
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			return v, nil
		case '[':
			// No intent field is an array; the elements are read only to
			// find syntax errors and duplicate keys inside them.
			for dec.More() {
				if _, err := readValueRef(dec, path+"[]"); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return &jsonValue{kind: jsonArray}, nil
		}
	}
	return nil, errors.New("unexpected JSON token")
}

// sameJSON reports where two trees differ ("" when they do not).
func sameJSON(a, b *jsonValue, path string) string {
	if a.kind != b.kind || a.str != b.str || len(a.keys) != len(b.keys) {
		return fmt.Sprintf("%s: %s %q %q, want %s %q %q", path, a.kind, a.str, a.keys, b.kind, b.str, b.keys)
	}
	for i, k := range a.keys {
		if b.keys[i] != k {
			return fmt.Sprintf("%s: keys %q, want %q", path, a.keys, b.keys)
		}
		if d := sameJSON(a.obj[k], b.obj[k], path+"."+k); d != "" {
			return d
		}
	}
	return ""
}

// agreeWithReference fails t unless parseJSON and the reference read data
// alike: the same tree, or both a refusal (the same duplicate key's path
// when the reference names one).
func agreeWithReference(t *testing.T, data []byte) {
	t.Helper()
	got, err := parseJSON(data)
	want, werr := parseJSONRef(data)
	switch {
	case (err == nil) != (werr == nil):
		t.Fatalf("%q: parseJSON error %v, reference %v", data, err, werr)
	case err != nil:
		var d1, d2 *dupKeyError
		if errors.As(werr, &d2) && (!errors.As(err, &d1) || d1.path != d2.path) {
			t.Fatalf("%q: parseJSON error %v, reference %v", data, err, werr)
		}
	default:
		if d := sameJSON(got, want, "$"); d != "" {
			t.Fatalf("%q: %s", data, d)
		}
	}
}

func FuzzParseJSONMatchesReference(f *testing.F) {
	paths, _ := filepath.Glob("../testdata/intents/*.json")
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	for _, s := range jsonEdgeCases {
		f.Add([]byte(s))
	}
	f.Fuzz(agreeWithReference)
}

// jsonEdgeCases are inputs on the edges of RFC 8259 where a scanner of its
// own could read JSON otherwise than encoding/json.
var jsonEdgeCases = []string{
	``, ` `, `{}`, `[]`, ` {} `, "\t{\"a\":1}\r\n", `{}{}`, `{} x`, `{},`, `[1,]`, `{"a":1,}`, `{,}`, `[,1]`,
	`{"a"}`, `{"a" 1}`, `{"a":}`, `{1:2}`, `{'a':1}`, `{"a":1 "b":2}`, `{"a":{"b":{"c":[{"d":1,"d":2}]}}}`,
	`{"a":1,"a":2}`, `[{"a":1,"a":2}]`, `"x"`, `1`, `-`, `-0`, `-01`, `01`, `0.`, `.5`, `1.5e`, `1e+`, `1E-7`,
	`1.0e10`, `-0.0E+0`, `1e`, `+1`, `0x10`, `1_000`, `Infinity`, `NaN`, `true`, `tru`, `truex`, `null`, `nul`,
	`false`, `True`, `"\u00e9"`, `"\u00E9"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`,
	`"\ud83dx"`, `"\ud83d\ud83d\ude00"`, `"\u12"`, `"\u12g4"`, `"\x41"`, `"\'"`, `"\/\\\"\b\f\n\r\t"`,
	"\"a\tb\"", "\"a\x00b\"", `"abc`, `"\`, `"\u`, `{"a\u0000b":1}`, `{"\u0061":1,"a":2}`,
	`[[[[[[[[[[]]]]]]]]]]`, `[[[]]`, `[]]`, `{"a":[1,{"b":"c"},[true,false,null]]}`, "\u00a0{}", "{}\u00a0",
	`"é"`, `"😀"`,
}

// Generated bodies and single-byte mutations of them: the scanner and the
// reference agree on every one.
func TestParseJSONMatchesReference(t *testing.T) {
	for _, s := range jsonEdgeCases {
		agreeWithReference(t, []byte(s))
	}
	// Nesting to the limit reads as before. Past it, the reference recursed
	// as deep as the body went; the scanner refuses, and no intent can
	// hold an array or object that deep anyway.
	deep := strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)
	agreeWithReference(t, []byte(deep))
	agreeWithReference(t, []byte(`{"args":`+strings.Repeat(`{"a":`, maxJSONDepth-1)+"1"+strings.Repeat("}", maxJSONDepth)))
	if _, err := parseJSON([]byte("[" + deep + "]")); err == nil || err.Error() != "exceeded max depth" {
		t.Fatalf("nesting past %d: %v, want exceeded max depth", maxJSONDepth, err)
	}
	if _, err := ParseIntent([]byte(`{"args":` + strings.Repeat(`{"a":`, maxJSONDepth) + "1" + strings.Repeat("}", maxJSONDepth+1))); err == nil {
		t.Fatal("an intent nested past the limit was read")
	}
	rng := rand.New(rand.NewPCG(20261201, 7))
	const alphabet = "{}[]:,\"\\/ \t\nabtfnru0123456789+-.eEdD\u00e9"
	for range 20000 {
		b := []byte(genJSON(rng, 0))
		agreeWithReference(t, b)
		for range 3 {
			m := append([]byte(nil), b...)
			at := rng.IntN(len(m) + 1)
			c := alphabet[rng.IntN(len(alphabet))]
			switch rng.IntN(3) {
			case 0:
				m = slices.Insert(m, at, c)
			case 1:
				if at < len(m) {
					m = slices.Delete(m, at, at+1)
				}
			default:
				if at < len(m) {
					m[at] = c
				}
			}
			agreeWithReference(t, m)
		}
	}
}

// genJSON is a random JSON value, with repeated keys, escapes of every
// kind (surrogates paired and lone) and numbers of every form.
func genJSON(rng *rand.Rand, depth int) string {
	ws := func() string { return [...]string{"", "", " ", "\n\t", "\r\n "}[rng.IntN(5)] }
	switch k := rng.IntN(8); {
	case k < 2 && depth < 5:
		var b strings.Builder
		b.WriteString("{" + ws())
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.WriteString(genString(rng, 3) + ws() + ":" + ws() + genJSON(rng, depth+1) + ws())
		}
		b.WriteString("}")
		return b.String()
	case k == 2 && depth < 5:
		var b strings.Builder
		b.WriteString("[" + ws())
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.WriteString(genJSON(rng, depth+1) + ws())
		}
		b.WriteString("]")
		return b.String()
	case k < 5:
		return genString(rng, 12)
	case k == 5:
		return [...]string{"true", "false", "null"}[rng.IntN(3)]
	}
	var b strings.Builder
	if rng.IntN(3) == 0 {
		b.WriteByte('-')
	}
	if rng.IntN(3) == 0 {
		b.WriteByte('0')
	} else {
		b.WriteString(strconv.Itoa(1 + rng.IntN(100000)))
	}
	if rng.IntN(3) == 0 {
		b.WriteString("." + strconv.Itoa(rng.IntN(1000)))
	}
	if rng.IntN(4) == 0 {
		b.WriteString([...]string{"e", "E", "e+", "E-"}[rng.IntN(4)] + strconv.Itoa(rng.IntN(30)))
	}
	return b.String()
}

func genString(rng *rand.Rand, n int) string {
	parts := []string{"a", "b", "Z", "0", " ", "é", "😀", `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`,
		`\u0041`, `\u00e9`, `\u00E9`, `\u0000`, `\ud83d\ude00`, `\ud83d`, `\ude00`, `\uDBFF\uDFFF`, `\ud800\u0041`}
	var b strings.Builder
	b.WriteByte('"')
	for range rng.IntN(n + 1) {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	b.WriteByte('"')
	return b.String()
}

// A body nested to the limit costs memory in proportion to its size: a
// path built at every level (as the reference builds it) would make it
// quadratic, 100 MB for a body of 20 KB.
func TestDeepBodyReadsInLinearMemory(t *testing.T) {
	for _, open := range []string{"[", `{"a":`} {
		body := []byte(strings.Repeat(open, maxJSONDepth) + "1" + strings.Repeat(map[string]string{"[": "]", `{"a":`: "}"}[open], maxJSONDepth))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := parseJSON(body); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(200*len(body)); got > bound {
			t.Fatalf("%d levels of %q, %d bytes: %d bytes allocated, want at most %d", maxJSONDepth, open, len(body), got, bound)
		}
	}
}
