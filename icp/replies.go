package icp

import (
	"encoding/binary"
	"fmt"

	"github.com/reconciled/reconciled/icrc3"
)

// The ICP ledger's replies, read with the bounded Candid decoder of the
// ICRC-3 pages (icrc3.CandidReader): its blocks are protobuf bytes inside
// Candid replies (this package reads the bytes, package icphistory the
// ledger).

var (
	idStart           = icrc3.CandidFieldID("start")
	idLength          = icrc3.CandidFieldID("length")
	idCallback        = icrc3.CandidFieldID("callback")
	idCertificate     = icrc3.CandidFieldID("certificate")
	idBlocks          = icrc3.CandidFieldID("blocks")
	idChainLength     = icrc3.CandidFieldID("chain_length")
	idFirstBlockIndex = icrc3.CandidFieldID("first_block_index")
	idArchivedBlocks  = icrc3.CandidFieldID("archived_blocks")
	idOk              = icrc3.CandidFieldID("Ok")
	idErr             = icrc3.CandidFieldID("Err")
)

// EncodeBlocksArgs encodes the ICP ledger's GetBlocksArgs,
// record { start : nat64; length : nat64 }, by hand: its shape never
// changes and it is sent for every page.
func EncodeBlocksArgs(start, length uint64) []byte {
	first, second := start, length
	if idLength < idStart {
		first, second = length, start
	}
	b := append([]byte("DIDL\x01\x6c\x02"), blocksArgsFields()...)
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint64(b, first)
	return binary.LittleEndian.AppendUint64(b, second)
}

func blocksArgsFields() []byte {
	a, b := idStart, idLength
	if b < a {
		a, b = b, a
	}
	f := icrc3.AppendUvarint(nil, uint64(a))
	f = append(f, 0x78) // nat64
	f = icrc3.AppendUvarint(f, uint64(b))
	return append(f, 0x78)
}

// EncodedArchivedRange is one archived range of a query_encoded_blocks
// reply: blocks [Start, Start+Length) are read from Callback.
type EncodedArchivedRange struct {
	Callback      icrc3.Callback
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

// DecodeEncodedBlocks decodes a query_encoded_blocks reply.
func DecodeEncodedBlocks(b []byte) (*EncodedBlocksResult, error) {
	res, err := encodedBlocks(icrc3.NewCandidReader(b))
	if err != nil {
		return nil, fmt.Errorf("icp: decode query_encoded_blocks reply: %w", err)
	}
	return res, nil
}

// blobVec reads a vec blob of type t.
func blobVec(r *icrc3.CandidReader, t icrc3.CandidType, what string) ([][]byte, error) {
	inner, err := r.VecOf(t, what)
	if err != nil {
		return nil, err
	}
	if !r.IsBlob(inner) {
		return nil, r.TypeErrorf("%s: entries are not blobs", what)
	}
	n, err := r.Count(1)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, min(n, 2048))
	for range n {
		v, err := r.Blob()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func encodedBlocks(r *icrc3.CandidReader) (*EncodedBlocksResult, error) {
	ref, err := r.Header()
	if err != nil {
		return nil, err
	}
	rec, err := r.Record(ref, "QueryEncodedBlocksResponse", "blocks", "chain_length", "first_block_index", "archived_blocks")
	if err != nil {
		return nil, err
	}
	var arch []icrc3.CandidField
	for _, f := range rec {
		switch f.ID {
		case idChainLength, idFirstBlockIndex:
			if !r.IsNat64(f.Type) {
				return nil, r.TypeErrorf("chain_length/first_block_index: wire type is not nat64")
			}
		case idArchivedBlocks:
			inner, err := r.VecOf(f.Type, "archived_blocks")
			if err != nil {
				return nil, err
			}
			if arch, err = r.Record(inner, "archived_blocks entry", "callback", "start", "length"); err != nil {
				return nil, err
			}
			for _, af := range arch {
				switch {
				case af.ID == idCallback && !r.IsFunc(af.Type):
					return nil, r.TypeErrorf("archived_blocks.callback: wire type is not a func")
				case (af.ID == idStart || af.ID == idLength) && !r.IsNat64(af.Type):
					return nil, r.TypeErrorf("archived_blocks start/length: wire type is not nat64")
				}
			}
		}
	}
	res := &EncodedBlocksResult{}
	for _, f := range rec {
		switch f.ID {
		case idCertificate:
			res.Certificate, err = r.OptBlob(f.Type)
		case idBlocks:
			res.Blocks, err = blobVec(r, f.Type, "blocks")
		case idChainLength:
			res.ChainLength, err = r.Nat64()
		case idFirstBlockIndex:
			res.FirstIndex, err = r.Nat64()
		case idArchivedBlocks:
			var n int
			if n, err = r.Count(3); err != nil {
				return nil, err
			}
			res.Archived = make([]EncodedArchivedRange, 0, min(n, 64))
			for range n {
				a, err := archivedRange(r, arch)
				if err != nil {
					return nil, err
				}
				res.Archived = append(res.Archived, a)
			}
		default:
			err = r.Skip(f.Type, 0)
		}
		if err != nil {
			return nil, err
		}
	}
	return res, r.Finish()
}

// archivedRange reads one archived_blocks entry, whose record type's
// fields arch were checked: start and length, the callback, the rest
// skipped.
func archivedRange(r *icrc3.CandidReader, arch []icrc3.CandidField) (a EncodedArchivedRange, err error) {
	for _, af := range arch {
		switch af.ID {
		case idStart:
			a.Start, err = r.Nat64()
		case idLength:
			a.Length, err = r.Nat64()
		case idCallback:
			a.Callback, err = r.Func()
		default:
			err = r.Skip(af.Type, 1)
		}
		if err != nil {
			return EncodedArchivedRange{}, err
		}
	}
	return a, nil
}

// EncodedBlocksError is an archive's Err reply to get_encoded_blocks.
type EncodedBlocksError struct{ Msg string }

func (e *EncodedBlocksError) Error() string { return "get_encoded_blocks: " + e.Msg }

// DecodeGetEncodedBlocksResult decodes an ICP archive's get_encoded_blocks
// reply, variant { Ok : vec blob; Err : GetBlocksError }. An Err reply is an
// *EncodedBlocksError.
func DecodeGetEncodedBlocksResult(b []byte) ([][]byte, error) {
	r := icrc3.NewCandidReader(b)
	ref, err := r.Header()
	var f icrc3.CandidField
	if err == nil {
		f, err = r.Variant(ref, "GetEncodedBlocksResult")
	}
	if err != nil {
		return nil, fmt.Errorf("icp: decode get_encoded_blocks reply: %w", err)
	}
	switch f.ID {
	case idOk:
		blocks, err := blobVec(r, f.Type, "Ok")
		if err == nil {
			err = r.Finish()
		}
		if err != nil {
			return nil, fmt.Errorf("icp: decode get_encoded_blocks reply: %w", err)
		}
		return blocks, nil
	case idErr:
		return nil, &EncodedBlocksError{Msg: "the archive answered Err"}
	}
	return nil, fmt.Errorf("icp: decode get_encoded_blocks reply: unknown arm %d", f.ID)
}
