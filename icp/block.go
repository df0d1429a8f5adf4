package icp

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Op is what a transaction does. An icrc2_approve is written as a Send with
// an Approve extension, an icrc2_transfer_from as a Send with a
// TransferFrom extension (the spender); the decoder names them apart.
type Op uint8

const (
	OpBurn Op = iota + 1
	OpMint
	OpTransfer
	OpApprove
)

func (o Op) String() string {
	switch o {
	case OpBurn:
		return "burn"
	case OpMint:
		return "mint"
	case OpTransfer:
		return "xfer"
	case OpApprove:
		return "approve"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Block is a decoded ICP ledger block (ic_ledger.pb.v1.Block).
type Block struct {
	ParentHash *[32]byte // nil only for block 0
	Timestamp  uint64    // ledger time the block was appended (ns)
	Tx         Transaction
}

// Transaction is ic_ledger.pb.v1.Transaction. Which account fields are set
// depends on Op: Burn has From (and Spender for a burn through
// icrc2_transfer_from), Mint has To, Transfer From and To (and Spender for
// icrc2_transfer_from), Approve From and Spender.
type Transaction struct {
	Op                Op
	From, To, Spender *AccountID
	Amount            uint64  // Burn, Mint, Transfer: the amount; Approve: the allowance
	Fee               *uint64 // Transfer and Approve (max_fee): the fee charged
	ExpectedAllowance *uint64 // Approve
	ExpiresAt         *uint64 // Approve
	Memo              uint64  // the legacy u64 memo; 0 for every ICRC call
	ICRC1Memo         []byte  // meaningful only when HasICRC1Memo
	HasICRC1Memo      bool
	CreatedAtTime     *uint64
}

// BlockHash is the ICP block hash: SHA-256 of the block's protobuf bytes as
// stored (not the ICRC-3 representation-independent hash).
func BlockHash(raw []byte) [32]byte { return sha256.Sum256(raw) }

// Field numbers of ic_ledger/pb/v1/types.proto.
const (
	fBlockParentHash  = 1
	fBlockTimestamp   = 2
	fBlockTransaction = 3

	fTxBurn          = 1
	fTxMint          = 2
	fTxSend          = 3
	fTxMemo          = 4
	fTxCreatedAt     = 5 // obsolete BlockIndex; read and ignored
	fTxCreatedAtTime = 6
	fTxICRC1Memo     = 7

	fSendFrom         = 1
	fSendTo           = 2
	fSendAmount       = 3
	fSendMaxFee       = 4
	fSendApprove      = 5
	fSendTransferFrom = 6

	fApproveAllowance         = 1
	fApproveExpiresAt         = 2
	fApproveExpectedAllowance = 3

	fTransferFromSpender = 1

	fMintTo     = 2
	fMintAmount = 3

	fBurnFrom    = 1
	fBurnAmount  = 3
	fBurnSpender = 4

	fSingle = 1 // the one field of Hash, Tokens, TimeStamp, Memo, Icrc1Memo, AccountIdentifier, BlockIndex
)

// DecodeError is a block that is not a well-formed ICP block.
type DecodeError struct{ Msg string }

func (e *DecodeError) Error() string { return "icp: block: " + e.Msg }

func bad(format string, a ...any) error { return &DecodeError{fmt.Sprintf(format, a...)} }

// field is one top-level field of a message.
type field struct {
	num  protowire.Number
	typ  protowire.Type
	v    uint64 // varint fields
	body []byte // length-delimited fields
}

// maxField bounds the field numbers of the messages read here (all below
// 8): a message's fields live in an array with a bitmask of the ones
// present, not a map, which cost most of a block's decoding in allocations.
const maxField = 8

// wireSchema names a message's allowed fields and their wire types.
type wireSchema struct {
	allowed uint8
	types   [maxField]protowire.Type
}

func wireSchemaOf(m map[protowire.Number]protowire.Type) wireSchema {
	var s wireSchema
	for n, t := range m {
		if n <= 0 || n >= maxField {
			panic(fmt.Sprintf("icp: schema field %d out of range", n))
		}
		s.allowed |= 1 << n
		s.types[n] = t
	}
	return s
}

// fieldSet is a message's fields by number.
type fieldSet struct {
	present uint8
	f       [maxField]field
}

func (fs *fieldSet) get(n protowire.Number) (field, bool) {
	if n <= 0 || n >= maxField || fs.present&(1<<n) == 0 {
		return field{}, false
	}
	return fs.f[n], true
}

func (fs *fieldSet) has(n protowire.Number) bool { _, ok := fs.get(n); return ok }

// fields splits a message strictly: every field must be one of allowed,
// with the wire type it names, at most once, and varints and tags
// minimally encoded. protobuf's last-one-wins merge would let two readers
// of one block disagree about it; refusing repeats, unknown fields and
// padding leaves every block exactly one reading.
func fields(b []byte, msg string, allowed *wireSchema) (fieldSet, error) {
	var out fieldSet
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fieldSet{}, bad("%s: %v", msg, protowire.ParseError(n))
		}
		if n != protowire.SizeTag(num) {
			return fieldSet{}, bad("%s: field %d: tag not minimally encoded", msg, num)
		}
		b = b[n:]
		if num <= 0 || num >= maxField || allowed.allowed&(1<<num) == 0 {
			return fieldSet{}, bad("%s: unknown field %d", msg, num)
		}
		if want := allowed.types[num]; typ != want {
			return fieldSet{}, bad("%s: field %d has wire type %d, want %d", msg, num, typ, want)
		}
		if out.present&(1<<num) != 0 {
			return fieldSet{}, bad("%s: field %d repeated", msg, num)
		}
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return fieldSet{}, bad("%s: field %d: %v", msg, num, protowire.ParseError(m))
			}
			if m != protowire.SizeVarint(v) {
				return fieldSet{}, bad("%s: field %d: varint not minimally encoded", msg, num)
			}
			f.v, b = v, b[m:]
		case protowire.BytesType:
			body, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fieldSet{}, bad("%s: field %d: %v", msg, num, protowire.ParseError(m))
			}
			if m-len(body) != protowire.SizeVarint(uint64(len(body))) {
				return fieldSet{}, bad("%s: field %d: length not minimally encoded", msg, num)
			}
			f.body, b = body, b[m:]
		}
		out.f[num] = f
		out.present |= 1 << num
	}
	return out, nil
}

