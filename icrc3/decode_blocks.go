package icrc3

import (
	"bytes"
	"fmt"
	"math"

	"github.com/aviate-labs/agent-go/principal"
)

// Callback is a Candid func reference: the canister and method an archived
// range is read from.
type Callback struct {
	Canister principal.Principal
	Method   string
}

// BlockRange is a range of block indices, [Start, Start+Length).
type BlockRange struct {
	Start, Length uint64
}

// ArchivedBlocks is one archive callback of an icrc3_get_blocks reply with
// the ranges to ask it for.
type ArchivedBlocks struct {
	Callback Callback
	Args     []BlockRange
}

// GetBlocksResult is a decoded icrc3_get_blocks reply (ledger or archive).
type GetBlocksResult struct {
	LogLength Nat
	Blocks    []Block // Index from the reply's id; Hash computed while decoding
	Archived  []ArchivedBlocks
}

// LegacyArchivedRange is one archived range of a legacy get_blocks reply.
type LegacyArchivedRange struct {
	Start, Length uint64
	Callback      Callback
}

// LegacyGetBlocksResult is a decoded legacy DFINITY get_blocks reply.
type LegacyGetBlocksResult struct {
	FirstIndex  uint64
	ChainLength uint64
	Certificate []byte // nil when the opt is null or absent
	Blocks      []Block
	Archived    []LegacyArchivedRange
}

// DecodeGetBlocksResult decodes an icrc3_get_blocks reply (from a ledger or
// an archive), hashing and parsing every block. A block that is malformed by
// ParseBlock's rules fails the whole reply: a page is trusted only whole.
func DecodeGetBlocksResult(b []byte) (*GetBlocksResult, error) {
	d := newDecoder(b)
	res, err := d.getBlocksResult()
	if err != nil {
		return nil, fmt.Errorf("icrc3: decode icrc3_get_blocks reply: %w", err)
	}
	return res, nil
}

// DecodeLegacyGetBlocks decodes a legacy DFINITY get_blocks reply. Blocks are
// numbered from first_index; Nat64 values read as Nat (they hash alike).
func DecodeLegacyGetBlocks(b []byte) (*LegacyGetBlocksResult, error) {
	d := newDecoder(b)
	res, err := d.legacyGetBlocks()
	if err != nil {
		return nil, fmt.Errorf("icrc3: decode get_blocks reply: %w", err)
	}
	return res, nil
}

// DecodeLegacyBlockRange decodes the reply of a legacy archive callback,
// record { blocks : vec Value }, numbering the blocks from first.
func DecodeLegacyBlockRange(b []byte, first uint64) ([]Block, error) {
	d := newDecoder(b)
	blocks, err := d.legacyBlockRange(first)
	if err != nil {
		return nil, fmt.Errorf("icrc3: decode archived block range from %d: %w", first, err)
	}
	return blocks, nil
}

func (d *decoder) requireFields(rec *candidType, what string, names ...string) error {
	for _, name := range names {
		if _, miss := missing(rec, fieldID(name)); miss {
			return d.typeErrf("%s: field %q missing", what, name)
		}
	}
	return nil
}

