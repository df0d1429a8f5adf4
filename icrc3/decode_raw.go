package icrc3

import (
	"encoding/binary"
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
	d.blockStart = start
	d.ents.maps = d.ents.maps[:0]
	d.ents.slab = d.ents.slab[:0]
	d.out = append(d.out, valueCodecV1)
	var h Hash
	if err := d.rawValue(ref, 0, &h); err != nil {
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
	if d.parts == nil && n > 0 && !d.tree {
		d.parts = make([]blockParts, min(n, 2048))
	}
}

// rawValue appends the encoding of one Value of a checked variant type to
// d.out and writes its representation-independent hash to dst (the slot in
// the parent's pairs, so hashes are not copied up the recursion). It
// accepts and rejects exactly what value does, with the same errors, in
// the same order.
func (d *decoder) rawValue(ref int64, depth int, dst *Hash) error {
	if depth >= MaxValueDepth {
		return d.errf("Value nested deeper than %d", MaxValueDepth)
	}
	if err := d.spend(); err != nil {
		return err
	}
	t := &d.types[ref]
	tag, err := d.uleb()
	if err != nil {
		return err
	}
	if tag >= uint64(len(t.fields)) {
		return d.errf("variant index %d out of range", tag)
	}
	f := t.fields[tag]
	switch f.id {
	case idBlob:
		b, err := d.blob()
		if err != nil {
			return err
		}
		d.appendBytes(KindBlob, b)
		if len(b) == 32 && [32]byte(b) == [32]byte{} {
			*dst = zeroSubaccountHash
			return nil
		}
		sum256Input(dst, b)
		return nil
	case idText:
		b, err := d.blob()
		if err != nil {
			return err
		}
		if len(b) <= 16 {
			e, err := d.intern(b)
			if err != nil {
				return err
			}
			*dst = e.hash
		} else {
			if !utf8.Valid(b) {
				return d.errf("text is not valid UTF-8")
			}
			sum256Input(dst, b)
		}
		d.appendBytes(KindText, b)
		return nil
	case idNat:
		raw, err := d.leb()
		if err != nil {
			return err
		}
		d.out = append(d.out, byte(KindNat))
		if len(raw) == 1 {
			d.out = append(d.out, raw[0])
			*dst = smallNatHash(raw[0])
			return nil
		}
		if raw[len(raw)-1] != 0 {
			d.out = append(d.out, raw...)
			sum256Input(dst, raw)
			return nil
		}
		// Overlong: the encoding, like the hash, holds the canonical form.
		start := len(d.out)
		d.out = natFromLEB(raw).AppendLEB128(d.out)
		sum256To(dst, d.out[start:])
		return nil
	case idNat64:
		b, err := d.take(8)
		if err != nil {
			return err
		}
		u := le64(b)
		d.out = append(d.out, byte(KindNat))
		if u < 0x80 {
			d.out = append(d.out, byte(u))
			*dst = smallNatHash(byte(u))
			return nil
		}
		start := len(d.out)
		d.putUvarint(u)
		sum256To(dst, d.out[start:])
		return nil
	case idInt:
		// No ledger writes Int into a block: the plain big.Int path will do.
		var i *big.Int
		if f.typ == opNat {
			n, err := d.natOnly()
			if err != nil {
				return err
			}
			i = n.Big()
		} else if i, err = d.int(); err != nil {
			return err
		}
		d.out = append(d.out, byte(KindInt))
		start := len(d.out)
		d.out = AppendSLEB128(d.out, i)
		sum256To(dst, d.out[start:])
		return nil
	case idArray:
		inner := d.types[f.typ].inner
		n, err := d.count(2)
		if err != nil {
			return err
		}
		d.out = append(d.out, byte(KindArray))
		d.putUvarint(uint64(n))
		s := d.scratchAt(depth)
		for range n {
			s = append(s, zeroHash[:]...)
			if err := d.rawValue(inner, depth+1, (*Hash)(s[len(s)-32:])); err != nil {
				return err
			}
		}
		d.keepScratch(depth, s)
		sum256To(dst, s)
		return nil
	case idMap:
		rec := &d.types[d.types[f.typ].inner]
		n, err := d.count(3)
		if err != nil {
			return err
		}
		pos := len(d.out) - d.blockStart
		d.out = append(d.out, byte(KindMap))
		d.putUvarint(uint64(n))
		if depth < len(d.entTmp) {
			d.entTmp[depth] = d.entTmp[depth][:0]
		}
		s := d.scratchAt(depth)
		for range n {
			// The key's field id (0) is the lowest there is and the value's
			// (1) the next, so on the wire the key always comes first, as
			// the encoding wants it.
			s = append(s, zeroPair[:]...)
			pair := s[len(s)-64:]
			for _, rf := range rec.fields {
				switch rf.id {
				case idTupleKey:
					var e keyEntry
					if e, err = d.keyEntry(); err == nil {
						copy(pair[:32], e.hash[:])
						d.appendString(e.key)
						if depth < len(d.entTmp) {
							// The value follows its key's bytes.
							val := len(d.out) - d.blockStart
							d.entTmp[depth] = append(d.entTmp[depth], rawEntry{key: val - len(e.key), val: val})
						}
					}
				case idTupleValue:
					err = d.rawValue(rf.typ, depth+1, (*Hash)(pair[32:]))
				default:
					err = d.skip(rf.typ, depth+1)
				}
				if err != nil {
					return err
				}
			}
		}
		if depth < len(d.entTmp) {
			d.ents.add(pos, d.entTmp[depth])
		}
		d.keepScratch(depth, s)
		sorted, distinct := s, false
		if depth < len(d.orders) {
			sorted, distinct = d.orders[depth].sorted(s)
		} else {
			sortPairs(s)
		}
		if depth <= 1 && !d.keysRepeat && !distinct {
			// Sorted, equal keys are neighbours.
			for i := 64; i < len(sorted); i += 64 {
				if [32]byte(sorted[i:i+32]) == [32]byte(sorted[i-64:i-32]) {
					d.keysRepeat = true
					break
				}
			}
		}
		d.mapHash(depth, sorted, dst)
		return nil
	}
	return d.errf("Value: unknown variant tag %d", f.id)
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
func (d *decoder) mapHash(depth int, s []byte, dst *Hash) {
	if !haveSHANI || len(s) < 128 || depth >= len(d.mid) {
		sum256To(dst, s)
		return
	}
	m := &d.mid[depth]
	if !m.ok || !same64(&m.first, s[:64]) {
		m.first = [64]byte(s[:64])
		m.state = sha256IV
		sha256Blocks(&m.state, s[:64])
		m.ok = true
	}
	h := m.state
	sha256Finish(&h, s[64:], uint64(len(s)), dst)
}

// same64 is *a == [64]byte(b) in eight word compares: the array compare
// calls memequal, which costs more than the compare on this hot path.
func same64(a *[64]byte, b []byte) bool {
	b = b[:64]
	var x uint64
	for i := 0; i < 64; i += 8 {
		x |= binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:])
	}
	return x == 0
}

