package icp

import (
	"encoding/hex"
	"fmt"

	"github.com/reconciled/reconciled/icrc3"
)

// ValueKey is the key of the raw protobuf bytes in the Value of a block
// converted by ToICRC3: the block's only authoritative form, from which
// the matcher reads the account identifiers and which hashes to the
// block's hash.
const ValueKey = "icp_pb"

// ToICRC3 decodes the raw block at index and gives it the engine's block
// model: Hash is SHA-256 of raw, PHash the parent hash, Kind from the
// operation (a Send with a spender is a transfer_from). Accounts are
// AccountIdentifiers, which icrc3.Account cannot hold: From, To and Spender
// stay nil, Native holds the raw bytes for the matcher, and the Value
// carries them too (ValueKey) for a cache that keeps only Values, beside a
// readable copy of the fields for people.
func ToICRC3(index uint64, raw []byte) (icrc3.Block, *Block, error) {
	blk, err := Decode(raw)
	if err != nil {
		return icrc3.Block{}, nil, fmt.Errorf("block %d: %w", index, err)
	}
	if (index == 0) != (blk.ParentHash == nil) {
		return icrc3.Block{}, nil, fmt.Errorf("block %d: %w", index, bad("parent_hash present only on block 0, or absent above it"))
	}
	tx := &blk.Tx
	b := icrc3.Block{Index: index, Hash: icrc3.Hash(BlockHash(raw)), TS: blk.Timestamp, Op: tx.Op.String(), Native: raw,
		CreatedAt: tx.CreatedAtTime, Memo: tx.ICRC1Memo, HasMemo: tx.HasICRC1Memo}
	if blk.ParentHash != nil {
		p := icrc3.Hash(*blk.ParentHash)
		b.PHash = &p
	}
	amt := icrc3.NatFromUint64(tx.Amount)
	b.Amount = &amt
	if tx.Fee != nil {
		// The ICP ledger records the fee it charged on every transfer and
		// approve, whether or not the caller named one: a block-level fee.
		f := icrc3.NatFromUint64(*tx.Fee)
		b.BlockFee = &f
	}
	b.ExpiresAt = tx.ExpiresAt
	if tx.ExpectedAllowance != nil {
		e := icrc3.NatFromUint64(*tx.ExpectedAllowance)
		b.ExpectedAllowance = &e
	}
	switch tx.Op {
	case OpBurn:
		b.Kind = icrc3.BlockBurn
	case OpMint:
		b.Kind = icrc3.BlockMint
	case OpApprove:
		b.Kind = icrc3.BlockApprove
	case OpTransfer:
		b.Kind = icrc3.BlockTransfer
		if tx.Spender != nil {
			b.Kind = icrc3.BlockTransferFrom
		}
	}
	b.Raw = appendReadable(make([]byte, 0, 2*len(raw)+256), raw, blk)
	return b, blk, nil
}

// appendReadable appends the block-cache encoding of the block's readable
// Value, icrc3.MarshalValue's format: the raw bytes under ValueKey, phash,
// ts and a tx map of the fields in text, in that order. It writes the bytes
// directly: a Value tree, its account texts and the encoder's growing
// buffer were most of a block's conversion. The tests hold it to
// MarshalValue of the tree, field for field.
func appendReadable(dst, raw []byte, blk *Block) []byte {
	tx := &blk.Tx
	key := func(dst []byte, k string) []byte {
		dst = icrc3.AppendUvarint(dst, uint64(len(k)))
		return append(dst, k...)
	}
	bytesOf := func(dst []byte, kind icrc3.Kind, b []byte) []byte {
		dst = append(dst, byte(kind))
		dst = icrc3.AppendUvarint(dst, uint64(len(b)))
		return append(dst, b...)
	}
	nat := func(dst []byte, v uint64) []byte {
		return icrc3.AppendUvarint(append(dst, byte(icrc3.KindNat)), v)
	}
	dst = append(dst, icrc3.ValueCodecV1, byte(icrc3.KindMap))
	n := 3
	if blk.ParentHash != nil {
		n++
	}
	dst = icrc3.AppendUvarint(dst, uint64(n))
	dst = bytesOf(key(dst, ValueKey), icrc3.KindBlob, raw)
	if blk.ParentHash != nil {
		dst = bytesOf(key(dst, "phash"), icrc3.KindBlob, blk.ParentHash[:])
	}
	dst = nat(key(dst, "ts"), blk.Timestamp)
	dst = append(key(dst, "tx"), byte(icrc3.KindMap))
	m := 3 // op, amt, legacy_memo
	for _, present := range []bool{tx.From != nil, tx.To != nil, tx.Spender != nil, tx.Fee != nil,
		tx.ExpectedAllowance != nil, tx.ExpiresAt != nil, tx.HasICRC1Memo, tx.CreatedAtTime != nil} {
		if present {
			m++
		}
	}
	dst = icrc3.AppendUvarint(dst, uint64(m))
	op := tx.Op.String()
	dst = append(icrc3.AppendUvarint(append(key(dst, "op"), byte(icrc3.KindText)), uint64(len(op))), op...)
	acc := func(dst []byte, k string, a *AccountID) []byte {
		if a == nil {
			return dst
		}
		ad := a.Address()
		dst = icrc3.AppendUvarint(append(key(dst, k), byte(icrc3.KindText)), uint64(2*len(ad)))
		return hex.AppendEncode(dst, ad[:])
	}
	dst = acc(dst, "from", tx.From)
	dst = acc(dst, "to", tx.To)
	dst = acc(dst, "spender", tx.Spender)
	dst = nat(key(dst, "amt"), tx.Amount)
	if tx.Fee != nil {
		dst = nat(key(dst, "fee"), *tx.Fee)
	}
	if tx.ExpectedAllowance != nil {
		dst = nat(key(dst, "expected_allowance"), *tx.ExpectedAllowance)
	}
	if tx.ExpiresAt != nil {
		dst = nat(key(dst, "expires_at"), *tx.ExpiresAt)
	}
	dst = nat(key(dst, "legacy_memo"), tx.Memo)
	if tx.HasICRC1Memo {
		dst = bytesOf(key(dst, "memo"), icrc3.KindBlob, tx.ICRC1Memo)
	}
	if tx.CreatedAtTime != nil {
		dst = nat(key(dst, "ts"), *tx.CreatedAtTime)
	}
	return dst
}

// FromICRC3 returns the ICP block behind a block converted by ToICRC3, or
// ok false for a block of another family. The native bytes must hash to
// the block's hash, so bytes altered after verification are refused rather
// than read.
func FromICRC3(b *icrc3.Block) (blk *Block, ok bool, err error) {
	if b.Native == nil {
		return nil, false, nil
	}
	if icrc3.Hash(BlockHash(b.Native)) != b.Hash {
		return nil, true, fmt.Errorf("block %d: its protobuf bytes do not hash to the block's hash", b.Index)
	}
	blk, err = Decode(b.Native)
	if err != nil {
		return nil, true, fmt.Errorf("block %d: %w", b.Index, err)
	}
	return blk, true, nil
}

// RawFromValue returns the protobuf bytes a converted block's Value
// carries, ok false for a Value of another family.
func RawFromValue(v icrc3.Value) (raw []byte, ok bool) {
	r, found := v.Get(ValueKey)
	if !found || r.Kind != icrc3.KindBlob {
		return nil, false
	}
	return r.Bytes, true
}