func (d *decoder) getBlocksResult() (*GetBlocksResult, error) {
	ref, err := d.readHeader()
	if err != nil {
		return nil, err
	}
	rec, err := d.record(ref, "GetBlocksResult")
	if err != nil {
		return nil, err
	}
	if err := d.requireFields(rec, "GetBlocksResult", "log_length", "blocks", "archived_blocks"); err != nil {
		return nil, err
	}
	// Check every expected field's wire type before reading any value, so a
	// mismatching reply is rejected the same way whatever its content.
	var blockRec, archRec, rangeRec *candidType
	for _, f := range rec.fields {
		switch f.id {
		case idLogLength:
			if f.typ != opNat {
				return nil, d.typeErrf("log_length: wire type is not nat")
			}
		case idBlocks:
			if blockRec, err = d.blockEntryType(f.typ); err != nil {
				return nil, err
			}
		case idArchivedBlocks:
			inner, err := d.vecOf(f.typ, "archived_blocks")
			if err != nil {
				return nil, err
			}
			if archRec, err = d.record(inner, "archived_blocks entry"); err != nil {
				return nil, err
			}
			if err := d.requireFields(archRec, "archived_blocks entry", "args", "callback"); err != nil {
				return nil, err
			}
			for _, af := range archRec.fields {
				switch af.id {
				case idArgs:
					inner, err := d.vecOf(af.typ, "archived_blocks.args")
					if err != nil {
						return nil, err
					}
					if rangeRec, err = d.rangeType(inner, "archived_blocks.args entry"); err != nil {
						return nil, err
					}
				case idCallback:
					if d.op(af.typ) != opFunc {
						return nil, d.typeErrf("archived_blocks.callback: wire type is not a func")
					}
				}
			}
		}
	}

	res := &GetBlocksResult{}
	for _, f := range rec.fields {
		switch f.id {
		case idLogLength:
			if res.LogLength, _, err = d.nat(); err != nil {
				return nil, err
			}
		case idBlocks:
			n, err := d.count(3)
			if err != nil {
				return nil, err
			}
			res.Blocks = make([]Block, 0, min(n, 2048))
			d.reserveOut(n)
			for i := range n {
				res.Blocks = growZero(res.Blocks)
				if !d.tree {
					d.pageBlocks(res.Blocks)
				}
				if err := d.blockEntry(blockRec, &res.Blocks[i], i); err != nil {
					return nil, err
				}
				if !d.tree {
					d.blockQueued(res.Blocks)
				}
			}
			if !d.tree {
				d.endPage()
			}
		case idArchivedBlocks:
			n, err := d.count(2)
			if err != nil {
				return nil, err
			}
			res.Archived = make([]ArchivedBlocks, 0, min(n, 64))
			for range n {
				var a ArchivedBlocks
				for _, af := range archRec.fields {
					switch af.id {
					case idArgs:
						m, err := d.count(2)
						if err != nil {
							return nil, err
						}
						a.Args = make([]BlockRange, 0, min(m, 64))
						for range m {
							r, err := d.rangeValue(rangeRec)
							if err != nil {
								return nil, err
							}
							a.Args = append(a.Args, r)
						}
					case idCallback:
						if a.Callback, err = d.funcRef(); err != nil {
							return nil, err
						}
					default:
						if err := d.skip(af.typ, 1); err != nil {
							return nil, err
						}
					}
				}
				res.Archived = append(res.Archived, a)
			}
		default:
			if err := d.skip(f.typ, 0); err != nil {
				return nil, err
			}
		}
	}
	return res, d.finish()
}

func (d *decoder) blockEntryType(ref int64) (*candidType, error) {
	inner, err := d.vecOf(ref, "blocks")
	if err != nil {
		return nil, err
	}
	rec, err := d.record(inner, "blocks entry")
	if err != nil {
		return nil, err
	}
	if err := d.requireFields(rec, "blocks entry", "id", "block"); err != nil {
		return nil, err
	}
	for _, f := range rec.fields {
		switch f.id {
		case idID:
			if f.typ != opNat {
				return nil, d.typeErrf("blocks.id: wire type is not nat")
			}
		case idBlock:
			if err := d.checkValue(f.typ); err != nil {
				return nil, fmt.Errorf("blocks.block: %w", err)
			}
		}
	}
	return rec, nil
}

func (d *decoder) blockEntry(rec *candidType, dst *Block, index int) error {
	var (
		id  uint64
		v   Value
		raw []byte
		h   Hash
		err error
	)
	for _, f := range rec.fields {
		switch f.id {
		case idID:
			id, err = d.natU64("block id")
		case idBlock:
			if d.tree {
				h, err = d.value(f.typ, 0, &v)
			} else {
				// The hash may come later: parse below copies what is there
				// now, and the flush writes over it.
				raw, err = d.rawBlock(f.typ, blockRef|hashRef(index))
				h = dst.Hash
			}
		default:
			err = d.skip(f.typ, 1)
		}
		if err != nil {
			return err
		}
	}
	if !d.tree {
		return d.rp.parse(dst, id, raw, h, d.part(), !d.keysRepeat, &d.ents)
	}
	d.trees = append(d.trees, v)
	blk, err := parseTree(id, v, h)
	if err != nil {
		return err
	}
	*dst = blk
	return nil
}

// part carves one block's parts from a slab, so a page of parsed blocks
// costs a few allocations instead of one per block.
func (d *decoder) part() *blockParts {
	// An index, not d.parts = d.parts[1:]: storing the moved slice
	// would cost a write barrier per block while the GC marks.
	if d.partsUsed == len(d.parts) {
		d.parts, d.partsUsed = make([]blockParts, 256), 0
	}
	d.partsUsed++
	return &d.parts[d.partsUsed-1]
}

