package ledgertest

import (
	"encoding/binary"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc3"
)

// A direct Candid encoder for the block page replies. agent-go's reflection
// encoder costs tens of microseconds per block and cannot encode the
// recursive func types at all; these replies have a fixed type table, so the
// table is a constant and values are appended to one buffer. Field and
// variant arms are written in Candid's order (by field-name hash); the tests
// decode every shape with agent-go.

// Type opcodes (SLEB128, single byte).
const (
	tNat      = 0x7d
	tInt      = 0x7c
	tNat8     = 0x7b
	tNat64    = 0x78
	tText     = 0x71
	tOpt      = 0x6e
	tVec      = 0x6d
	tRecord   = 0x6c
	tVariant  = 0x6b
	tFunc     = 0x6a
	tQueryAnn = 0x01
)

func idlHash(s string) uint32 {
	var h uint32
	for i := 0; i < len(s); i++ {
		h = h*223 + uint32(s[i])
	}
	return h
}

type tableBuilder struct{ b []byte }

func (t *tableBuilder) u(v uint64)    { t.b = icrc3.AppendUvarint(t.b, v) }
func (t *tableBuilder) raw(b ...byte) { t.b = append(t.b, b...) }

// fields writes a record or variant field list; names must already be in hash order.
func (t *tableBuilder) fields(names []string, types []byte) {
	t.u(uint64(len(names)))
	for i, n := range names {
		t.u(uint64(idlHash(n)))
		t.raw(types[i])
	}
}

// valueTypes writes entries 0..4: Value, blob, vec Value, record{text; Value}, vec of that.
// Arms in hash order: Int Map Nat [Nat64] Blob Text Array.
func (t *tableBuilder) valueTypes(legacy bool) {
	if legacy {
		t.raw(tVariant)
		t.fields([]string{"Int", "Map", "Nat", "Nat64", "Blob", "Text", "Array"}, []byte{tInt, 4, tNat, tNat64, 1, tText, 2})
	} else {
		t.raw(tVariant)
		t.fields([]string{"Int", "Map", "Nat", "Blob", "Text", "Array"}, []byte{tInt, 4, tNat, 1, tText, 2})
	}
	t.raw(tVec, tNat8)                // 1: blob
	t.raw(tVec, 0)                    // 2: vec Value
	t.raw(tRecord, 2, 0, tText, 1, 0) // 3: record { 0: text; 1: Value }
	t.raw(tVec, 3)                    // 4: vec record
}

// Value arm indices (position in hash order).
const (
	armInt   = 0
	armMap   = 1
	armNat   = 2
	armBlob  = 3 // +1 in legacy
	armText  = 4 // +1 in legacy
	armArray = 5 // +1 in legacy
	armNat64 = 3 // legacy only
)

var (
	// icrc3_get_blocks: GetBlocksResult is type 12.
	hdrGetBlocks = func() []byte {
		t := &tableBuilder{b: []byte("DIDL")}
		t.u(13)
		t.valueTypes(false)
		t.raw(tRecord)
		t.fields([]string{"id", "block"}, []byte{tNat, 0}) // 5
		t.raw(tVec, 5)                                     // 6
		t.raw(tRecord)
		t.fields([]string{"start", "length"}, []byte{tNat, tNat}) // 7
		t.raw(tVec, 7)                                            // 8: GetBlocksArgs
		t.raw(tFunc, 1, 8, 1, 12, 1, tQueryAnn)                   // 9: callback
		t.raw(tRecord)
		t.fields([]string{"args", "callback"}, []byte{8, 9}) // 10
		t.raw(tVec, 10)                                      // 11
		t.raw(tRecord)
		t.fields([]string{"log_length", "blocks", "archived_blocks"}, []byte{tNat, 6, 11}) // 12
		t.raw(1, 12)
		return t.b
	}()
	// Legacy tables: GetBlocksResponse is type 11, BlockRange type 6.
	legacyTable = func() []byte {
		t := &tableBuilder{}
		t.u(12)
		t.valueTypes(true)
		t.raw(tRecord)
		t.fields([]string{"start", "length"}, []byte{tNat, tNat}) // 5: GetBlocksArgs
		t.raw(tRecord)
		t.fields([]string{"blocks"}, []byte{2}) // 6: BlockRange
		t.raw(tFunc, 1, 5, 1, 6, 1, tQueryAnn)  // 7: callback
		t.raw(tRecord)
		t.fields([]string{"callback", "start", "length"}, []byte{7, tNat, tNat}) // 8
		t.raw(tVec, 8)                                                           // 9
		t.raw(tOpt, 1)                                                           // 10: opt blob
		t.raw(tRecord)
		t.fields([]string{"certificate", "first_index", "blocks", "chain_length", "archived_blocks"},
			[]byte{10, tNat, 2, tNat64, 9}) // 11: GetBlocksResponse
		return t.b
	}()
	hdrLegacyResponse = append(append([]byte("DIDL"), legacyTable...), 1, 11)
	hdrBlockRange     = append(append([]byte("DIDL"), legacyTable...), 1, 6)
)

type encoder struct {
	b      []byte
	legacy bool
}

