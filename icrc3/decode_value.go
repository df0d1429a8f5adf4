package icrc3

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"math/big"
	"slices"
	"unicode/utf8"
)

// Reading ICRC-3 Values: the type check, the hash-while-decoding walk, and
// the number encodings it hashes.

// checkValue checks that a wire type is a subtype of the ICRC-3 Value
// (including the legacy Nat64 arm). Recursive types are checked
// coinductively: a reference already being checked is taken as valid.
func (d *decoder) checkValue(ref int64) error {
	if ref < 0 || d.types[ref].op != opVariant {
		return d.typeErrf("Value: wire type %d is not a variant", ref)
	}
	if d.valueChecked[ref] {
		return nil
	}
	d.valueChecked[ref] = true
	for _, f := range d.types[ref].fields {
		ok := false
		switch f.id {
		case idBlob:
			ok = d.isBlob(f.typ)
		case idText:
			ok = f.typ == opText
		case idNat:
			ok = f.typ == opNat
		case idInt:
			ok = f.typ == opInt || f.typ == opNat
		case idNat64:
			ok = f.typ == opNat64
		case idArray:
			inner, err := d.vecOf(f.typ, "Value.Array")
			if err != nil {
				return err
			}
			if err := d.checkValue(inner); err != nil {
				return err
			}
			ok = true
		case idMap:
			inner, err := d.vecOf(f.typ, "Value.Map")
			if err != nil {
				return err
			}
			rec, err := d.record(inner, "Value.Map entry")
			if err != nil {
				return err
			}
			if id, miss := missing(rec, idTupleKey, idTupleValue); miss {
				return d.typeErrf("Value.Map entry: field %d missing", id)
			}
			for _, rf := range rec.fields {
				switch rf.id {
				case idTupleKey:
					if rf.typ != opText {
						return d.typeErrf("Value.Map key is not text")
					}
				case idTupleValue:
					if err := d.checkValue(rf.typ); err != nil {
						return err
					}
				}
			}
			ok = true
		default:
			return d.typeErrf("Value: unknown variant tag %d", f.id)
		}
		if !ok {
			return d.typeErrf("Value: variant tag %d has a mismatching wire type", f.id)
		}
	}
	return nil
}

func (d *decoder) scratchAt(depth int) []byte {
	for len(d.scratch) <= depth {
		d.scratch = append(d.scratch, make([]byte, 0, 256))
	}
	return d.scratch[depth][:0]
}

func (d *decoder) allocValues(n int) []Value {
	if n == 0 {
		return []Value{}
	}
	if n > 64 {
		return make([]Value, n)
	}
	if len(d.values) < n {
		d.values = make([]Value, 512)
	}
	s := d.values[:n:n]
	d.values = d.values[n:]
	return s
}

func (d *decoder) allocFields(n int) []Field {
	if n == 0 {
		return []Field{}
	}
	if n > 64 {
		return make([]Field, n)
	}
	if len(d.fields) < n {
		d.fields = make([]Field, 256)
	}
	s := d.fields[:n:n]
	d.fields = d.fields[n:]
	return s
}

func (d *decoder) spend() error {
	d.budget--
	if d.budget < 0 {
		return d.errf("work budget exhausted")
	}
	return nil
}