func (d *decoder) rangeType(ref int64, what string) (*candidType, error) {
	rec, err := d.record(ref, what)
	if err != nil {
		return nil, err
	}
	if err := d.requireFields(rec, what, "start", "length"); err != nil {
		return nil, err
	}
	for _, f := range rec.fields {
		if (f.id == idStart || f.id == idLength) && f.typ != opNat {
			return nil, d.typeErrf("%s: start/length wire type is not nat", what)
		}
	}
	return rec, nil
}

func (d *decoder) rangeValue(rec *candidType) (BlockRange, error) {
	var r BlockRange
	var err error
	for _, f := range rec.fields {
		switch f.id {
		case idStart:
			r.Start, err = d.natU64("range start")
		case idLength:
			r.Length, err = d.natU64("range length")
		default:
			err = d.skip(f.typ, 1)
		}
		if err != nil {
			return BlockRange{}, err
		}
	}
	return r, nil
}

func (d *decoder) legacyGetBlocks() (*LegacyGetBlocksResult, error) {
	ref, err := d.readHeader()
	if err != nil {
		return nil, err
	}
	rec, err := d.record(ref, "GetBlocksResponse")
	if err != nil {
		return nil, err
	}
	if err := d.requireFields(rec, "GetBlocksResponse", "first_index", "chain_length", "blocks", "archived_blocks"); err != nil {
		return nil, err
	}
	var valueRef int64
	var archRec *candidType
	for _, f := range rec.fields {
		switch f.id {
		case idFirstIndex:
			if f.typ != opNat {
				return nil, d.typeErrf("first_index: wire type is not nat")
			}
		case idChainLength:
			if f.typ != opNat64 {
				return nil, d.typeErrf("chain_length: wire type is not nat64")
			}
		case idBlocks:
			if valueRef, err = d.vecOf(f.typ, "blocks"); err != nil {
				return nil, err
			}
			if err := d.checkValue(valueRef); err != nil {
				return nil, fmt.Errorf("blocks: %w", err)
			}
		case idArchivedBlocks:
			inner, err := d.vecOf(f.typ, "archived_blocks")
			if err != nil {
				return nil, err
			}
			if archRec, err = d.rangeType(inner, "archived_blocks entry"); err != nil {
				return nil, err
			}
			if err := d.requireFields(archRec, "archived_blocks entry", "callback"); err != nil {
				return nil, err
			}
			for _, af := range archRec.fields {
				if af.id == idCallback && d.op(af.typ) != opFunc {
					return nil, d.typeErrf("archived_blocks.callback: wire type is not a func")
				}
			}
		}
	}

	res := &LegacyGetBlocksResult{}
	for _, f := range rec.fields {
		switch f.id {
		case idFirstIndex:
			res.FirstIndex, err = d.natU64("first_index")
		case idChainLength:
			var b []byte
			if b, err = d.take(8); err == nil {
				res.ChainLength = le64(b)
			}
		case idCertificate:
			if res.Certificate, err = d.optBlob(f.typ); err == nil {
				res.Certificate = bytes.Clone(res.Certificate)
			}
		case idBlocks:
			res.Blocks, err = d.blockVec(valueRef)
		case idArchivedBlocks:
			var n int
			if n, err = d.count(3); err != nil {
				return nil, err
			}
			res.Archived = make([]LegacyArchivedRange, 0, min(n, 64))
			for range n {
				start, length, cb, err := d.archivedRange(archRec, d.natU64)
				if err != nil {
					return nil, err
				}
				res.Archived = append(res.Archived, LegacyArchivedRange{Start: start, Length: length, Callback: cb})
			}
		default:
			err = d.skip(f.typ, 0)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	if err := d.parseNumbered(res.Blocks, res.FirstIndex); err != nil {
		return nil, err
	}
	return res, nil
}

// archivedRange reads one archived_blocks entry of a legacy reply, whose
// record type rec was checked: start and length read by num, the callback,
// the rest skipped.
func (d *decoder) archivedRange(rec *candidType, num func(what string) (uint64, error)) (start, length uint64, cb Callback, err error) {
	for _, af := range rec.fields {
		switch af.id {
		case idStart:
			start, err = num("archived start")
		case idLength:
			length, err = num("archived length")
		case idCallback:
			cb, err = d.funcRef()
		default:
			err = d.skip(af.typ, 1)
		}
		if err != nil {
			return 0, 0, Callback{}, err
		}
	}
	return start, length, cb, nil
}

// optBlob reads `opt blob` by Candid's rules for opt: null, reserved and any
// wire type that is not a blob read as null; a bare blob reads as present.
func (d *decoder) optBlob(ref int64) ([]byte, error) {
	switch {
	case d.isBlob(ref):
		return d.blob()
	case d.op(ref) == opOpt && d.isBlob(d.types[ref].inner):
		c, err := d.byte1()
		if err != nil {
			return nil, err
		}
		switch c {
		case 0:
			return nil, nil
		case 1:
			return d.blob()
		}
		return nil, d.errf("invalid opt flag %d", c)
	}
	return nil, d.skip(ref, 1)
}

func (d *decoder) blob() ([]byte, error) {
	l, err := d.uleb()
	if err != nil {
		return nil, err
	}
	return d.take(l)
}

func (d *decoder) legacyBlockRange(first uint64) ([]Block, error) {
	ref, err := d.readHeader()
	if err != nil {
		return nil, err
	}
	rec, err := d.record(ref, "BlockRange")
	if err != nil {
		return nil, err
	}
	if err := d.requireFields(rec, "BlockRange", "blocks"); err != nil {
		return nil, err
	}
	var blocks []Block
	for _, f := range rec.fields {
		if f.id != idBlocks {
			continue
		}
		valueRef, err := d.vecOf(f.typ, "blocks")
		if err != nil {
			return nil, err
		}
		if err := d.checkValue(valueRef); err != nil {
			return nil, fmt.Errorf("blocks: %w", err)
		}
	}
	for _, f := range rec.fields {
		if f.id == idBlocks {
			blocks, err = d.blockVec(d.types[f.typ].inner)
		} else {
			err = d.skip(f.typ, 0)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	if err := d.parseNumbered(blocks, first); err != nil {
		return nil, err
	}
	return blocks, nil
}

// blockVec reads a vec of Values as blocks. In a legacy reply first_index
// may follow blocks on the wire, so the raw reader parses each block as it
// reads it, while its encoding is in cache, numbered from 0; parseNumbered
// renumbers them and reports the first refusal, after every error of the
// reply's decoding, as it would have had it parsed them then. The tree
// reader keeps the Values in d.trees, to be parsed by parseNumbered.
func (d *decoder) blockVec(valueRef int64) ([]Block, error) {
	n, err := d.count(2)
	if err != nil {
		return nil, err
	}
	blocks := make([]Block, 0, min(n, 2048))
	d.reserveOut(n)
	for i := range n {
		blocks = growZero(blocks)
		b := &blocks[len(blocks)-1]
		if d.tree {
			d.trees = append(d.trees, Value{})
			b.Hash, err = d.value(valueRef, 0, &d.trees[len(d.trees)-1])
		} else {
			d.pageBlocks(blocks)
			b.Raw, err = d.rawBlock(valueRef, blockRef|hashRef(i))
			if err == nil && d.badBlock == 0 {
				if d.rp.parse(b, uint64(i), b.Raw, b.Hash, d.part(), !d.keysRepeat, &d.ents) != nil {
					d.badBlock = i + 1
				}
			}
		}
		if err != nil {
			return nil, err
		}
		if !d.tree {
			d.blockQueued(blocks)
		}
	}
	if !d.tree {
		d.endPage()
	}
	return blocks, nil
}

// parseNumbered numbers blockVec's blocks from first, parsing them unless
// blockVec has.
func (d *decoder) parseNumbered(blocks []Block, first uint64) error {
	if len(blocks) > 0 && first > math.MaxUint64-uint64(len(blocks)-1) {
		return fmt.Errorf("icrc3: block indices from %d overflow 64 bits", first)
	}
	if !d.tree {
		if d.badBlock > 0 {
			// Parsed again under its index for the error; its entries are
			// gone, and without the distinct-keys flag parse checks more
			// but refuses the same.
			i := d.badBlock - 1
			b := &blocks[i]
			raw, h := b.Raw, b.Hash
			*b = Block{}
			if err := d.rp.parse(b, first+uint64(i), raw, h, d.part(), false, nil); err != nil {
				return err
			}
			return fmt.Errorf("icrc3: block %d parsed differently twice", first+uint64(i))
		}
		for i := range blocks {
			blocks[i].Index = first + uint64(i)
		}
		return nil
	}
	for i := range blocks {
		blk, err := parseTree(first+uint64(i), d.trees[i], blocks[i].Hash)
		if err != nil {
			return err
		}
		blocks[i] = blk
	}
	return nil
}

// growZero is append(blocks, Block{}) without writing the new element
// when it is already zero, as capacity from make and never used is:
// zeroing a Block while the GC marks costs a barrier per pointer field.
func growZero(blocks []Block) []Block {
	if len(blocks) < cap(blocks) {
		return blocks[:len(blocks)+1]
	}
	return append(blocks, Block{})
}

func le64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
