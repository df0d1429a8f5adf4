package matcher

import (
	"bytes"
	"math"
	"math/big"

	"github.com/reconciled/reconciled/icrc3"
)

// Result says how a block relates to an intent.
type Result struct {
	// Match: the block records the intended call (DESIGN §4).
	Match bool
	// NearMiss: same stamp, same caller-side account and same kind family,
	// but Differs names the intent fields that disagree. Never a match.
	NearMiss bool
	// Differs lists intent field names in a fixed order: method, from,
	// spender, to, amount, expected_allowance, expires_at, fee, memo.
	Differs []string
}

// Field names reported in Result.Differs.
const (
	FieldMethod            = "method"
	FieldFrom              = "from"
	FieldSpender           = "spender"
	FieldTo                = "to"
	FieldAmount            = "amount"
	FieldExpectedAllowance = "expected_allowance"
	FieldExpiresAt         = "expires_at"
	FieldFee               = "fee"
	FieldMemo              = "memo"
)

// ExpectedKind is the kind of block the intent produces if it executed:
// icrc1_transfer from the minting account is a mint, to it a burn;
// icrc2_transfer_from to the minting account is a burn (with spender).
// Without a known minting account every transfer is read as a plain one.
func (in *Intent) ExpectedKind(r LedgerRules) icrc3.BlockKind {
	m := r.MintingAccount
	switch in.Method {
	case MethodTransfer:
		switch {
		case m != nil && in.Args.To.Equal(*m):
			return icrc3.BlockBurn
		case m != nil && in.CallerAccount().Equal(*m):
			return icrc3.BlockMint
		}
		return icrc3.BlockTransfer
	case MethodTransferFrom:
		if m != nil && in.Args.To.Equal(*m) {
			return icrc3.BlockBurn
		}
		return icrc3.BlockTransferFrom
	case MethodApprove:
		return icrc3.BlockApprove
	}
	return icrc3.BlockUnknown
}

func family(k icrc3.BlockKind) int {
	switch k {
	case icrc3.BlockTransfer, icrc3.BlockTransferFrom, icrc3.BlockMint, icrc3.BlockBurn:
		return 1
	case icrc3.BlockApprove:
		return 2
	}
	return 0
}

// Match compares one block with the intent by DESIGN §4. It looks at fields
// only; the caller restricts blocks to the intent's Window. Balances never
// enter: only a block can settle an intent.
func Match(in *Intent, b *icrc3.Block, r LedgerRules) Result {
	if b == nil || family(b.Kind) == 0 {
		return Result{}
	}
	// Every call this matcher accepts carries a stamp, and the ledger
	// records it as tx.ts; a block without the same stamp came from
	// another call.
	if b.CreatedAt == nil || *b.CreatedAt != in.Args.CreatedAt {
		return Result{}
	}
	want := in.ExpectedKind(r)
	if family(want) != family(b.Kind) || !in.sameCallerSide(want, b) {
		return Result{}
	}
	d := in.differs(want, b)
	if len(d) == 0 {
		return Result{Match: true}
	}
	return Result{NearMiss: true, Differs: d}
}

// sameCallerSide compares the account that identifies who acted: the sender
// for transfer and approve, the spender for transfer_from, and `to` for a
// mint, whose block records no sender.
func (in *Intent) sameCallerSide(want icrc3.BlockKind, b *icrc3.Block) bool {
	switch {
	case want == icrc3.BlockMint:
		return accountEqual(in.Args.To, b.To)
	case in.Method == MethodTransferFrom:
		caller := in.CallerAccount()
		return accountEqual(&caller, blockSpender(b))
	default:
		caller := in.CallerAccount()
		return accountEqual(&caller, b.From)
	}
}

// blockSpender is the spender a block records. Spec-style 2xfer blocks may
// leave spender out, which can only mean the spender was the source account;
// DFINITY ledgers always record it.
func blockSpender(b *icrc3.Block) *icrc3.Account {
	if b.Spender == nil && b.Kind == icrc3.BlockTransferFrom {
		return b.From
	}
	return b.Spender
}

