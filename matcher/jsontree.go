package matcher

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The intent is read into this small tree rather than into Go structs because
// encoding/json silently keeps the last of duplicate keys, ignores unknown
// keys and turns numbers into float64; each of these would let two different
// bodies mean the same intent, or one body mean something the sender did not.

type jsonKind int

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonString
	jsonNumber
	jsonObject
	jsonArray
)

func (k jsonKind) String() string {
	return [...]string{"null", "a boolean", "a string", "a number", "an object", "an array"}[k]
}

type jsonValue struct {
	kind jsonKind
	str  string                // jsonString
	keys []string              // jsonObject, in document order
	obj  map[string]*jsonValue // jsonObject
}

// parseJSON reads exactly one JSON value, with only whitespace around it,
// as encoding/json reads it (the same values, the same strings after
// unescaping, the same refusals), without its tokenizer: that allocates a
// token per value, a cost every intent pays in the daemon and again in a
// Go publisher's message id (docs/benchmarks.md#past-rounds). A repeated
// key is a *dupKeyError carrying its path, so the refusal can name the
// field.
func parseJSON(data []byte) (*jsonValue, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("body is not valid UTF-8")
	}
	p := jsonParser{data: data}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if p.space(); p.i != len(data) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

type dupKeyError struct{ path string }

func (e *dupKeyError) Error() string { return "duplicate key " + e.path }

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

type jsonParser struct {
	data []byte
	i    int
	// at is the path to the value being read, a key or "[]" per level:
	// joined only for a duplicate key's refusal, since a path string built
	// at every level costs memory quadratic in the nesting.
	at []string
}

// path is the refusal's name for the value being read: keys joined by
// dots, "[]" for an array's element.
func (p *jsonParser) path() string {
	var b strings.Builder
	for _, s := range p.at {
		if s != "[]" && b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

func (p *jsonParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) fail(what string) error {
	if p.i >= len(p.data) {
		return errors.New("unexpected end of JSON")
	}
	return errors.New("invalid character " + strconv.QuoteRune(rune(p.data[p.i])) + " " + what + " at offset " + strconv.Itoa(p.i))
}

// value reads the value at p.i, which is not whitespace, inside depth
// objects and arrays.
func (p *jsonParser) value(depth int) (*jsonValue, error) {
	if p.i >= len(p.data) {
		return nil, p.fail("")
	}
	switch c := p.data[p.i]; {
	case (c == '{' || c == '[') && depth == maxJSONDepth:
		return nil, errors.New("exceeded max depth")
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &jsonValue{kind: jsonString, str: s}, nil
	case c == '-' || c >= '0' && c <= '9':
		s, err := p.number()
		if err != nil {
			return nil, err
		}
		return &jsonValue{kind: jsonNumber, str: s}, nil
	case c == 't':
		return p.literal("true", jsonBool)
	case c == 'f':
		return p.literal("false", jsonBool)
	case c == 'n':
		return p.literal("null", jsonNull)
	}
	return nil, p.fail("looking for beginning of value")
}

func (p *jsonParser) literal(word string, kind jsonKind) (*jsonValue, error) {
	for k := range len(word) {
		if p.i >= len(p.data) || p.data[p.i] != word[k] {
			return nil, p.fail("in literal " + word)
		}
		p.i++
	}
	return &jsonValue{kind: kind}, nil
}

func (p *jsonParser) object(depth int) (*jsonValue, error) {
	p.i++ // '{'
	v := &jsonValue{kind: jsonObject, obj: map[string]*jsonValue{}}
	p.space()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return v, nil
	}
	for {
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, p.fail("looking for beginning of object key string")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.at = append(p.at, k)
		if _, dup := v.obj[k]; dup {
			return nil, &dupKeyError{path: p.path()}
		}
		if p.space(); p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, p.fail("after object key")
		}
		p.i++
		p.space()
		child, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		p.at = p.at[:len(p.at)-1]
		v.keys = append(v.keys, k)
		v.obj[k] = child
		if end, err := p.after('}', "after object key:value pair"); err != nil {
			return nil, err
		} else if end {
			return v, nil
		}
	}
}

// after reads what follows a member or element: a comma, then whitespace
// (end false), or the closing byte (end true).
func (p *jsonParser) after(closing byte, what string) (end bool, err error) {
	p.space()
	switch {
	case p.i >= len(p.data):
		return false, p.fail("")
	case p.data[p.i] == ',':
		p.i++
		p.space()
		return false, nil
	case p.data[p.i] == closing:
		p.i++
		return true, nil
	}
	return false, p.fail(what)
}

// array reads an array. No intent field is one: its elements are read
// only to find syntax errors and duplicate keys inside them.
func (p *jsonParser) array(depth int) (*jsonValue, error) {
	p.i++ // '['
	p.space()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return &jsonValue{kind: jsonArray}, nil
	}
	p.at = append(p.at, "[]")
	for {
		if _, err := p.value(depth); err != nil {
			return nil, err
		}
		if end, err := p.after(']', "after array element"); err != nil {
			return nil, err
		} else if end {
			p.at = p.at[:len(p.at)-1]
			return &jsonValue{kind: jsonArray}, nil
		}
	}
}

// number reads a number's text, in RFC 8259's grammar.
func (p *jsonParser) number() (string, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.data[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.data) && p.data[p.i] == '0':
		p.i++
	case digits() == 0:
		return "", p.fail("in numeric literal")
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return "", p.fail("after decimal point in numeric literal")
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return "", p.fail("in exponent of numeric literal")
		}
	}
	return string(p.data[start:p.i]), nil
}

// str reads a string literal and unescapes it as encoding/json does: a
// \u escape of a lone surrogate becomes U+FFFD.
func (p *jsonParser) str() (string, error) {
	p.i++ // '"'
	start := p.i
	// The common case: no escape, nothing to copy but the bytes.
	for p.i < len(p.data) {
		c := p.data[p.i]
		if c == '"' {
			s := string(p.data[start:p.i])
			p.i++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail("in string literal")
		}
		p.i++
	}
	b := append([]byte(nil), p.data[start:p.i]...)
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), nil
		case c < 0x20:
			return "", p.fail("in string literal")
		case c != '\\':
			b = append(b, c)
			p.i++
			continue
		}
		p.i++ // '\\'
		if p.i >= len(p.data) {
			break
		}
		switch e := p.data[p.i]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := p.hex4(p.i + 1)
			if !ok {
				p.i++
				// The error names the first byte that is not a hex digit.
				for k := 0; k < 4 && p.i < len(p.data); k++ {
					if _, ok := hexDigit(p.data[p.i]); !ok {
						break
					}
					p.i++
				}
				return "", p.fail("in \\u hexadecimal character escape")
			}
			p.i += 4
			if utf16.IsSurrogate(r) {
				if p.i+2 < len(p.data) && p.data[p.i+1] == '\\' && p.data[p.i+2] == 'u' {
					if r2, ok := p.hex4(p.i + 3); ok {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							b = utf8.AppendRune(b, d)
							p.i += 7
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", p.fail("in string escape code")
		}
		p.i++
	}
	return "", p.fail("")
}

// hex4 reads the four hex digits at data[at:].
func (p *jsonParser) hex4(at int) (rune, bool) {
	if at+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[at : at+4] {
		d, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | d
	}
	return r, true
}

func hexDigit(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10), true
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10), true
	}
	return 0, false
}
