package icrc3

import (
	"fmt"

	"github.com/aviate-labs/agent-go/principal"
)

// Parsing a block from its block-cache encoding (MarshalValue's format)
// without building the Value tree: the same rules, checks, order and error
// messages as ParseBlock, which stays the reference the tests compare with.
// The parsed fields alias raw.

// ParseRawBlock parses block index from its Value's encoding raw (as
// MarshalValue writes it); h is the Value's hash. It is ParseBlock of
// UnmarshalValue(raw) without the tree: input UnmarshalValue refuses is
// refused, and the result's Raw and byte fields alias raw.
func ParseRawBlock(index uint64, raw []byte, h Hash) (Block, error) {
	d := decoder{buf: raw}
	if err := d.codecCheck(); err != nil {
		return Block{}, fmt.Errorf("icrc3: block %d: %w", index, err)
	}
	var rp rawParser
	var b Block
	if err := rp.parse(&b, index, raw, h, new(blockParts), false, nil); err != nil {
		return Block{}, err
	}
	return b, nil
}

// codecCheck accepts exactly the encodings UnmarshalValue decodes.
func (d *decoder) codecCheck() error {
	if len(d.buf) == 0 {
		return fmt.Errorf("unmarshal value: empty input")
	}
	if d.buf[0] != valueCodecV1 {
		return fmt.Errorf("unmarshal value: unknown format version %d", d.buf[0])
	}
	d.pos = 1
	if err := d.codecSkip(0); err != nil {
		return fmt.Errorf("unmarshal value: %w", err)
	}
	if err := d.finish(); err != nil {
		return fmt.Errorf("unmarshal value: %w", err)
	}
	return nil
}

// codecSkip reads past one encoded value by codecValue's rules.
func (d *decoder) codecSkip(depth int) error {
	if depth >= MaxValueDepth {
		return d.errf("value nested deeper than %d", MaxValueDepth)
	}
	k, err := d.byte1()
	if err != nil {
		return err
	}
	switch Kind(k) {
	case KindBlob, KindText:
		_, err = d.blob()
	case KindNat, KindInt:
		_, err = d.leb()
	case KindArray:
		n, err := d.count(2)
		if err != nil {
			return err
		}
		for range n {
			if err := d.codecSkip(depth + 1); err != nil {
				return err
			}
		}
	case KindMap:
		n, err := d.count(3)
		if err != nil {
			return err
		}
		for range n {
			if _, err := d.blob(); err != nil {
				return err
			}
			if err := d.codecSkip(depth + 1); err != nil {
				return err
			}
		}
	default:
		return d.errf("unknown value kind %d", k)
	}
	return err
}

// The readers below take a well-formed encoding (checked by codecCheck, or
// written by rawValue) and an offset; pos is the offset of a value's kind
// byte throughout.

func rawUvarint(raw []byte, pos int) (uint64, int) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c := raw[pos]
		pos++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, pos
		}
	}
}

func rawLEBEnd(raw []byte, pos int) int {
	for raw[pos] >= 0x80 {
		pos++
	}
	return pos + 1
}

// rawBytes returns the bytes of a Blob or Text at pos.
func rawBytes(raw []byte, pos int) []byte {
	l, p := rawUvarint(raw, pos+1)
	e := p + int(l)
	return raw[p:e:e]
}

// rawCount returns the length of an Array or Map at pos and the offset of
// its first element.
func rawCount(raw []byte, pos int) (int, int) {
	n, p := rawUvarint(raw, pos+1)
	return int(n), p
}

func rawSkip(raw []byte, pos int) int {
	switch Kind(raw[pos]) {
	case KindBlob, KindText:
		l, p := rawUvarint(raw, pos+1)
		return p + int(l)
	case KindNat, KindInt:
		return rawLEBEnd(raw, pos+1)
	case KindArray:
		n, p := rawCount(raw, pos)
		for range n {
			p = rawSkip(raw, p)
		}
		return p
	case KindMap:
		n, p := rawCount(raw, pos)
		for range n {
			l, q := rawUvarint(raw, p)
			p = rawSkip(raw, q+int(l))
		}
		return p
	}
	panic(fmt.Sprintf("icrc3: value encoding has kind %d at %d after being checked", raw[pos], pos))
}