func (in *Intent) differs(want icrc3.BlockKind, b *icrc3.Block) []string {
	var d []string
	a := &in.Args
	caller := in.CallerAccount()

	method := b.Kind != want
	if in.Method == MethodTransfer && b.Spender != nil {
		// A spender means icrc2_transfer_from (or a burn through it).
		method = true
	}
	if method {
		d = append(d, FieldMethod)
	}

	switch {
	case want == icrc3.BlockMint:
		// The minting account is implicit in a mint block.
	case in.Method == MethodTransferFrom:
		if !accountEqual(a.From, b.From) {
			d = append(d, FieldFrom)
		}
	default:
		if !accountEqual(&caller, b.From) {
			d = append(d, FieldFrom)
		}
	}

	switch in.Method {
	case MethodTransferFrom:
		if !accountEqual(&caller, blockSpender(b)) {
			d = append(d, FieldSpender)
		}
	case MethodApprove:
		if !accountEqual(a.Spender, b.Spender) {
			d = append(d, FieldSpender)
		}
	}

	switch {
	case in.Method == MethodApprove:
	case want == icrc3.BlockBurn:
		// A burn records no `to`; only a recorded one can disagree.
		if b.To != nil && !accountEqual(a.To, b.To) {
			d = append(d, FieldTo)
		}
	default:
		if !accountEqual(a.To, b.To) {
			d = append(d, FieldTo)
		}
	}

	if in.Method == MethodApprove {
		if !approveAmountEqual(a.Amount, b.Amount) {
			d = append(d, FieldAmount)
		}
		if !optNatEqual(a.ExpectedAllowance, b.ExpectedAllowance) {
			d = append(d, FieldExpectedAllowance)
		}
		if !optUint64Equal(a.ExpiresAt, b.ExpiresAt) {
			d = append(d, FieldExpiresAt)
		}
	} else if b.Amount == nil || !a.Amount.Equal(*b.Amount) {
		d = append(d, FieldAmount)
	}

	if a.Fee != nil && !feeEqual(*a.Fee, b.EffectiveFee()) {
		d = append(d, FieldFee)
	}
	if a.HasMemo != b.HasMemo || a.HasMemo && !bytes.Equal(a.Memo, b.Memo) {
		d = append(d, FieldMemo)
	}
	return d
}

// feeEqual compares an intent's explicit fee with the block's effective fee.
// A block with no fee at all (mint, burn, a fee-less ledger) charged nothing,
// which agrees with an explicit fee of 0 only: the ledger refuses any other
// fee there (BadFee), writing no block.
func feeEqual(want icrc3.Nat, got *icrc3.Nat) bool {
	if got == nil {
		return want.IsZero()
	}
	return want.Equal(*got)
}

var (
	maxU64  = icrc3.NatFromUint64(math.MaxUint64)
	maxU256 = func() icrc3.Nat {
		n, _ := icrc3.NatFromBig(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)))
		return n
	}()
)

// approveAmountEqual accepts the ledger's clamp: an approve above the token's
// maximum is recorded as that maximum (u64::MAX on u64 ledgers, 2^256−1 on
// u256 ones), and that block is the record of this call.
func approveAmountEqual(want icrc3.Nat, got *icrc3.Nat) bool {
	if got == nil {
		return false
	}
	if want.Equal(*got) {
		return true
	}
	return want.Cmp(*got) > 0 && (got.Equal(maxU64) || got.Equal(maxU256))
}

// accountEqual: both absent, or both present and equal by the ICRC-1 rule
// (an absent subaccount equals 32 zero bytes).
func accountEqual(a, b *icrc3.Account) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

func optNatEqual(a, b *icrc3.Nat) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

func optUint64Equal(a, b *uint64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
