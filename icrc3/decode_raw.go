package icrc3

import (
	"math/big"
	"unicode/utf8"
)

// The block pages' hot path: each block's Value is read from the Candid
// bytes straight into the block-cache encoding (MarshalValue's format),
// hashed on the way, and parsed from that encoding (parseRaw). No Value
// tree is built: a tree costs a dozen 100-byte nodes per block that
// hashing and parsing never need, and the cache stores the encoding anyway.
// The tree-building reader (value, in decode_value.go) stays as the oracle
// the differential tests hold this one to.

// rawBlock reads one block Value of a checked variant type into d.out as a
// complete encoding (version byte included) and returns it with its hash.
// The returned slice is capped, so later appends never write into it.
//
// d.keysRepeat tells afterwards whether the block's map, or a Map directly
// in it, has two equal key hashes (a repeated key).
func (d *decoder) rawBlock(ref int64) ([]byte, Hash, error) {
	d.keysRepeat = false
	start := len(d.out)
	d.out = append(d.out, valueCodecV1)
	h, err := d.rawValue(ref, 0)
	if err != nil {
		return nil, Hash{}, err
	}
	return d.out[start:len(d.out):len(d.out)], h, nil
}

// reserveOut sizes d.out for n blocks still to be read from the rest of the
// input. The encoding is never longer than the Candid it comes from, except
// for a version byte per block and Nat64s of 2^56 and above (up to two bytes
// more each), so a page almost never outgrows the first allocation. If it
// does, append moves on to a new array and the blocks already read keep the
// old one. The parsed blocks' parts come from one slab of a page's size.
func (d *decoder) reserveOut(n int) {
	if d.out == nil {
		d.out = make([]byte, 0, d.remaining()+4*n+64)
	}
	if d.parts == nil && n > 0 {
		d.parts = make([]blockParts, min(n, 2048))
	}
}