var (
	zeroHash [32]byte
	zeroPair [64]byte
)

// The decoder lives in the heap and the GC is often marking while a page
// is read, so storing a slice header into it costs a write barrier. The
// functions below append in place (the compiler then writes back only the
// length) and store a scratch buffer back only when it moved.

// putUvarint is d.out = AppendUvarint(d.out, u) without the header store.
func (d *decoder) putUvarint(u uint64) {
	for u >= 0x80 {
		d.out = append(d.out, byte(u)|0x80)
		u >>= 7
	}
	d.out = append(d.out, byte(u))
}

// putBytes is d.out = append(d.out, b...), which stores the whole header.
func putBytes[T string | []byte](d *decoder, b T) {
	n := len(d.out)
	if cap(d.out)-n < len(b) {
		d.out = append(d.out, b...)
		return
	}
	d.out = d.out[:n+len(b)]
	copy(d.out[n:], b)
}

// keepScratch keeps s, grown from d.scratchAt(depth), for the next Value
// at depth; scratchAt reslices it to zero length then, so only a new
// array needs storing.
func (d *decoder) keepScratch(depth int, s []byte) {
	if cap(s) != cap(d.scratch[depth]) {
		d.scratch[depth] = s
	}
}

func (d *decoder) appendBytes(k Kind, b []byte) {
	d.out = append(d.out, byte(k))
	d.putUvarint(uint64(len(b)))
	putBytes(d, b)
}

func (d *decoder) appendString(s string) {
	d.putUvarint(uint64(len(s)))
	putBytes(d, s)
}

// keyEntry reads a Map key through the per-reply intern table.
func (d *decoder) keyEntry() (keyEntry, error) {
	b, err := d.blob()
	if err != nil {
		return keyEntry{}, err
	}
	return d.intern(b)
}
