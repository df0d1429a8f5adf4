package icrc3

import (
	"encoding/binary"
	"fmt"
)

// The ICP ledger's replies, read with the bounded decoder of the ICRC-3
// pages: its blocks are protobuf bytes inside Candid replies (package icp
// reads the bytes, package icphistory the ledger).

// EncodeICPBlocksArgs encodes the ICP ledger's GetBlocksArgs,
// record { start : nat64; length : nat64 }, by hand: its shape never
// changes and it is sent for every page.
func EncodeICPBlocksArgs(start, length uint64) []byte {
	first, second := start, length
	if idLength < idStart {
		first, second = length, start
	}
	b := append([]byte("DIDL\x01\x6c\x02"), icpArgsFields()...)
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint64(b, first)
	return binary.LittleEndian.AppendUint64(b, second)
}

func icpArgsFields() []byte {
	a, b := idStart, idLength
	if b < a {
		a, b = b, a
	}
	f := AppendUvarint(nil, uint64(a))
	f = append(f, 0x78) // nat64
	f = AppendUvarint(f, uint64(b))
	return append(f, 0x78)
}

// EncodedArchivedRange is one archived range of a query_encoded_blocks
// reply: blocks [Start, Start+Length) are read from Callback.
type EncodedArchivedRange struct {
	Callback      Callback
	Start, Length uint64
}

// EncodedBlocksResult is a decoded query_encoded_blocks reply of the ICP
// ledger: raw protobuf blocks numbered from FirstIndex.
type EncodedBlocksResult struct {
	Certificate []byte // nil when absent
	Blocks      [][]byte
	ChainLength uint64
	FirstIndex  uint64
	Archived    []EncodedArchivedRange
}

// The ICP ledger's replies share their other field names (blocks,
// certificate, chain_length, archived_blocks, start, length, callback)
// with the legacy pages' (decode.go).
var (
	idFirstBlockIndex = fieldID("first_block_index")
	idOk              = fieldID("Ok")
	idErr             = fieldID("Err")
)

// DecodeEncodedBlocks decodes a query_encoded_blocks reply.
func DecodeEncodedBlocks(b []byte) (*EncodedBlocksResult, error) {
	d := newDecoder(b)
	res, err := d.encodedBlocks()
	if err != nil {
		return nil, fmt.Errorf("icrc3: decode query_encoded_blocks reply: %w", err)
	}
	return res, nil
}

func (d *decoder) blobVec(ref int64, what string) ([][]byte, error) {
	inner, err := d.vecOf(ref, what)
	if err != nil {
		return nil, err
	}
	if !d.isBlob(inner) {
		return nil, d.typeErrf("%s: entries are not blobs", what)
	}
	n, err := d.count(1)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, min(n, 2048))
	for range n {
		v, err := d.blob()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (d *decoder) nat64() (uint64, error) {
	b, err := d.take(8)
	if err != nil {
		return 0, err
	}
	return le64(b), nil
}

func (d *decoder) encodedBlocks() (*EncodedBlocksResult, error) {
	ref, err := d.readHeader()
	if err != nil {
		return nil, err
	}
	rec, err := d.record(ref, "QueryEncodedBlocksResponse")
	if err != nil {
		return nil, err
	}
	if err := d.requireFields(rec, "QueryEncodedBlocksResponse", "blocks", "chain_length", "first_block_index", "archived_blocks"); err != nil {
		return nil, err
	}
	var archRec *candidType
	for _, f := range rec.fields {
		switch f.id {
		case idChainLength, idFirstBlockIndex:
			if f.typ != opNat64 {
				return nil, d.typeErrf("chain_length/first_block_index: wire type is not nat64")
			}
		case idArchivedBlocks:
			inner, err := d.vecOf(f.typ, "archived_blocks")
			if err != nil {
				return nil, err
			}
			if archRec, err = d.record(inner, "archived_blocks entry"); err != nil {
				return nil, err
			}
			if err := d.requireFields(archRec, "archived_blocks entry", "callback", "start", "length"); err != nil {
				return nil, err
			}
			for _, af := range archRec.fields {
				switch {
				case af.id == idCallback && d.op(af.typ) != opFunc:
					return nil, d.typeErrf("archived_blocks.callback: wire type is not a func")
				case (af.id == idStart || af.id == idLength) && af.typ != opNat64:
					return nil, d.typeErrf("archived_blocks start/length: wire type is not nat64")
				}
			}
		}
	}
	res := &EncodedBlocksResult{}
	for _, f := range rec.fields {
		switch f.id {
		case idCertificate:
			res.Certificate, err = d.optBlob(f.typ)
		case idBlocks:
			res.Blocks, err = d.blobVec(f.typ, "blocks")
		case idChainLength:
			res.ChainLength, err = d.nat64()
		case idFirstBlockIndex:
			res.FirstIndex, err = d.nat64()
		case idArchivedBlocks:
			var n int
			if n, err = d.count(3); err != nil {
				return nil, err
			}
			res.Archived = make([]EncodedArchivedRange, 0, min(n, 64))
			for range n {
				start, length, cb, err := d.archivedRange(archRec, func(string) (uint64, error) { return d.nat64() })
				if err != nil {
					return nil, err
				}
				res.Archived = append(res.Archived, EncodedArchivedRange{Callback: cb, Start: start, Length: length})
			}
		default:
			err = d.skip(f.typ, 0)
		}
		if err != nil {
			return nil, err
		}
	}
	return res, d.finish()
}

// EncodedBlocksError is an archive's Err reply to get_encoded_blocks.
type EncodedBlocksError struct{ Msg string }

func (e *EncodedBlocksError) Error() string { return "get_encoded_blocks: " + e.Msg }

// DecodeGetEncodedBlocksResult decodes an ICP archive's get_encoded_blocks
// reply, variant { Ok : vec blob; Err : GetBlocksError }. An Err reply is an
// *EncodedBlocksError.
func DecodeGetEncodedBlocksResult(b []byte) ([][]byte, error) {
	d := newDecoder(b)
	ref, err := d.readHeader()
	if err == nil && (ref < 0 || d.types[ref].op != opVariant) {
		err = d.typeErrf("GetEncodedBlocksResult: wire type is not a variant")
	}
	if err != nil {
		return nil, fmt.Errorf("icrc3: decode get_encoded_blocks reply: %w", err)
	}
	t := &d.types[ref]
	arm, err := d.uleb()
	if err == nil && arm >= uint64(len(t.fields)) {
		err = d.errf("variant arm %d of %d", arm, len(t.fields))
	}
	if err != nil {
		return nil, fmt.Errorf("icrc3: decode get_encoded_blocks reply: %w", err)
	}
	f := t.fields[arm]
	switch f.id {
	case idOk:
		blocks, err := d.blobVec(f.typ, "Ok")
		if err == nil {
			err = d.finish()
		}
		if err != nil {
			return nil, fmt.Errorf("icrc3: decode get_encoded_blocks reply: %w", err)
		}
		return blocks, nil
	case idErr:
		return nil, &EncodedBlocksError{Msg: "the archive answered Err"}
	}
	return nil, fmt.Errorf("icrc3: decode get_encoded_blocks reply: unknown arm %d", f.id)
}