// rawValue appends the encoding of one Value of a checked variant type to
// d.out and returns its representation-independent hash. It accepts and
// rejects exactly what value does, with the same errors, in the same order.
func (d *decoder) rawValue(ref int64, depth int) (Hash, error) {
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
		d.appendBytes(KindBlob, b)
		if len(b) == 32 && [32]byte(b) == [32]byte{} {
			return zeroSubaccountHash, nil
		}
		return sum256(b), nil
	case idText:
		b, err := d.blob()
		if err != nil {
			return Hash{}, err
		}
		var h Hash
		if len(b) <= 16 {
			e, err := d.intern(b)
			if err != nil {
				return Hash{}, err
			}
			h = e.hash
		} else {
			if !utf8.Valid(b) {
				return Hash{}, d.errf("text is not valid UTF-8")
			}
			h = sum256(b)
		}
		d.appendBytes(KindText, b)
		return h, nil
	case idNat:
		raw, err := d.leb()
		if err != nil {
			return Hash{}, err
		}
		d.out = append(d.out, byte(KindNat))
		if len(raw) == 1 {
			d.out = append(d.out, raw[0])
			return smallNatHash(raw[0]), nil
		}
		if raw[len(raw)-1] != 0 {
			d.out = append(d.out, raw...)
			return sum256(raw), nil
		}
		// Overlong: the encoding, like the hash, holds the canonical form.
		start := len(d.out)
		d.out = natFromLEB(raw).AppendLEB128(d.out)
		return sum256(d.out[start:]), nil
	case idNat64:
		b, err := d.take(8)
		if err != nil {
			return Hash{}, err
		}
		u := le64(b)
		d.out = append(d.out, byte(KindNat))
		if u < 0x80 {
			d.out = append(d.out, byte(u))
			return smallNatHash(byte(u)), nil
		}
		start := len(d.out)
		d.out = AppendUvarint(d.out, u)
		return sum256(d.out[start:]), nil
	case idInt:
		// No ledger writes Int into a block: the plain big.Int path will do.
		var i *big.Int
		if f.typ == opNat {
			n, err := d.natOnly()
			if err != nil {
				return Hash{}, err
			}
			i = n.Big()
		} else if i, err = d.int(); err != nil {
			return Hash{}, err
		}
		d.out = append(d.out, byte(KindInt))
		start := len(d.out)
		d.out = AppendSLEB128(d.out, i)
		return sum256(d.out[start:]), nil
	case idArray:
		inner := d.types[f.typ].inner
		n, err := d.count(2)
		if err != nil {
			return Hash{}, err
		}
		d.out = append(d.out, byte(KindArray))
		d.out = AppendUvarint(d.out, uint64(n))
		s := d.scratchAt(depth)
		for range n {
			h, err := d.rawValue(inner, depth+1)
			if err != nil {
				return Hash{}, err
			}
			s = append(s, h[:]...)
		}
		d.scratch[depth] = s
		return sum256(s), nil
	case idMap:
		rec := &d.types[d.types[f.typ].inner]
		n, err := d.count(3)
		if err != nil {
			return Hash{}, err
		}
		d.out = append(d.out, byte(KindMap))
		d.out = AppendUvarint(d.out, uint64(n))
		s := d.scratchAt(depth)
		for range n {
			// The key's field id (0) is the lowest there is and the value's
			// (1) the next, so on the wire the key always comes first, as
			// the encoding wants it.
			var kh, vh Hash
			for _, rf := range rec.fields {
				switch rf.id {
				case idTupleKey:
					var e keyEntry
					if e, err = d.keyEntry(); err == nil {
						kh = e.hash
						d.appendString(e.key)
					}
				case idTupleValue:
					vh, err = d.rawValue(rf.typ, depth+1)
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
		if depth <= 1 && !d.keysRepeat {
			// Sorted, equal keys are neighbours.
			for i := 64; i < len(s); i += 64 {
				if [32]byte(s[i:i+32]) == [32]byte(s[i-64:i-32]) {
					d.keysRepeat = true
					break
				}
			}
		}
		d.scratch[depth] = s
		return d.mapHash(depth, s), nil
	}
	return Hash{}, d.errf("Value: unknown variant tag %d", f.id)
}

// mapMidstate is the SHA-256 state after the first 64-byte block of the
// last map hashed at one depth.
type mapMidstate struct {
	first [64]byte
	state [8]uint32
	ok    bool
}

// mapHash is sum256 of a map's sorted pairs. A page's maps at one depth
// often begin with the same pair: tx.op sorts first among a DFINITY
// transfer's keys and btype first among an ICRC-3 block's, and both repeat
// block after block. The state after that pair is kept per depth and
// reused while the pair repeats, saving one of the block's compressions.
func (d *decoder) mapHash(depth int, s []byte) Hash {
	if !haveSHANI || len(s) < 128 || depth >= len(d.mid) {
		return sum256(s)
	}
	m := &d.mid[depth]
	if !m.ok || [64]byte(s[:64]) != m.first {
		m.first = [64]byte(s[:64])
		m.state = sha256IV
		sha256Blocks(&m.state, s[:64])
		m.ok = true
	}
	h := m.state
	var out Hash
	sha256Finish(&h, s[64:], uint64(len(s)), &out)
	return out
}

func (d *decoder) appendBytes(k Kind, b []byte) {
	d.out = append(d.out, byte(k))
	d.out = AppendUvarint(d.out, uint64(len(b)))
	d.out = append(d.out, b...)
}

func (d *decoder) appendString(s string) {
	d.out = AppendUvarint(d.out, uint64(len(s)))
	d.out = append(d.out, s...)
}

// keyEntry reads a Map key through the per-reply intern table.
func (d *decoder) keyEntry() (keyEntry, error) {
	b, err := d.blob()
	if err != nil {
		return keyEntry{}, err
	}
	return d.intern(b)
}