// rawDescribe is describe for an encoded value.
func rawDescribe(raw []byte, pos int) string {
	switch k := Kind(raw[pos]); k {
	case KindBlob:
		return fmt.Sprintf("Blob of %d bytes", len(rawBytes(raw, pos)))
	case KindArray:
		n, _ := rawCount(raw, pos)
		return fmt.Sprintf("Array of %d", n)
	case KindMap:
		n, _ := rawCount(raw, pos)
		return fmt.Sprintf("Map of %d", n)
	default:
		return k.String()
	}
}

func rawNat(raw []byte, pos int) (Nat, error) {
	if Kind(raw[pos]) != KindNat {
		return Nat{}, fmt.Errorf("want Nat, got %s", rawDescribe(raw, pos))
	}
	if c := raw[pos+1]; c < 0x80 {
		return Nat{lo: uint64(c)}, nil
	}
	return natFromLEB(raw[pos+1 : rawLEBEnd(raw, pos+1)]), nil
}

func rawNatU64(raw []byte, pos int) (uint64, error) {
	n, err := rawNat(raw, pos)
	if err != nil {
		return 0, err
	}
	u, ok := n.Uint64()
	if !ok {
		return 0, fmt.Errorf("Nat %s does not fit in 64 bits", n)
	}
	return u, nil
}

// rawAccount is parseAccount for an encoded value.
func rawAccount(raw []byte, pos int, a *Account) error {
	n, p := 0, 0
	if Kind(raw[pos]) == KindArray {
		n, p = rawCount(raw, pos)
	}
	if n < 1 || n > 2 {
		return fmt.Errorf("want an account (Array of 1 or 2 Blobs), got %s", rawDescribe(raw, pos))
	}
	if Kind(raw[p]) != KindBlob {
		return fmt.Errorf("account owner: want Blob, got %s", rawDescribe(raw, p))
	}
	owner := rawBytes(raw, p)
	if len(owner) > 29 {
		return fmt.Errorf("account owner of %d bytes exceeds 29", len(owner))
	}
	a.Owner = principal.Principal{Raw: owner}
	a.Subaccount = nil
	if n == 2 {
		p = rawSkip(raw, p)
		if Kind(raw[p]) != KindBlob || len(rawBytes(raw, p)) != 32 {
			return fmt.Errorf("account subaccount: want a 32-byte Blob, got %s", rawDescribe(raw, p))
		}
		a.Subaccount = rawBytes(raw, p)
	}
	return nil
}

// rawEntry is one entry of an encoded Map: the offsets of its key's bytes
// and of its value, which follows them. Offsets, not slices: the entry
// lists live in the heap, and storing a slice there costs a GC write
// barrier.
type rawEntry struct {
	key, val int
}

func (e rawEntry) keyOf(raw []byte) []byte { return raw[e.key:e.val:e.val] }

func rawEntries(raw []byte, pos int, dst []rawEntry) []rawEntry {
	n, p := rawCount(raw, pos)
	for range n {
		l, q := rawUvarint(raw, p)
		e := q + int(l)
		dst = append(dst, rawEntry{key: q, val: e})
		p = rawSkip(raw, e)
	}
	return dst
}

func rawGet(raw []byte, es []rawEntry, key string) (int, bool) {
	for i := range es {
		if string(es[i].keyOf(raw)) == key {
			return es[i].val, true
		}
	}
	return 0, false
}