var (
	bt = protowire.BytesType

	singleVarint = wireSchemaOf(map[protowire.Number]protowire.Type{fSingle: protowire.VarintType})
	singleBytes  = wireSchemaOf(map[protowire.Number]protowire.Type{fSingle: protowire.BytesType})
	blockSchema  = wireSchemaOf(map[protowire.Number]protowire.Type{
		fBlockParentHash: bt, fBlockTimestamp: bt, fBlockTransaction: bt})
	txSchema = wireSchemaOf(map[protowire.Number]protowire.Type{
		fTxBurn: bt, fTxMint: bt, fTxSend: bt, fTxMemo: bt, fTxCreatedAt: bt, fTxCreatedAtTime: bt, fTxICRC1Memo: bt})
	burnSchema = wireSchemaOf(map[protowire.Number]protowire.Type{fBurnFrom: bt, fBurnAmount: bt, fBurnSpender: bt})
	mintSchema = wireSchemaOf(map[protowire.Number]protowire.Type{fMintTo: bt, fMintAmount: bt})
	sendSchema = wireSchemaOf(map[protowire.Number]protowire.Type{
		fSendFrom: bt, fSendTo: bt, fSendAmount: bt, fSendMaxFee: bt, fSendApprove: bt, fSendTransferFrom: bt})
	transferFromSchema = wireSchemaOf(map[protowire.Number]protowire.Type{fTransferFromSpender: bt})
	approveSchema      = wireSchemaOf(map[protowire.Number]protowire.Type{
		fApproveAllowance: bt, fApproveExpiresAt: bt, fApproveExpectedAllowance: bt})
)