func (e *encoder) u(v uint64)      { e.b = icrc3.AppendUvarint(e.b, v) }
func (e *encoder) nat(n icrc3.Nat) { e.b = n.AppendLEB128(e.b) }
func (e *encoder) bytes(b []byte)  { e.u(uint64(len(b))); e.b = append(e.b, b...) }
func (e *encoder) text(s string)   { e.u(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) nat64(v uint64)  { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) funcRef(p principal.Principal, method string) {
	e.b = append(e.b, 1, 1)
	e.bytes(p.Raw)
	e.text(method)
}

// value appends an ICRC-3 Value. In legacy mode a Nat below 2^64 is written
// as the Nat64 arm, as the DFINITY ledger's legacy endpoint does.
func (e *encoder) value(v *icrc3.Value) {
	shift := uint64(0)
	if e.legacy {
		shift = 1
	}
	switch v.Kind {
	case icrc3.KindBlob:
		e.u(armBlob + shift)
		e.bytes(v.Bytes)
	case icrc3.KindText:
		e.u(armText + shift)
		e.bytes(v.Bytes)
	case icrc3.KindNat:
		if n, ok := v.Nat.Uint64(); ok && e.legacy {
			e.u(armNat64)
			e.nat64(n)
			return
		}
		e.u(armNat)
		e.nat(v.Nat)
	case icrc3.KindInt:
		e.u(armInt)
		e.b = icrc3.AppendSLEB128(e.b, v.Int)
	case icrc3.KindArray:
		e.u(armArray + shift)
		e.u(uint64(len(v.Array)))
		for i := range v.Array {
			e.value(&v.Array[i])
		}
	case icrc3.KindMap:
		e.u(armMap)
		e.u(uint64(len(v.Map)))
		for i := range v.Map {
			e.text(v.Map[i].Key)
			e.value(&v.Map[i].Value)
		}
	default:
		// Unreachable for ledger-built values; an empty Text keeps the
		// message decodable rather than corrupt.
		e.u(armText + shift)
		e.u(0)
	}
}

// blockRange is a run of consecutive block ids.
type blockRange struct{ start, length uint64 }

// archivedGroup is the archived part of an icrc3_get_blocks reply for one archive.
type archivedGroup struct {
	archive principal.Principal
	ranges  []blockRange
}

// indexedBlock is a block's id and its encoding as a Value of the reply's
// family (encodeValue).
type indexedBlock struct {
	id  uint64
	enc []byte
}

// encodeValue is v's encoding as a Value of the legacy or the ICRC-3 family.
func encodeValue(v *icrc3.Value, legacy bool) []byte {
	e := encoder{legacy: legacy}
	e.value(v)
	return e.b
}

func (e *encoder) blocks(blocks []indexedBlock) {
	e.u(uint64(len(blocks)))
	for i := range blocks {
		e.b = append(e.b, blocks[i].enc...)
	}
}

// pageCap is a page's encoded size, for one allocation.
func pageCap(blocks []indexedBlock) int {
	n := 0
	for i := range blocks {
		n += len(blocks[i].enc)
	}
	return n + 16*len(blocks)
}

// encodeGetBlocksResult encodes an ICRC-3 GetBlocksResult.
func encodeGetBlocksResult(logLength uint64, blocks []indexedBlock, archived []archivedGroup) []byte {
	e := encoder{b: make([]byte, 0, len(hdrGetBlocks)+64+pageCap(blocks))}
	e.b = append(e.b, hdrGetBlocks...)
	e.u(logLength)
	e.u(uint64(len(blocks)))
	for i := range blocks {
		e.u(blocks[i].id)
		e.b = append(e.b, blocks[i].enc...)
	}
	e.u(uint64(len(archived)))
	for _, g := range archived {
		e.u(uint64(len(g.ranges)))
		for _, r := range g.ranges {
			e.u(r.start)
			e.u(r.length)
		}
		e.funcRef(g.archive, "icrc3_get_blocks")
	}
	return e.b
}

// legacyArchived is one archived range of a legacy get_blocks reply.
type legacyArchived struct {
	archive principal.Principal
	r       blockRange
}

// encodeLegacyResponse encodes the legacy GetBlocksResponse.
func encodeLegacyResponse(firstIndex, chainLength uint64, certificate []byte, blocks []indexedBlock, archived []legacyArchived) []byte {
	e := encoder{b: make([]byte, 0, len(hdrLegacyResponse)+len(certificate)+64+pageCap(blocks)), legacy: true}
	e.b = append(e.b, hdrLegacyResponse...)
	if certificate != nil {
		e.b = append(e.b, 1)
		e.bytes(certificate)
	} else {
		e.b = append(e.b, 0)
	}
	e.u(firstIndex)
	e.blocks(blocks)
	e.nat64(chainLength)
	e.u(uint64(len(archived)))
	for _, a := range archived {
		e.funcRef(a.archive, "get_blocks")
		e.u(a.r.start)
		e.u(a.r.length)
	}
	return e.b
}

// encodeBlockRange encodes the legacy archive reply BlockRange.
func encodeBlockRange(blocks []indexedBlock) []byte {
	e := encoder{b: make([]byte, 0, len(hdrBlockRange)+16+pageCap(blocks)), legacy: true}
	e.b = append(e.b, hdrBlockRange...)
	e.blocks(blocks)
	return e.b
}
