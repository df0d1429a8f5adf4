package icp

import (
	"crypto/sha256"
	"encoding/hex"
)

// TxHash is the ICP ledger's deduplication identity of a transaction:
// SHA-256 of its serde_cbor packed encoding (struct fields keyed by their
// position, enum variants by their index, an absent skipped option leaving
// its position unused). Two calls with equal TxHash inside the window are
// one transaction to the ledger; the test ledger deduplicates by it.
func TxHash(tx *Transaction) [32]byte {
	var c cborW
	icrc1 := tx.HasICRC1Memo
	n := 3
	if icrc1 {
		n = 4
	}
	c.head(5, uint64(n))
	c.head(0, 0)
	c.operation(tx)
	c.head(0, 1)
	c.head(0, tx.Memo)
	c.head(0, 2)
	if tx.CreatedAtTime == nil {
		c.b = append(c.b, 0xf6)
	} else {
		c.u64struct(*tx.CreatedAtTime)
	}
	if icrc1 {
		c.head(0, 3)
		c.head(2, uint64(len(tx.ICRC1Memo)))
		c.b = append(c.b, tx.ICRC1Memo...)
	}
	return sha256.Sum256(c.b)
}

type cborW struct{ b []byte }

func (c *cborW) head(major byte, v uint64) {
	m := major << 5
	switch {
	case v < 24:
		c.b = append(c.b, m|byte(v))
	case v <= 0xff:
		c.b = append(c.b, m|24, byte(v))
	case v <= 0xffff:
		c.b = append(c.b, m|25, byte(v>>8), byte(v))
	case v <= 0xffffffff:
		c.b = append(c.b, m|26, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	default:
		c.b = append(c.b, m|27, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
}

// u64struct is a one-field struct (Tokens, TimeStamp): {0: v}.
func (c *cborW) u64struct(v uint64) {
	c.head(5, 1)
	c.head(0, 0)
	c.head(0, v)
}

// account is an AccountIdentifier as serde writes it: its textual form.
func (c *cborW) account(a *AccountID) {
	s := a.String()
	c.head(3, uint64(len(s)))
	c.b = append(c.b, s...)
}

func (c *cborW) optAccount(a *AccountID) {
	if a == nil {
		c.b = append(c.b, 0xf6)
		return
	}
	c.account(a)
}

func (c *cborW) optU64struct(v *uint64) {
	if v == nil {
		c.b = append(c.b, 0xf6)
		return
	}
	c.u64struct(*v)
}

// operation: {variant: {fields}}; Burn 0, Mint 1, Transfer 2, Approve 3.
// Spender of Burn and Transfer is skipped when absent.
func (c *cborW) operation(tx *Transaction) {
	c.head(5, 1)
	fee := uint64(0)
	if tx.Fee != nil {
		fee = *tx.Fee
	}
	switch tx.Op {
	case OpBurn:
		c.head(0, 0)
		c.head(5, uint64(2+boolInt(tx.Spender != nil)))
		c.head(0, 0)
		c.account(tx.From)
		c.head(0, 1)
		c.u64struct(tx.Amount)
		if tx.Spender != nil {
			c.head(0, 2)
			c.account(tx.Spender)
		}
	case OpMint:
		c.head(0, 1)
		c.head(5, 2)
		c.head(0, 0)
		c.account(tx.To)
		c.head(0, 1)
		c.u64struct(tx.Amount)
	case OpTransfer:
		c.head(0, 2)
		c.head(5, uint64(4+boolInt(tx.Spender != nil)))
		c.head(0, 0)
		c.account(tx.From)
		c.head(0, 1)
		c.account(tx.To)
		c.head(0, 2)
		c.u64struct(tx.Amount)
		c.head(0, 3)
		c.u64struct(fee)
		if tx.Spender != nil {
			c.head(0, 4)
			c.account(tx.Spender)
		}
	case OpApprove:
		c.head(0, 3)
		c.head(5, 6)
		c.head(0, 0)
		c.account(tx.From)
		c.head(0, 1)
		c.account(tx.Spender)
		c.head(0, 2)
		c.u64struct(tx.Amount)
		c.head(0, 3)
		c.optU64struct(tx.ExpectedAllowance)
		c.head(0, 4)
		c.optU64struct(tx.ExpiresAt)
		c.head(0, 5)
		c.u64struct(fee)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TxHashHex is TxHash in lower-case hex.
func TxHashHex(tx *Transaction) string {
	h := TxHash(tx)
	return hex.EncodeToString(h[:])
}