// u64msg reads a message whose only field is a uint64 (Tokens, TimeStamp,
// Memo, BlockIndex); an empty message is 0, as proto3 writes it.
func u64msg(b []byte, msg string) (uint64, error) {
	fs, err := fields(b, msg, &singleVarint)
	if err != nil {
		return 0, err
	}
	return fs.f[fSingle].v, nil
}

func bytesmsg(b []byte, msg string) ([]byte, error) {
	fs, err := fields(b, msg, &singleBytes)
	if err != nil {
		return nil, err
	}
	return fs.f[fSingle].body, nil
}

func accountID(b []byte, msg string) (*AccountID, error) {
	h, err := bytesmsg(b, msg)
	if err != nil {
		return nil, err
	}
	var a AccountID
	switch len(h) {
	case 28:
		copy(a[:], h)
	case 32:
		// The proto allows the checksummed form; DFINITY's ledger writes
		// the 28-byte hash, but a checksummed one is the same account.
		if a, err = fromAddress(h); err != nil {
			return nil, bad("%s: %v", msg, err)
		}
	default:
		return nil, bad("%s: %d bytes, want 28 or 32", msg, len(h))
	}
	return &a, nil
}

// Decode reads one block strictly. Required fields (the timestamp, the
// transaction, its one operation and the accounts and amounts that
// operation always records) must be present: a block missing one was not
// written by the ICP ledger.
func Decode(raw []byte) (*Block, error) {
	fs, err := fields(raw, "Block", &blockSchema)
	if err != nil {
		return nil, err
	}
	var blk Block
	if f, ok := fs.get(fBlockParentHash); ok {
		h, err := bytesmsg(f.body, "Block.parent_hash")
		if err != nil {
			return nil, err
		}
		if len(h) != 32 {
			return nil, bad("Block.parent_hash: %d bytes, want 32", len(h))
		}
		var p [32]byte
		copy(p[:], h)
		blk.ParentHash = &p
	}
	f, ok := fs.get(fBlockTimestamp)
	if !ok {
		return nil, bad("Block: no timestamp")
	}
	if blk.Timestamp, err = u64msg(f.body, "Block.timestamp"); err != nil {
		return nil, err
	}
	f, ok = fs.get(fBlockTransaction)
	if !ok {
		return nil, bad("Block: no transaction")
	}
	if err := decodeTx(f.body, &blk.Tx); err != nil {
		return nil, err
	}
	return &blk, nil
}

func decodeTx(b []byte, tx *Transaction) error {
	fs, err := fields(b, "Transaction", &txSchema)
	if err != nil {
		return err
	}
	ops := 0
	for _, n := range []protowire.Number{fTxBurn, fTxMint, fTxSend} {
		if fs.has(n) {
			ops++
		}
	}
	if ops != 1 {
		return bad("Transaction: %d operations, want 1", ops)
	}
	if f, ok := fs.get(fTxMemo); ok {
		if tx.Memo, err = u64msg(f.body, "Transaction.memo"); err != nil {
			return err
		}
	}
	if f, ok := fs.get(fTxCreatedAt); ok {
		if _, err = u64msg(f.body, "Transaction.created_at"); err != nil {
			return err
		}
	}
	if f, ok := fs.get(fTxCreatedAtTime); ok {
		t, err := u64msg(f.body, "Transaction.created_at_time")
		if err != nil {
			return err
		}
		tx.CreatedAtTime = &t
	}
	if f, ok := fs.get(fTxICRC1Memo); ok {
		m, err := bytesmsg(f.body, "Transaction.icrc1_memo")
		if err != nil {
			return err
		}
		tx.ICRC1Memo, tx.HasICRC1Memo = append([]byte{}, m...), true
	}
	switch {
	case fs.has(fTxBurn):
		return decodeBurn(fs.f[fTxBurn].body, tx)
	case fs.has(fTxMint):
		return decodeMint(fs.f[fTxMint].body, tx)
	}
	return decodeSend(fs.f[fTxSend].body, tx)
}

