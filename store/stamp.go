package store

import (
	"github.com/reconciled/reconciled/icrc3"
)

// A verified block's stamp is indexed from its Value, not from the fields
// its decoder parsed, so that ByStamp, which rebuilds candidates from the
// Value, finds every block the Value stamps. Re-parsing every Value in full
// (icrc3.ParseRawBlock: kind, accounts, amounts) to compare two fields
// costs far more CPU and allocation than the comparison needs
// (docs/benchmarks.md#past-rounds). readStamp reads the two fields alone,
// by the block cache's encoding (icrc3.MarshalValue), and says when it
// cannot tell: the full parse then decides, as before.
//
// What the index needs, and readStamp gives, is that the stamp stored for a
// block is the one the full parse would find, or else that the full parse
// fails on the Value or finds it stamped by nothing else:
//   - the full parse reads tx.ts only from the root's one "tx" entry, a Map,
//     and its one "ts" entry; readStamp finds that entry the same way and
//     refuses to tell when either key repeats, so where readStamp finds no
//     tx.ts, the full parse finds none either;
//   - where readStamp finds tx.ts = S, the full parse finds S, or fails, or
//     (a block of a kind it does not know) finds none: a block indexed under
//     S then fails ByStamp's rebuild check, an error and never a missing
//     candidate.

// stampRead is what readStamp found.
type stampRead struct {
	ts       uint64 // the root's ts
	stamp    uint64 // tx.ts, when hasStamp
	hasStamp bool
}

// readStamp reads a block Value's root ts and tx.ts from its encoding. ok is
// false when the encoding is not one readStamp reads plainly: another
// format version, a root that is not a Map, a repeated ts or tx key, a tx
// that is not a Map, a ts that is not a Nat of 64 bits, or an encoding
// that is malformed, truncated or followed by more bytes.
func readStamp(raw []byte) (r stampRead, ok bool) {
	if len(raw) < 2 || raw[0] != icrc3.ValueCodecV1 || icrc3.Kind(raw[1]) != icrc3.KindMap {
		return r, false
	}
	var rootTS, tx int = -1, -1
	end, ok := mapEntries(raw, 1, func(key []byte, val int) bool {
		switch string(key) {
		case "ts":
			if rootTS >= 0 {
				return false
			}
			rootTS = val
		case "tx":
			if tx >= 0 {
				return false
			}
			tx = val
		}
		return true
	}, 0)
	if !ok || end != len(raw) || rootTS < 0 {
		return r, false
	}
	if r.ts, ok = natU64(raw, rootTS); !ok {
		return r, false
	}
	if tx < 0 {
		return r, true
	}
	if icrc3.Kind(raw[tx]) != icrc3.KindMap {
		return r, false
	}
	txTS := -1
	if _, ok = mapEntries(raw, tx, func(key []byte, val int) bool {
		if string(key) == "ts" {
			if txTS >= 0 {
				return false
			}
			txTS = val
		}
		return true
	}, 1); !ok {
		return r, false
	}
	if txTS < 0 {
		return r, true
	}
	if r.stamp, ok = natU64(raw, txTS); !ok {
		return r, false
	}
	r.hasStamp = true
	return r, true
}

// mapEntries calls entry for each key of the Map encoded at pos (its kind
// byte), with the position of the key's value, and returns the position
// after the Map. ok is false when the encoding is malformed or entry
// returned false.
func mapEntries(raw []byte, pos int, entry func(key []byte, val int) bool, depth int) (end int, ok bool) {
	n, p, ok := uvarint(raw, pos+1)
	if !ok {
		return 0, false
	}
	for ; n > 0; n-- {
		l, q, ok := uvarint(raw, p)
		if !ok || l > uint64(len(raw)-q) {
			return 0, false
		}
		val := q + int(l)
		if !entry(raw[q:val], val) {
			return 0, false
		}
		if p, ok = skipValue(raw, val, depth+1); !ok {
			return 0, false
		}
	}
	return p, true
}

// skipValue returns the position after the value encoded at pos.
func skipValue(raw []byte, pos, depth int) (int, bool) {
	if pos >= len(raw) || depth >= icrc3.MaxValueDepth {
		return 0, false
	}
	switch icrc3.Kind(raw[pos]) {
	case icrc3.KindBlob, icrc3.KindText:
		l, p, ok := uvarint(raw, pos+1)
		if !ok || l > uint64(len(raw)-p) {
			return 0, false
		}
		return p + int(l), true
	case icrc3.KindNat, icrc3.KindInt:
		for p := pos + 1; p < len(raw); p++ {
			if raw[p] < 0x80 {
				return p + 1, true
			}
		}
		return 0, false
	case icrc3.KindArray:
		n, p, ok := uvarint(raw, pos+1)
		if !ok {
			return 0, false
		}
		for ; n > 0; n-- {
			if p, ok = skipValue(raw, p, depth+1); !ok {
				return 0, false
			}
		}
		return p, true
	case icrc3.KindMap:
		return mapEntries(raw, pos, func([]byte, int) bool { return true }, depth)
	}
	return 0, false
}

// uvarint reads the LEB128 number at pos, refusing one beyond 64 bits.
func uvarint(raw []byte, pos int) (v uint64, next int, ok bool) {
	for shift := uint(0); pos < len(raw); shift += 7 {
		c := raw[pos]
		pos++
		if shift == 63 && c > 1 || shift > 63 && c != 0 {
			return 0, 0, false
		}
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		if c < 0x80 {
			return v, pos, true
		}
	}
	return 0, 0, false
}

// natU64 reads the Nat encoded at pos as a uint64.
func natU64(raw []byte, pos int) (uint64, bool) {
	if icrc3.Kind(raw[pos]) != icrc3.KindNat {
		return 0, false
	}
	v, _, ok := uvarint(raw, pos+1)
	return v, ok
}
