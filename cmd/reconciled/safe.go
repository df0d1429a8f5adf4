package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// Fields the CLI prints and the daemon logs come from intents a tool layer
// wrote and from ledgers: an `after` text, a memo, a ledger's symbol, a
// replica's reject message. Printed raw, such a text could drive the
// reader's terminal (ESC ] 0 ; … BEL retitles it, ESC [ 2 J clears it, 8-bit
// CSI does the same on some terminals), forge lines (a newline), or show
// something other than what it holds (bidi overrides and isolates, which
// reorder what follows, and other invisible format characters).

// hiddenRune reports a rune that is never printed as itself: control
// characters (C0, DEL, C1), format characters (bidi controls, zero-width
// characters, BOM) and the line and paragraph separators.
func hiddenRune(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// safeText is s as a terminal may print it: each hidden rune as a Go
// escape (\x1b, \n, \u202e), each byte that is not UTF-8 as \xNN, and a
// backslash as \\, so the escapes read back unambiguously.
func safeText(s string) string {
	clean := true
	for _, r := range s {
		if r == '\\' || r == utf8.RuneError || hiddenRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && hiddenRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff && hiddenRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		case hiddenRune(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// safeJSON is a JSON document with every hidden rune that the encoder left
// raw (encoding/json and zap escape C0 controls but not DEL, C1, bidi or
// format characters, nor U+2028/U+2029 in zap's case) written as a \u
// escape. Such runes can only stand inside strings, where the escape means
// the same, so the document decodes to exactly what it did.
func safeJSON(doc []byte) []byte {
	clean := true
	for _, r := range string(doc) {
		if r != '\n' && hiddenRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return doc
	}
	out := make([]byte, 0, len(doc)+16)
	for i := 0; i < len(doc); {
		r, n := utf8.DecodeRune(doc[i:])
		switch {
		case r == '\n' || !hiddenRune(r) || (r == utf8.RuneError && n <= 1):
			out = append(out, doc[i:i+n]...)
		case r <= 0xffff:
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			r1, r2 := utf16Pair(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		}
		i += n
	}
	return out
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// safeLogEncoder writes each log entry of its JSON encoder through
// safeJSON.
type safeLogEncoder struct{ zapcore.Encoder }

func (e safeLogEncoder) Clone() zapcore.Encoder { return safeLogEncoder{e.Encoder.Clone()} }

func (e safeLogEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	b, err := e.Encoder.EncodeEntry(ent, fields)
	if err != nil {
		return nil, err
	}
	if out := safeJSON(b.Bytes()); len(out) != b.Len() {
		b.Reset()
		b.Write(out)
	}
	return b, nil
}
