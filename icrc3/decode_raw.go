package icrc3

import (
	"encoding/binary"
	"math/big"
	"unicode/utf8"
)

// The block pages' hot path: each block's Value is read from the Candid
// bytes straight into the block-cache encoding (MarshalValue's format),
// its hashes queued on the way (hashjobs.go), and parsed from that
// encoding (parseRaw). No Value
// tree is built: a tree costs a dozen 100-byte nodes per block that
// hashing and parsing never need, and the cache stores the encoding anyway.
// The tree-building reader (value, in decode_value.go) stays as the oracle
// the differential tests hold this one to.

// rawBlock reads one block Value of a checked variant type into d.out as a
// complete encoding (version byte included) and returns it; the block's
// hash is written to dst at once or by a later flushHashes.
// The returned slice is capped, so later appends never write into it.
//
// d.keysRepeat tells afterwards whether the block's map, or a Map directly
// in it, has two equal key hashes (a repeated key).
func (d *decoder) rawBlock(ref int64, dst hashRef) ([]byte, error) {
	d.keysRepeat = false
	start := len(d.out)
	d.blockStart = start
	d.ents.maps = d.ents.maps[:0]
	d.ents.slab = d.ents.slab[:0]
	d.out = append(d.out, valueCodecV1)
	if _, err := d.rawValue(ref, 0, dst); err != nil {
		return nil, err
	}
	return d.out[start:len(d.out):len(d.out)], nil
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
// d.out and has its representation-independent hash written to dst (the
// slot in the parent's pairs, so hashes are not copied up): at once, when
// it is known without hashing, or by flushHashes, which runs the sums
// queued at each height in turn. It returns the Value's height (0 for a
// leaf). It accepts and rejects exactly what value does, with the same
// errors, in the same order.
func (d *decoder) rawValue(ref int64, depth int, dst hashRef) (int, error) {
	if depth >= MaxValueDepth {
		return 0, d.errf("Value nested deeper than %d", MaxValueDepth)
	}
	if err := d.spend(); err != nil {
		return 0, err
	}
	t := &d.types[ref]
	tag, err := d.uleb()
	if err != nil {
		return 0, err
	}
	if tag >= uint64(len(t.fields)) {
		return 0, d.errf("variant index %d out of range", tag)
	}
	f := t.fields[tag]
	switch f.id {
	case idBlob:
		b, err := d.blob()
		if err != nil {
			return 0, err
		}
		d.appendBytes(KindBlob, b)
		if len(b) == 32 && [32]byte(b) == [32]byte{} {
			*d.hs.slot(dst) = zeroSubaccountHash
			return 0, nil
		}
		d.hs.add(srcInput, d.pos-len(b), len(b), dst)
		return 0, nil
	case idText:
		if e := d.shortText(); e != nil {
			*d.hs.slot(dst) = e.hash
			d.out = append(d.out, byte(KindText))
			d.appendString(e.key)
			return 0, nil
		}
		b, err := d.blob()
		if err != nil {
			return 0, err
		}
		if len(b) <= 16 {
			e, err := d.intern(b)
			if err != nil {
				return 0, err
			}
			d.keepShort(e)
			*d.hs.slot(dst) = e.hash
		} else {
			if !utf8.Valid(b) {
				return 0, d.errf("text is not valid UTF-8")
			}
			d.hs.add(srcInput, d.pos-len(b), len(b), dst)
		}
		d.appendBytes(KindText, b)
		return 0, nil
	case idNat:
		raw, err := d.leb()
		if err != nil {
			return 0, err
		}
		d.out = append(d.out, byte(KindNat))
		if len(raw) == 1 {
			d.out = append(d.out, raw[0])
			*d.hs.slot(dst) = smallNatHash(raw[0])
			return 0, nil
		}
		if raw[len(raw)-1] != 0 {
			d.out = append(d.out, raw...)
			d.hs.add(srcInput, d.pos-len(raw), len(raw), dst)
			return 0, nil
		}
		// Overlong: the encoding, like the hash, holds the canonical form.
		start := len(d.out)
		d.out = natFromLEB(raw).AppendLEB128(d.out)
		d.hs.add(srcOut, start, len(d.out)-start, dst)
		return 0, nil
	case idNat64:
		b, err := d.take(8)
		if err != nil {
			return 0, err
		}
		u := le64(b)
		d.out = append(d.out, byte(KindNat))
		if u < 0x80 {
			d.out = append(d.out, byte(u))
			*d.hs.slot(dst) = smallNatHash(byte(u))
			return 0, nil
		}
		start := len(d.out)
		d.putUvarint(u)
		d.hs.add(srcOut, start, len(d.out)-start, dst)
		return 0, nil
	case idInt:
		// No ledger writes Int into a block: the plain big.Int path will do.
		var i *big.Int
		if f.typ == opNat {
			n, err := d.natOnly()
			if err != nil {
				return 0, err
			}
			i = n.Big()
		} else if i, err = d.int(); err != nil {
			return 0, err
		}
		d.out = append(d.out, byte(KindInt))
		start := len(d.out)
		d.out = AppendSLEB128(d.out, i)
		d.hs.add(srcOut, start, len(d.out)-start, dst)
		return 0, nil
	case idArray:
		inner := d.types[f.typ].inner
		n, err := d.count(2)
		if err != nil {
			return 0, err
		}
		d.out = append(d.out, byte(KindArray))
		d.putUvarint(uint64(n))
		sl, err := d.openSlots(32, n)
		if err != nil {
			return 0, err
		}
		h := 0
		for i := range n {
			at, err := d.slotAt(&sl, i)
			if err != nil {
				return 0, err
			}
			ch, err := d.rawValue(inner, depth+1, hashRef(at))
			if err != nil {
				return 0, err
			}
			h = max(h, ch)
		}
		d.hs.queueComp(h+1, compJob{off: uint32(sl.off), n: uint32(n), dst: dst, mid: -1})
		return h + 1, nil
	case idMap:
		rec := &d.types[d.types[f.typ].inner]
		n, err := d.count(3)
		if err != nil {
			return 0, err
		}
		pos := len(d.out) - d.blockStart
		d.out = append(d.out, byte(KindMap))
		d.putUvarint(uint64(n))
		if depth < len(d.entTmp) {
			d.entTmp[depth] = d.entTmp[depth][:0]
		}
		sl, err := d.openSlots(64, n)
		if err != nil {
			return 0, err
		}
		h := 0
		for i := range n {
			// The key's field id (0) is the lowest there is and the value's
			// (1) the next, so on the wire the key always comes first, as
			// the encoding wants it. The arena may move while the value is
			// read, so the pair is found by its offset each time.
			pair, err := d.slotAt(&sl, i)
			if err != nil {
				return 0, err
			}
			for _, rf := range rec.fields {
				switch rf.id {
				case idTupleKey:
					var e keyEntry
					if e, err = d.keyEntry(); err == nil {
						copy(d.hs.arena[pair:pair+32], e.hash[:])
						d.appendString(e.key)
						if depth < len(d.entTmp) {
							// The value follows its key's bytes.
							val := len(d.out) - d.blockStart
							d.entTmp[depth] = append(d.entTmp[depth], rawEntry{key: val - len(e.key), val: val})
						}
					}
				case idTupleValue:
					var ch int
					ch, err = d.rawValue(rf.typ, depth+1, hashRef(pair+32))
					h = max(h, ch)
				default:
					err = d.skip(rf.typ, depth+1)
				}
				if err != nil {
					return 0, err
				}
			}
		}
		if depth < len(d.entTmp) {
			d.ents.add(pos, d.entTmp[depth])
		}
		var c *orderCache
		if depth < len(d.orders) {
			c = &d.orders[depth]
		}
		s := d.hs.arena[sl.off : sl.off+64*n]
		perm, ok := c.order(s)
		if !ok {
			// A repeated key (or a map too large to order by keys): the
			// values decide, so they are hashed now, with everything else
			// queued, and this map with them.
			d.flushHashes()
			s = d.hs.arena[sl.off : sl.off+64*n]
			sortPairs(s)
			if depth <= 1 {
				for i := 64; i < len(s); i += 64 {
					if [32]byte(s[i:i+32]) == [32]byte(s[i-64:i-32]) {
						d.keysRepeat = true
						break
					}
				}
			}
			sum256To(d.hs.slot(dst), s)
			return 0, nil
		}
		mid := int8(-1)
		if depth < len(d.mid) {
			mid = int8(depth)
		}
		d.hs.queueComp(h+1, compJob{off: uint32(sl.off), n: uint32(n), dst: dst, perm: perm, isMap: true, mid: mid})
		return h + 1, nil
	}
	return 0, d.errf("Value: unknown variant tag %d", f.id)
}

// mapMidstate is the SHA-256 state after the first 64-byte block (the
// first pair) of the last map hashed at one depth (see batchComp).
type mapMidstate struct {
	first [64]byte
	state [8]uint32
	ok    bool // state is after first
	seen  bool // first is the last map's, state not yet computed
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
	if e := d.shortText(); e != nil {
		return *e, nil
	}
	b, err := d.blob()
	if err != nil {
		return keyEntry{}, err
	}
	e, err := d.intern(b)
	if err == nil {
		d.keepShort(e)
	}
	return e, err
}

// shortTexts is a two-way table of the texts of up to seven bytes met in
// the pages read (a block's keys, tx.op): such a text on the wire is its
// length byte and its bytes, which one 8-byte load reads, so a repeat is
// found by a word compare or two instead of a string compare and a lookup.
type shortTexts [128]struct {
	w uint64 // the length in the top byte, the bytes below; 0 if empty
	e keyEntry
}

// shortSlot is the first of the two slots w may be in.
func shortSlot(w uint64) int { return int((w*0x9e3779b97f4a7c15)>>57) &^ 1 }

// shortText reads a text at d.pos that the table holds, or returns nil and
// reads nothing.
func (d *decoder) shortText() *keyEntry {
	p := d.pos
	if p+9 > len(d.buf) {
		return nil
	}
	n := d.buf[p]
	if n == 0 || n > 7 {
		return nil
	}
	w := binary.LittleEndian.Uint64(d.buf[p+1:])&(1<<(8*n)-1) | uint64(n)<<56
	i := shortSlot(w)
	s := &d.hs.short[i]
	if s.w != w {
		if s = &d.hs.short[i+1]; s.w != w {
			return nil
		}
	}
	d.pos = p + 1 + int(n)
	return &s.e
}

// keepShort puts an interned text in the short table if it fits.
func (d *decoder) keepShort(e keyEntry) {
	n := len(e.key)
	if n == 0 || n > 7 {
		return
	}
	var b [8]byte
	copy(b[:], e.key)
	w := binary.LittleEndian.Uint64(b[:]) | uint64(n)<<56
	i := shortSlot(w)
	s := &d.hs.short[i]
	if s.w != 0 && s.w != w {
		// The first slot is another's: take the second, whoever is there.
		s = &d.hs.short[i+1]
	}
	s.w, s.e = w, e
}
