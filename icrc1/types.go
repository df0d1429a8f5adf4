package icrc1

import (
	"fmt"

	"github.com/aviate-labs/agent-go/candid/idl"

	"github.com/reconciled/reconciled/icrc3"
)

// Optional Candid fields are pointers; a nil pointer is `null`, which the
// ledger records differently from a present default (a nil subaccount is
// not 32 zero bytes in a block, and a nil fee is not Some(fee)).

// IDLNat converts n to agent-go's Candid nat.
func IDLNat(n icrc3.Nat) idl.Nat { return idl.NewBigNat(n.Big()) }

// NatFromIDL converts agent-go's Candid nat; a zero idl.Nat (nil big.Int) is 0.
func NatFromIDL(n idl.Nat) icrc3.Nat {
	b := n.BigInt()
	if b == nil {
		return icrc3.Nat{}
	}
	v, err := icrc3.NatFromBig(b)
	if err != nil {
		// A Candid nat cannot be negative; a negative value here is a bug in the caller.
		panic(fmt.Sprintf("icrc1: negative idl.Nat %s", b))
	}
	return v
}

// NatPtrFromIDL converts an optional Candid nat.
func NatPtrFromIDL(n *idl.Nat) *icrc3.Nat {
	if n == nil {
		return nil
	}
	v := NatFromIDL(*n)
	return &v
}

// IDLNatPtr converts an optional Nat.
func IDLNatPtr(n *icrc3.Nat) *idl.Nat {
	if n == nil {
		return nil
	}
	v := IDLNat(*n)
	return &v
}

// TransferArg is the argument of icrc1_transfer.
type TransferArg struct {
	FromSubaccount *[]byte             `ic:"from_subaccount,omitempty"`
	To             icrc3.CandidAccount `ic:"to"`
	Amount         idl.Nat             `ic:"amount"`
	Fee            *idl.Nat            `ic:"fee,omitempty"`
	Memo           *[]byte             `ic:"memo,omitempty"`
	CreatedAtTime  *uint64             `ic:"created_at_time,omitempty"`
}

// GenericErrorArg is the payload of the GenericError arm.
type GenericErrorArg struct {
	ErrorCode idl.Nat `ic:"error_code"`
	Message   string  `ic:"message"`
}

// ExpectedFee is the payload of BadFee.
type ExpectedFee struct {
	ExpectedFee idl.Nat `ic:"expected_fee"`
}

// MinBurnAmount is the payload of BadBurn.
type MinBurnAmount struct {
	MinBurnAmount idl.Nat `ic:"min_burn_amount"`
}

// BalanceArg is the payload of InsufficientFunds.
type BalanceArg struct {
	Balance idl.Nat `ic:"balance"`
}

// LedgerTime is the payload of CreatedInFuture and Expired.
type LedgerTime struct {
	LedgerTime uint64 `ic:"ledger_time"`
}

// DuplicateOf is the payload of Duplicate: the index of the original block.
type DuplicateOf struct {
	DuplicateOf idl.Nat `ic:"duplicate_of"`
}

// AllowanceArg is the payload of InsufficientAllowance.
type AllowanceArg struct {
	Allowance idl.Nat `ic:"allowance"`
}

// CurrentAllowance is the payload of AllowanceChanged.
type CurrentAllowance struct {
	CurrentAllowance idl.Nat `ic:"current_allowance"`
}

// TransferError is the ICRC-1 TransferError variant; exactly one arm is set.
type TransferError struct {
	BadFee                 *ExpectedFee     `ic:"BadFee,variant"`
	BadBurn                *MinBurnAmount   `ic:"BadBurn,variant"`
	InsufficientFunds      *BalanceArg      `ic:"InsufficientFunds,variant"`
	TooOld                 *idl.Null        `ic:"TooOld,variant"`
	CreatedInFuture        *LedgerTime      `ic:"CreatedInFuture,variant"`
	Duplicate              *DuplicateOf     `ic:"Duplicate,variant"`
	TemporarilyUnavailable *idl.Null        `ic:"TemporarilyUnavailable,variant"`
	GenericError           *GenericErrorArg `ic:"GenericError,variant"`
}

// Error names the arm and its payload, so a TransferError is a Go error.
func (e *TransferError) Error() string {
	switch {
	case e.BadFee != nil:
		return "BadFee{expected_fee=" + e.BadFee.ExpectedFee.String() + "}"
	case e.BadBurn != nil:
		return "BadBurn{min_burn_amount=" + e.BadBurn.MinBurnAmount.String() + "}"
	case e.InsufficientFunds != nil:
		return "InsufficientFunds{balance=" + e.InsufficientFunds.Balance.String() + "}"
	case e.TooOld != nil:
		return "TooOld"
	case e.CreatedInFuture != nil:
		return fmt.Sprintf("CreatedInFuture{ledger_time=%d}", e.CreatedInFuture.LedgerTime)
	case e.Duplicate != nil:
		return "Duplicate{duplicate_of=" + e.Duplicate.DuplicateOf.String() + "}"
	case e.TemporarilyUnavailable != nil:
		return "TemporarilyUnavailable"
	case e.GenericError != nil:
		return "GenericError{" + e.GenericError.ErrorCode.String() + ": " + e.GenericError.Message + "}"
	}
	return "TransferError{}"
}