// value reads one Value of a checked variant type into dst and returns its
// representation-independent hash. dst is written in place: a Value is over
// a hundred bytes, and returning it by value would copy it at every level.
func (d *decoder) value(ref int64, depth int, dst *Value) (Hash, error) {
	if depth >= MaxValueDepth {
		return Hash{}, d.errf("Value nested deeper than %d", MaxValueDepth)
	}
	if err := d.spend(); err != nil {
		return Hash{}, err
	}
	t := &d.types[ref]
	tag, err := d.uleb()
	if err != nil {
		return Hash{}, err
	}
	if tag >= uint64(len(t.fields)) {
		return Hash{}, d.errf("variant index %d out of range", tag)
	}
	f := t.fields[tag]
	switch f.id {
	case idBlob:
		b, err := d.blob()
		if err != nil {
			return Hash{}, err
		}
		dst.Kind, dst.Bytes = KindBlob, b
		if len(b) == 32 && [32]byte(b) == [32]byte{} {
			// The default subaccount, recorded explicitly by many callers.
			return zeroSubaccountHash, nil
		}
		return sha256.Sum256(b), nil
	case idText:
		b, err := d.blob()
		if err != nil {
			return Hash{}, err
		}
		dst.Kind, dst.Bytes = KindText, b
		if len(b) <= 16 {
			// Short texts (tx.op, btype) repeat in every block.
			e, err := d.intern(b)
			return e.hash, err
		}
		if !utf8.Valid(b) {
			return Hash{}, d.errf("text is not valid UTF-8")
		}
		return sha256.Sum256(b), nil
	case idNat:
		dst.Kind = KindNat
		var h Hash
		dst.Nat, h, err = d.nat()
		return h, err
	case idNat64:
		b, err := d.take(8)
		if err != nil {
			return Hash{}, err
		}
		u := le64(b)
		dst.Kind, dst.Nat = KindNat, Nat{lo: u}
		if u < 0x80 {
			return smallNatHash(byte(u)), nil
		}
		var lb [10]byte
		return sha256.Sum256(AppendUvarint(lb[:0], u)), nil
	case idInt:
		var i *big.Int
		if f.typ == opNat {
			n, _, err := d.nat()
			if err != nil {
				return Hash{}, err
			}
			i = n.Big()
		} else if i, err = d.int(); err != nil {
			return Hash{}, err
		}
		dst.Kind, dst.Int = KindInt, i
		var lb [16]byte
		return sha256.Sum256(AppendSLEB128(lb[:0], i)), nil
	case idArray:
		inner := d.types[f.typ].inner
		n, err := d.count(2)
		if err != nil {
			return Hash{}, err
		}
		vals := d.allocValues(n)
		s := d.scratchAt(depth)
		for i := range vals {
			h, err := d.value(inner, depth+1, &vals[i])
			if err != nil {
				return Hash{}, err
			}
			s = append(s, h[:]...)
		}
		d.scratch[depth] = s
		dst.Kind, dst.Array = KindArray, vals
		return sha256.Sum256(s), nil
	case idMap:
		rec := &d.types[d.types[f.typ].inner]
		n, err := d.count(3)
		if err != nil {
			return Hash{}, err
		}
		fields := d.allocFields(n)
		s := d.scratchAt(depth)
		for i := range fields {
			var kh, vh Hash
			for _, rf := range rec.fields {
				switch rf.id {
				case idTupleKey:
					fields[i].Key, kh, err = d.key()
				case idTupleValue:
					vh, err = d.value(rf.typ, depth+1, &fields[i].Value)
				default:
					err = d.skip(rf.typ, depth+1)
				}
				if err != nil {
					return Hash{}, err
				}
			}
			s = append(s, kh[:]...)
			s = append(s, vh[:]...)
		}
		sortPairs(s)
		d.scratch[depth] = s
		dst.Kind, dst.Map = KindMap, fields
		return sha256.Sum256(s), nil
	}
	// checkValue admitted only the arms above.
	return Hash{}, d.errf("Value: unknown variant tag %d", f.id)
}

// smallNatHashes holds the hashes of the one-byte LEB128 numbers 0..127
// (fees, small amounts), computed once.
var smallNatHashes = func() (t [128]Hash) {
	for i := range t {
		t[i] = sha256.Sum256([]byte{byte(i)})
	}
	return t
}()

func smallNatHash(b byte) Hash { return smallNatHashes[b] }

var zeroSubaccountHash = sha256.Sum256(make([]byte, 32))

// key reads a Map key, interning it and its hash: blocks repeat a handful of
// keys thousands of times.
func (d *decoder) key() (string, Hash, error) {
	b, err := d.blob()
	if err != nil {
		return "", Hash{}, err
	}
	e, err := d.intern(b)
	return e.key, e.hash, err
}

// intern returns the string and hash of a UTF-8 text, from a per-reply cache.
func (d *decoder) intern(b []byte) (keyEntry, error) {
	var slot *keyEntry
	if n := len(b); n > 0 {
		// A map lookup hashes the whole key; blocks repeat so few keys
		// that length and two bytes almost always tell them apart.
		slot = &d.keyCache[(uint(n)*7+uint(b[0])+uint(b[n-1])<<2)&63]
		if slot.key == string(b) {
			return *slot, nil
		}
	}
	if e, ok := d.keys[string(b)]; ok {
		if slot != nil {
			*slot = e
		}
		return e, nil
	}
	if !utf8.Valid(b) {
		return keyEntry{}, d.errf("text is not valid UTF-8")
	}
	e := keyEntry{key: string(b), hash: sha256.Sum256(b)}
	if len(d.keys) < 1024 {
		d.keys[e.key] = e
	}
	if slot != nil {
		*slot = e
	}
	return e, nil
}