// required reads message field n of fs with read, failing when absent.
func required[T any](fs *fieldSet, n protowire.Number, msg string, read func([]byte, string) (T, error)) (T, error) {
	f, ok := fs.get(n)
	if !ok {
		var zero T
		return zero, bad("%s: missing", msg)
	}
	return read(f.body, msg)
}

func optional[T any](fs *fieldSet, n protowire.Number, msg string, read func([]byte, string) (T, error)) (*T, error) {
	f, ok := fs.get(n)
	if !ok {
		return nil, nil
	}
	v, err := read(f.body, msg)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

func decodeBurn(b []byte, tx *Transaction) (err error) {
	fs, err := fields(b, "Burn", &burnSchema)
	if err != nil {
		return err
	}
	tx.Op = OpBurn
	if tx.From, err = required(&fs, fBurnFrom, "Burn.from", accountID); err != nil {
		return err
	}
	if tx.Amount, err = required(&fs, fBurnAmount, "Burn.amount", u64msg); err != nil {
		return err
	}
	if f, ok := fs.get(fBurnSpender); ok {
		tx.Spender, err = accountID(f.body, "Burn.spender")
	}
	return err
}

func decodeMint(b []byte, tx *Transaction) (err error) {
	fs, err := fields(b, "Mint", &mintSchema)
	if err != nil {
		return err
	}
	tx.Op = OpMint
	if tx.To, err = required(&fs, fMintTo, "Mint.to", accountID); err != nil {
		return err
	}
	tx.Amount, err = required(&fs, fMintAmount, "Mint.amount", u64msg)
	return err
}

func decodeSend(b []byte, tx *Transaction) (err error) {
	fs, err := fields(b, "Send", &sendSchema)
	if err != nil {
		return err
	}
	if fs.has(fSendApprove) && fs.has(fSendTransferFrom) {
		return bad("Send: both extensions")
	}
	from, err := required(&fs, fSendFrom, "Send.from", accountID)
	if err != nil {
		return err
	}
	to, err := required(&fs, fSendTo, "Send.to", accountID)
	if err != nil {
		return err
	}
	amount, err := required(&fs, fSendAmount, "Send.amount", u64msg)
	if err != nil {
		return err
	}
	fee, err := required(&fs, fSendMaxFee, "Send.max_fee", u64msg)
	if err != nil {
		return err
	}
	tx.From, tx.Fee = from, &fee
	if f, ok := fs.get(fSendApprove); ok {
		// An approve names the spender in `to` and carries no amount.
		if amount != 0 {
			return bad("Send.amount: %d on an approve, want 0", amount)
		}
		tx.Op, tx.Spender = OpApprove, to
		return decodeApprove(f.body, tx)
	}
	tx.Op, tx.To, tx.Amount = OpTransfer, to, amount
	if f, ok := fs.get(fSendTransferFrom); ok {
		tfs, err := fields(f.body, "TransferFrom", &transferFromSchema)
		if err != nil {
			return err
		}
		if tx.Spender, err = required(&tfs, fTransferFromSpender, "TransferFrom.spender", accountID); err != nil {
			return err
		}
	}
	return nil
}

func decodeApprove(b []byte, tx *Transaction) (err error) {
	fs, err := fields(b, "Approve", &approveSchema)
	if err != nil {
		return err
	}
	if tx.Amount, err = required(&fs, fApproveAllowance, "Approve.allowance", u64msg); err != nil {
		return err
	}
	if tx.ExpiresAt, err = optional(&fs, fApproveExpiresAt, "Approve.expires_at", u64msg); err != nil {
		return err
	}
	tx.ExpectedAllowance, err = optional(&fs, fApproveExpectedAllowance, "Approve.expected_allowance", u64msg)
	return err
}

// Encode writes the block as DFINITY's ledger does (prost, proto3): fields
// in field-number order, optional messages only when present, zero scalars
// left out, accounts as their 28-byte hash.
func Encode(blk *Block) ([]byte, error) {
	tx := &blk.Tx
	var t []byte
	switch tx.Op {
	case OpBurn:
		if tx.From == nil {
			return nil, errors.New("icp: encode burn without from")
		}
		var m []byte
		m = msgField(m, fBurnFrom, accountBody(tx.From))
		m = msgField(m, fBurnAmount, u64Body(tx.Amount))
		if tx.Spender != nil {
			m = msgField(m, fBurnSpender, accountBody(tx.Spender))
		}
		t = msgField(t, fTxBurn, m)
	case OpMint:
		if tx.To == nil {
			return nil, errors.New("icp: encode mint without to")
		}
		var m []byte
		m = msgField(m, fMintTo, accountBody(tx.To))
		m = msgField(m, fMintAmount, u64Body(tx.Amount))
		t = msgField(t, fTxMint, m)
	case OpTransfer, OpApprove:
		to, amount := tx.To, tx.Amount
		if tx.Op == OpApprove {
			to, amount = tx.Spender, 0
		}
		if tx.From == nil || to == nil || tx.Fee == nil {
			return nil, fmt.Errorf("icp: encode %s without from, to or fee", tx.Op)
		}
		var m []byte
		m = msgField(m, fSendFrom, accountBody(tx.From))
		m = msgField(m, fSendTo, accountBody(to))
		m = msgField(m, fSendAmount, u64Body(amount))
		m = msgField(m, fSendMaxFee, u64Body(*tx.Fee))
		switch {
		case tx.Op == OpApprove:
			var a []byte
			a = msgField(a, fApproveAllowance, u64Body(tx.Amount))
			if tx.ExpiresAt != nil {
				a = msgField(a, fApproveExpiresAt, u64Body(*tx.ExpiresAt))
			}
			if tx.ExpectedAllowance != nil {
				a = msgField(a, fApproveExpectedAllowance, u64Body(*tx.ExpectedAllowance))
			}
			m = msgField(m, fSendApprove, a)
		case tx.Spender != nil:
			m = msgField(m, fSendTransferFrom, msgField(nil, fTransferFromSpender, accountBody(tx.Spender)))
		}
		t = msgField(t, fTxSend, m)
	default:
		return nil, fmt.Errorf("icp: encode %s", tx.Op)
	}
	t = msgField(t, fTxMemo, u64Body(tx.Memo))
	if tx.CreatedAtTime != nil {
		t = msgField(t, fTxCreatedAtTime, u64Body(*tx.CreatedAtTime))
	}
	if tx.HasICRC1Memo {
		t = msgField(t, fTxICRC1Memo, bytesBody(tx.ICRC1Memo))
	}
	var out []byte
	if blk.ParentHash != nil {
		out = msgField(out, fBlockParentHash, bytesBody(blk.ParentHash[:]))
	}
	out = msgField(out, fBlockTimestamp, u64Body(blk.Timestamp))
	out = msgField(out, fBlockTransaction, t)
	return out, nil
}

func msgField(b []byte, n protowire.Number, body []byte) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

// u64Body is a one-uint64 message; proto3 leaves a zero out.
func u64Body(v uint64) []byte {
	if v == 0 {
		return []byte{}
	}
	b := protowire.AppendTag(nil, fSingle, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func bytesBody(v []byte) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, fSingle, protowire.BytesType), v)
}

func accountBody(a *AccountID) []byte { return bytesBody(a[:]) }