// rawDuplicate is duplicateKey for encoded entries: the first key that
// repeats an earlier one.
func rawDuplicate(raw []byte, es []rawEntry) (string, bool) {
	if len(es) <= 16 {
		for i := 1; i < len(es); i++ {
			for j := 0; j < i; j++ {
				if string(es[i].keyOf(raw)) == string(es[j].keyOf(raw)) {
					return string(es[i].keyOf(raw)), true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(es))
	for i := range es {
		k := string(es[i].keyOf(raw))
		if _, ok := seen[k]; ok {
			return k, true
		}
		seen[k] = struct{}{}
	}
	return "", false
}

// knownText returns the texts every block repeats without allocating.
func knownText(b []byte) string {
	switch string(b) {
	case "xfer":
		return "xfer"
	case "mint":
		return "mint"
	case "burn":
		return "burn"
	case "approve":
		return "approve"
	case "1xfer":
		return "1xfer"
	case "2xfer":
		return "2xfer"
	case "1mint":
		return "1mint"
	case "1burn":
		return "1burn"
	case "2approve":
		return "2approve"
	}
	return string(b)
}

// blockEntries are the entries of a block's map and of the Maps directly
// in it, as the page decoder met them while writing the encoding: the
// same lists rawEntries finds by walking it.
type blockEntries struct {
	maps []entMap
	slab []rawEntry
}

// entMap is one Map's entries, slab[lo:hi], and the offset of its kind
// byte in the block's encoding.
type entMap struct{ pos, lo, hi int }

func (be *blockEntries) add(pos int, es []rawEntry) {
	lo := len(be.slab)
	be.slab = append(be.slab, es...)
	be.maps = append(be.maps, entMap{pos: pos, lo: lo, hi: len(be.slab)})
}

// entries are the entries of the Map at pos, from be when it has them,
// else read from raw into dst.
func (be *blockEntries) entries(raw []byte, pos int, dst []rawEntry) []rawEntry {
	if be != nil {
		for _, m := range be.maps {
			if m.pos == pos {
				return be.slab[m.lo:m.hi:m.hi]
			}
		}
	}
	return rawEntries(raw, pos, dst[:0])
}

// rawParser keeps the entry lists between blocks, so parsing a page does not
// allocate them per block, and a slab for the blocks' moreParts.
type rawParser struct {
	root, tx []rawEntry
	more     moreSlab
}

// parse parses into b, which must be zero but for the Index, Hash and Raw
// it sets, and holds garbage when parse fails. Filling the caller's block in place, field by field, saves
// copying it (and its pointers' write barriers) out of a return value or
// a composite literal. keysDistinct says the block's map and
// every Map directly in it (tx among them) were seen to have no two equal
// key hashes, hence no repeated key: the duplicate checks, which could
// then find nothing, are skipped. be, when not nil, holds the block's
// entries as the decoder met them.
func (rp *rawParser) parse(b *Block, index uint64, raw []byte, h Hash, p *blockParts, keysDistinct bool, be *blockEntries) error {
	bad := func(field, format string, args ...any) error {
		return &BlockError{Index: index, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if k := Kind(raw[1]); k != KindMap {
		return bad("block", "is a %s, not a Map", k)
	}
	root := be.entries(raw, 1, rp.root)
	if be == nil {
		rp.root = root // kept for the next block's list
	}
	var txEnts []rawEntry
	phash, btype, ts, fee, tx := -1, -1, -1, -1, -1
	for _, e := range root {
		var slot *int
		switch string(e.keyOf(raw)) {
		case "phash":
			slot = &phash
		case "btype":
			slot = &btype
		case "ts":
			slot = &ts
		case "fee":
			slot = &fee
		case "tx":
			slot = &tx
		default:
			continue
		}
		if *slot >= 0 {
			return bad(string(e.keyOf(raw)), "duplicate key")
		}
		*slot = e.val
	}

	b.Index, b.Hash, b.Raw = index, h, raw
	if phash >= 0 {
		if Kind(raw[phash]) != KindBlob || len(rawBytes(raw, phash)) != 32 {
			return bad("phash", "want a 32-byte Blob, got %s", rawDescribe(raw, phash))
		}
		copy(p.phash[:], rawBytes(raw, phash))
		b.PHash = &p.phash
	}
	if ts >= 0 {
		t, err := rawNatU64(raw, ts)
		if err != nil {
			return bad("ts", "%v", err)
		}
		b.TS = t
	}
	if btype >= 0 {
		if Kind(raw[btype]) != KindText {
			return bad("btype", "want Text, got %s", rawDescribe(raw, btype))
		}
		b.BType = knownText(rawBytes(raw, btype))
	}
	txMap := tx >= 0 && Kind(raw[tx]) == KindMap
	hasOp := false
	if tx >= 0 {
		if !txMap {
			if btype < 0 {
				return bad("tx", "want Map, got %s", rawDescribe(raw, tx))
			}
		} else {
			txEnts = be.entries(raw, tx, rp.tx)
			if be == nil {
				rp.tx = txEnts
			}
			for _, k := range [...]string{"op", "spender"} {
				if keysDistinct {
					break
				}
				seen := false
				for _, e := range txEnts {
					if string(e.keyOf(raw)) == k {
						if seen {
							return bad("tx."+k, "duplicate key")
						}
						seen = true
					}
				}
			}
			if o, ok := rawGet(raw, txEnts, "op"); ok {
				if Kind(raw[o]) != KindText {
					return bad("tx.op", "want Text, got %s", rawDescribe(raw, o))
				}
				b.Op = knownText(rawBytes(raw, o))
				hasOp = true
			}
		}
	}

	switch {
	case btype >= 0:
		switch b.BType {
		case string(BlockTransfer), string(BlockTransferFrom), string(BlockMint), string(BlockBurn), string(BlockApprove):
			b.Kind = BlockKind(b.BType)
		}
	case hasOp:
		switch b.Op {
		case "xfer":
			b.Kind = BlockTransfer
			if _, ok := rawGet(raw, txEnts, "spender"); ok {
				b.Kind = BlockTransferFrom
			}
		case "mint":
			b.Kind = BlockMint
		case "burn":
			b.Kind = BlockBurn
		case "approve":
			b.Kind = BlockApprove
		}
	}
	if b.Kind == BlockUnknown {
		return nil
	}

	if !keysDistinct {
		if k, dup := rawDuplicate(raw, root); dup {
			return bad(k, "duplicate key")
		}
		if txMap {
			if k, dup := rawDuplicate(raw, txEnts); dup {
				return bad("tx."+k, "duplicate key")
			}
		}
	}
	if ts < 0 {
		return bad("ts", "missing")
	}
	if fee >= 0 {
		n, err := rawNat(raw, fee)
		if err != nil {
			return bad("fee", "%v", err)
		}
		p.blockFee = n
		b.BlockFee = &p.blockFee
	}
	if tx < 0 {
		return bad("tx", "missing")
	}
	if !txMap {
		return bad("tx", "want Map, got %s", rawDescribe(raw, tx))
	}
	var hasFrom, hasTo, hasSpender bool
	for _, e := range txEnts {
		var err error
		switch string(e.keyOf(raw)) {
		case "from":
			err = rawAccount(raw, e.val, &p.from)
			b.From, hasFrom = &p.from, true
		case "to":
			err = rawAccount(raw, e.val, &p.to)
			b.To, hasTo = &p.to, true
		case "spender":
			m := p.extra(&rp.more)
			err = rawAccount(raw, e.val, &m.spender)
			b.Spender, hasSpender = &m.spender, true
		case "amt":
			p.amt, err = rawNat(raw, e.val)
			b.Amount = &p.amt
		case "fee":
			p.fee, err = rawNat(raw, e.val)
			b.Fee = &p.fee
		case "expected_allowance":
			m := p.extra(&rp.more)
			m.ea, err = rawNat(raw, e.val)
			b.ExpectedAllowance = &m.ea
		case "memo":
			if Kind(raw[e.val]) != KindBlob {
				err = fmt.Errorf("want Blob, got %s", rawDescribe(raw, e.val))
			} else {
				b.Memo, b.HasMemo = rawBytes(raw, e.val), true
			}
		case "ts":
			p.createdAt, err = rawNatU64(raw, e.val)
			b.CreatedAt = &p.createdAt
		case "expires_at":
			m := p.extra(&rp.more)
			m.expiresAt, err = rawNatU64(raw, e.val)
			b.ExpiresAt = &m.expiresAt
		}
		if err != nil {
			return bad("tx."+string(e.keyOf(raw)), "%v", err)
		}
	}
	if b.Amount == nil {
		return bad("tx.amt", "missing")
	}
	var missing string
	switch b.Kind {
	case BlockTransfer, BlockTransferFrom:
		missing = firstMissing(hasFrom, "from", hasTo, "to")
	case BlockMint:
		missing = firstMissing(hasTo, "to", true, "")
	case BlockBurn:
		missing = firstMissing(hasFrom, "from", true, "")
	case BlockApprove:
		missing = firstMissing(hasFrom, "from", hasSpender, "spender")
	}
	if missing != "" {
		return bad("tx."+missing, "missing")
	}
	return nil
}

func firstMissing(has1 bool, k1 string, has2 bool, k2 string) string {
	switch {
	case !has1:
		return k1
	case !has2:
		return k2
	}
	return ""
}
