package icrc3

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/principal"
)

// What the ICP ledger's history family needs from this package's transport
// and Candid reader: its blocks are protobuf bytes inside Candid replies,
// read by package icphistory.

// TipFormatICP: the certificate certifies the raw hash of the last block
// (the ICP ledger); the tip index is the reply's chain length, proven only
// by the chain below the certified block.
const TipFormatICP = "icp"

// Query sends one query to canister; verify turns signed-query
// verification on. Errors are *Error, classified as for ICRC-3 reads.
func (c *Client) Query(ctx context.Context, canister principal.Principal, method string, arg []byte, verify bool) ([]byte, error) {
	return c.query(ctx, canister, method, arg, verify)
}

// RootKey is the DER root key certificates are checked against.
func (c *Client) RootKey() []byte { return c.rootKey }

// VerifyDataCertificate checks a data certificate served by canister (BLS
// under rootKey, delegation and canister range) and that its /time is at
// most maxAge older than now. It returns the canister's certified_data as
// the verified tree holds it (empty when the canister never set any) and
// the certified /time.
func VerifyDataCertificate(canister principal.Principal, rootKey, certificate []byte, maxAge time.Duration, now time.Time) (data []byte, certTime uint64, err error) {
	cert, err := ParseCertificate(certificate)
	if err != nil {
		return nil, 0, &Error{Kind: KindDecode, Canister: canister, Msg: "data certificate", Err: err}
	}
	if err := verifyCertificate(cert, canister, rootKey); err != nil {
		return nil, 0, &Error{Kind: KindCertificate, Canister: canister, Msg: "data certificate", Err: err}
	}
	t, err := certifiedTime(cert)
	if err != nil {
		return nil, 0, &Error{Kind: KindCertificate, Canister: canister, Msg: "data certificate /time", Err: err}
	}
	if t <= math.MaxInt64 {
		if age := now.UnixNano() - int64(t); age > int64(maxAge) {
			return nil, 0, &Error{Kind: KindStale, Canister: canister,
				Msg: fmt.Sprintf("data certificate /time is %s old, more than %s", time.Duration(age), maxAge)}
		}
	}
	// Every canister has certified_data (the empty blob until it sets
	// any): a certificate without this canister's certifies another.
	data, err = cert.Tree.Lookup(hashtree.Label("canister"), hashtree.Label(canister.Raw), hashtree.Label("certified_data"))
	if err != nil {
		return nil, 0, &Error{Kind: KindCertificate, Canister: canister, Msg: "data certificate holds no certified_data of this canister", Err: err}
	}
	return data, t, nil
}

// EncodeICPBlocksArgs encodes the ICP ledger's GetBlocksArgs,
// record { start : nat64; length : nat64 }, by hand: its shape never
// changes and it is sent for every page.
func EncodeICPBlocksArgs(start, length uint64) []byte {
	first, second := start, length
	if idLengthICP < idStartICP {
		first, second = length, start
	}
	b := append([]byte("DIDL\x01\x6c\x02"), icpArgsFields()...)
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint64(b, first)
	return binary.LittleEndian.AppendUint64(b, second)
}

func icpArgsFields() []byte {
	a, b := idStartICP, idLengthICP
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

var (
	idCertificateICP  = fieldID("certificate")
	idBlocksICP       = fieldID("blocks")
	idChainLengthICP  = fieldID("chain_length")
	idFirstBlockIndex = fieldID("first_block_index")
	idArchivedICP     = fieldID("archived_blocks")
	idCallbackICP     = fieldID("callback")
	idStartICP        = fieldID("start")
	idLengthICP       = fieldID("length")
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
		case idChainLengthICP, idFirstBlockIndex:
			if f.typ != opNat64 {
				return nil, d.typeErrf("chain_length/first_block_index: wire type is not nat64")
			}
		case idArchivedICP:
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
				case af.id == idCallbackICP && d.op(af.typ) != opFunc:
					return nil, d.typeErrf("archived_blocks.callback: wire type is not a func")
				case (af.id == idStartICP || af.id == idLengthICP) && af.typ != opNat64:
					return nil, d.typeErrf("archived_blocks start/length: wire type is not nat64")
				}
			}
		}
	}
	res := &EncodedBlocksResult{}
	for _, f := range rec.fields {
		switch f.id {
		case idCertificateICP:
			res.Certificate, err = d.optBlob(f.typ)
		case idBlocksICP:
			res.Blocks, err = d.blobVec(f.typ, "blocks")
		case idChainLengthICP:
			res.ChainLength, err = d.nat64()
		case idFirstBlockIndex:
			res.FirstIndex, err = d.nat64()
		case idArchivedICP:
			var n int
			if n, err = d.count(3); err != nil {
				return nil, err
			}
			res.Archived = make([]EncodedArchivedRange, 0, min(n, 64))
			for range n {
				var a EncodedArchivedRange
				for _, af := range archRec.fields {
					switch af.id {
					case idStartICP:
						a.Start, err = d.nat64()
					case idLengthICP:
						a.Length, err = d.nat64()
					case idCallbackICP:
						a.Callback, err = d.funcRef()
					default:
						err = d.skip(af.typ, 1)
					}
					if err != nil {
						return nil, err
					}
				}
				res.Archived = append(res.Archived, a)
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

// MintingAccount reads icrc1_minting_account as Detect does (a replicated
// call whose certificate is verified, falling back to a signed query whose
// answer is then uncertain: certified false).
func (c *Client) MintingAccount(ctx context.Context) (acc *Account, certified bool, err error) {
	var f Features
	if err := c.readMinting(ctx, &f); err != nil {
		return nil, false, err
	}
	return f.MintingAccount, f.MintingCertified, nil
}

// Now is the client's clock.
func (c *Client) Now() time.Time { return c.now() }

// MaxCertAge bounds the age of a certificate's /time.
func (c *Client) MaxCertAge() time.Duration { return c.maxAge }

// Concurrency bounds the requests in flight; 0 leaves it to each reader's
// default.
func (c *Client) Concurrency() int { return c.conc }

// CountBlocks adds n blocks a reader built on the client received to its
// Stats, as the client's own pages are counted: the ICP family's pages
// show in the same blocks-read figures.
func (c *Client) CountBlocks(n int) { c.countBlocks(n) }