// TransferResult is `variant { Ok: nat; Err: TransferError }`.
type TransferResult struct {
	Ok  *idl.Nat       `ic:"Ok,variant"`
	Err *TransferError `ic:"Err,variant"`
}

// TransferFromArgs is the argument of icrc2_transfer_from.
type TransferFromArgs struct {
	SpenderSubaccount *[]byte             `ic:"spender_subaccount,omitempty"`
	From              icrc3.CandidAccount `ic:"from"`
	To                icrc3.CandidAccount `ic:"to"`
	Amount            idl.Nat             `ic:"amount"`
	Fee               *idl.Nat            `ic:"fee,omitempty"`
	Memo              *[]byte             `ic:"memo,omitempty"`
	CreatedAtTime     *uint64             `ic:"created_at_time,omitempty"`
}

// TransferFromError is the ICRC-2 TransferFromError variant.
type TransferFromError struct {
	BadFee                 *ExpectedFee     `ic:"BadFee,variant"`
	BadBurn                *MinBurnAmount   `ic:"BadBurn,variant"`
	InsufficientFunds      *BalanceArg      `ic:"InsufficientFunds,variant"`
	InsufficientAllowance  *AllowanceArg    `ic:"InsufficientAllowance,variant"`
	TooOld                 *idl.Null        `ic:"TooOld,variant"`
	CreatedInFuture        *LedgerTime      `ic:"CreatedInFuture,variant"`
	Duplicate              *DuplicateOf     `ic:"Duplicate,variant"`
	TemporarilyUnavailable *idl.Null        `ic:"TemporarilyUnavailable,variant"`
	GenericError           *GenericErrorArg `ic:"GenericError,variant"`
}

func (e *TransferFromError) Error() string {
	if e.InsufficientAllowance != nil {
		return "InsufficientAllowance{allowance=" + e.InsufficientAllowance.Allowance.String() + "}"
	}
	t := TransferError{BadFee: e.BadFee, BadBurn: e.BadBurn, InsufficientFunds: e.InsufficientFunds, TooOld: e.TooOld,
		CreatedInFuture: e.CreatedInFuture, Duplicate: e.Duplicate, TemporarilyUnavailable: e.TemporarilyUnavailable, GenericError: e.GenericError}
	return t.Error()
}

// TransferFromResult is `variant { Ok: nat; Err: TransferFromError }`.
type TransferFromResult struct {
	Ok  *idl.Nat           `ic:"Ok,variant"`
	Err *TransferFromError `ic:"Err,variant"`
}

// ApproveArgs is the argument of icrc2_approve.
type ApproveArgs struct {
	FromSubaccount    *[]byte             `ic:"from_subaccount,omitempty"`
	Spender           icrc3.CandidAccount `ic:"spender"`
	Amount            idl.Nat             `ic:"amount"`
	ExpectedAllowance *idl.Nat            `ic:"expected_allowance,omitempty"`
	ExpiresAt         *uint64             `ic:"expires_at,omitempty"`
	Fee               *idl.Nat            `ic:"fee,omitempty"`
	Memo              *[]byte             `ic:"memo,omitempty"`
	CreatedAtTime     *uint64             `ic:"created_at_time,omitempty"`
}

// ApproveError is the ICRC-2 ApproveError variant.
type ApproveError struct {
	BadFee                 *ExpectedFee      `ic:"BadFee,variant"`
	InsufficientFunds      *BalanceArg       `ic:"InsufficientFunds,variant"`
	AllowanceChanged       *CurrentAllowance `ic:"AllowanceChanged,variant"`
	Expired                *LedgerTime       `ic:"Expired,variant"`
	TooOld                 *idl.Null         `ic:"TooOld,variant"`
	CreatedInFuture        *LedgerTime       `ic:"CreatedInFuture,variant"`
	Duplicate              *DuplicateOf      `ic:"Duplicate,variant"`
	TemporarilyUnavailable *idl.Null         `ic:"TemporarilyUnavailable,variant"`
	GenericError           *GenericErrorArg  `ic:"GenericError,variant"`
}

func (e *ApproveError) Error() string {
	switch {
	case e.AllowanceChanged != nil:
		return "AllowanceChanged{current_allowance=" + e.AllowanceChanged.CurrentAllowance.String() + "}"
	case e.Expired != nil:
		return fmt.Sprintf("Expired{ledger_time=%d}", e.Expired.LedgerTime)
	}
	t := TransferError{BadFee: e.BadFee, InsufficientFunds: e.InsufficientFunds, TooOld: e.TooOld,
		CreatedInFuture: e.CreatedInFuture, Duplicate: e.Duplicate, TemporarilyUnavailable: e.TemporarilyUnavailable, GenericError: e.GenericError}
	return t.Error()
}

// ApproveResult is `variant { Ok: nat; Err: ApproveError }`.
type ApproveResult struct {
	Ok  *idl.Nat      `ic:"Ok,variant"`
	Err *ApproveError `ic:"Err,variant"`
}

// AllowanceArgs is the argument of icrc2_allowance.
type AllowanceArgs struct {
	Account icrc3.CandidAccount `ic:"account"`
	Spender icrc3.CandidAccount `ic:"spender"`
}

// Allowance is the result of icrc2_allowance.
type Allowance struct {
	Allowance idl.Nat `ic:"allowance"`
	ExpiresAt *uint64 `ic:"expires_at,omitempty"`
}
