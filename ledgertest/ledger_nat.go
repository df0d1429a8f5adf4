package ledgertest

import (
	"math"
	"math/big"
	"math/bits"

	"github.com/reconciled/reconciled/icrc3"
)

// icrc3.Nat is immutable and has no arithmetic; balances need a few
// operations. The inline path keeps the common case allocation-free.

func natAdd(a, b icrc3.Nat) icrc3.Nat {
	x, okx := a.Uint64()
	y, oky := b.Uint64()
	if okx && oky {
		if s, c := bits.Add64(x, y, 0); c == 0 {
			return icrc3.NatFromUint64(s)
		}
	}
	n, _ := icrc3.NatFromBig(new(big.Int).Add(a.Big(), b.Big()))
	return n
}

// natSub returns a-b; the caller guarantees a >= b.
func natSub(a, b icrc3.Nat) icrc3.Nat {
	x, okx := a.Uint64()
	y, oky := b.Uint64()
	if okx && oky {
		return icrc3.NatFromUint64(x - y)
	}
	n, _ := icrc3.NatFromBig(new(big.Int).Sub(a.Big(), b.Big()))
	return n
}

var natMaxU64 = icrc3.NatFromUint64(math.MaxUint64)

// fitsU64 reports whether n is representable as a token amount of a u64
// ledger (the DFINITY ledger's Tokens type).
func fitsU64(n icrc3.Nat) bool {
	_, ok := n.Uint64()
	return ok
}
