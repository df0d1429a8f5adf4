package icrc3

import (
	"bytes"

	"github.com/aviate-labs/agent-go/principal"
)

// Account is an ICRC-1 account as a block records it: the owner and, when
// the caller sent one, the subaccount exactly as sent (nil when absent; 32
// bytes when present, possibly all zero). Blocks do not normalise the default
// subaccount, so Account keeps the recorded form and Equal applies the
// standard's rule that an absent subaccount equals 32 zero bytes.
type Account struct {
	Owner      principal.Principal
	Subaccount []byte
}

var zeroSubaccount [32]byte

// IsDefaultSubaccount reports whether the subaccount is absent or all zero.
func (a Account) IsDefaultSubaccount() bool {
	return a.Subaccount == nil || bytes.Equal(a.Subaccount, zeroSubaccount[:])
}

// Equal compares accounts by the ICRC-1 rule: same owner, and subaccounts
// equal once an absent one is read as 32 zero bytes.
func (a Account) Equal(b Account) bool {
	if !bytes.Equal(a.Owner.Raw, b.Owner.Raw) {
		return false
	}
	if a.IsDefaultSubaccount() || b.IsDefaultSubaccount() {
		return a.IsDefaultSubaccount() && b.IsDefaultSubaccount()
	}
	return bytes.Equal(a.Subaccount, b.Subaccount)
}

// Value returns the ICRC-3 encoding of the account: Array[Blob owner] or
// Array[Blob owner, Blob subaccount], as recorded.
func (a Account) Value() Value {
	if a.Subaccount == nil {
		return ArrayValue(Blob(a.Owner.Raw))
	}
	return ArrayValue(Blob(a.Owner.Raw), Blob(a.Subaccount))
}