// sortPairs sorts the 64-byte (key hash, value hash) pairs of a map in place.
func sortPairs(s []byte) {
	n := len(s) / 64
	if n < 2 {
		return
	}
	if n <= 16 {
		// Insertion sort that moves each pair out once and shifts the
		// larger ones up, rather than swapping it down step by step.
		for i := 1; i < n; i++ {
			if !pairLess(s[i*64:(i+1)*64], s[(i-1)*64:i*64]) {
				continue
			}
			tmp := [64]byte(s[i*64 : (i+1)*64])
			j := i
			for j > 0 && pairLess(tmp[:], s[(j-1)*64:j*64]) {
				j--
			}
			copy(s[(j+1)*64:(i+1)*64], s[j*64:i*64])
			copy(s[j*64:(j+1)*64], tmp[:])
		}
		return
	}
	pairs := make([][64]byte, n)
	for i := range pairs {
		copy(pairs[i][:], s[i*64:])
	}
	slices.SortFunc(pairs, func(a, b [64]byte) int { return bytes.Compare(a[:], b[:]) })
	for i := range pairs {
		copy(s[i*64:], pairs[i][:])
	}
}

// pairLess orders two 64-byte pairs; the first eight bytes of a SHA-256
// key hash almost always decide.
func pairLess(a, b []byte) bool {
	x, y := binary.BigEndian.Uint64(a), binary.BigEndian.Uint64(b)
	if x != y {
		return x < y
	}
	return bytes.Compare(a, b) < 0
}

// nat reads a Candid nat and returns it with the hash of its canonical LEB128.
func (d *decoder) nat() (Nat, Hash, error) {
	raw, err := d.leb()
	if err != nil {
		return Nat{}, Hash{}, err
	}
	if len(raw) == 1 {
		return Nat{lo: uint64(raw[0])}, smallNatHash(raw[0]), nil
	}
	n := natFromLEB(raw)
	if raw[len(raw)-1] != 0 {
		return n, sha256.Sum256(raw), nil
	}
	// Overlong encoding: Candid allows it, the hash is over the canonical form.
	var lb [16]byte
	return n, sha256.Sum256(n.AppendLEB128(lb[:0])), nil
}

func natFromLEB(raw []byte) Nat {
	if len(raw) <= 9 || (len(raw) == 10 && raw[9] <= 1) {
		var v uint64
		for i, c := range raw {
			v |= uint64(c&0x7f) << (7 * uint(i))
		}
		return Nat{lo: v}
	}
	b := new(big.Int)
	for i := len(raw) - 1; i >= 0; i-- {
		b.Lsh(b, 7)
		b.Or(b, big.NewInt(int64(raw[i]&0x7f)))
	}
	if b.IsUint64() {
		return Nat{lo: b.Uint64()}
	}
	return Nat{big: b}
}

// natOnly reads a Candid nat that is no Value (a block id, a length): its
// hash is never wanted.
func (d *decoder) natOnly() (Nat, error) {
	raw, err := d.leb()
	if err != nil {
		return Nat{}, err
	}
	return natFromLEB(raw), nil
}

func (d *decoder) natU64(what string) (uint64, error) {
	n, err := d.natOnly()
	if err != nil {
		return 0, err
	}
	u, ok := n.Uint64()
	if !ok {
		return 0, d.errf("%s %s does not fit in 64 bits", what, n)
	}
	return u, nil
}

// int reads a Candid int (SLEB128, any size).
func (d *decoder) int() (*big.Int, error) {
	raw, err := d.leb()
	if err != nil {
		return nil, err
	}
	if len(raw) <= 9 {
		var v int64
		for i, c := range raw {
			v |= int64(c&0x7f) << (7 * uint(i))
		}
		if shift := 7 * uint(len(raw)); raw[len(raw)-1]&0x40 != 0 {
			v |= -1 << shift
		}
		return big.NewInt(v), nil
	}
	b := new(big.Int)
	for i := len(raw) - 1; i >= 0; i-- {
		b.Lsh(b, 7)
		b.Or(b, big.NewInt(int64(raw[i]&0x7f)))
	}
	if raw[len(raw)-1]&0x40 != 0 {
		b.Sub(b, new(big.Int).Lsh(big.NewInt(1), 7*uint(len(raw))))
	}
	return b, nil
}
