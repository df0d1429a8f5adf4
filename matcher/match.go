package matcher

import (
	"bytes"
	"math"
	"math/big"

	"github.com/reconciled/reconciled/icrc3"
)

// Result says how a block relates to an intent.
type Result struct {
	// Match: the block records the intended call (docs/design.md#matching).
	Match bool
	// Exact: the match was made as the ledger deduplicates (the intent
	// carried arg_hex): every account spelled as sent and tx.fee present
	// exactly when the call set a fee. Otherwise a match is normalised.
	Exact bool
	// NearMiss: same stamp, same caller-side account and same kind family,
	// but Differs names the intent fields that disagree. Never a match.
	NearMiss bool
	// Normalized, with NearMiss: the block matches the intent up to
	// normalisation but not as sent (the intent carries arg_hex; Differs
	// holds only subaccount_form and fee_form). On the DFINITY ledger that
	// is another call under the same stamp.
	Normalized bool
	// Differs lists intent field names in a fixed order: method, from,
	// spender, to, amount, expected_allowance, expires_at, fee, memo; or,
	// for a block that matches only up to normalisation an intent with
	// arg_hex, subaccount_form and fee_form.
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
	// FieldSubaccountForm: an account is spelled otherwise than sent (an
	// explicit all-zero subaccount against none): the same account, but
	// another transaction to the ledger.
	FieldSubaccountForm = "subaccount_form"
	// FieldFeeForm: tx.fee is present where the call set no fee, or absent
	// where it set one.
	FieldFeeForm = "fee_form"
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

// Match compares one block with the intent by docs/design.md#matching. It looks at fields
// only; the caller restricts blocks to the intent's Window. Balances never
// enter: only a block can settle an intent.
func Match(in *Intent, b *icrc3.Block, r LedgerRules) Result {
	if b == nil || family(b.Kind) == 0 {
		return Result{}
	}
	if b.Native != nil {
		return matchICP(in, b, r)
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
	if len(d) > 0 {
		return Result{NearMiss: true, Differs: d}
	}
	if in.sent == nil {
		return Result{Match: true}
	}
	// The sent bytes are known: the ledger deduplicates on them, so a
	// block equal only up to normalisation is another call's (two calls
	// under one stamp both execute), never this one's.
	if f := in.formDiffers(want, b); len(f) > 0 {
		return Result{NearMiss: true, Normalized: true, Differs: f}
	}
	return Result{Match: true, Exact: true}
}

// formDiffers compares what normalisation forgives, as ledgers record it:
// each account as sent ([owner] or [owner, subaccount]) and tx.fee exactly
// when the caller set one. Accounts a block does not record (a mint's
// sender, a burn's recipient, a spec-style 2xfer's spender) and the fee of
// mints and burns, which ledgers drop, have no form to compare.
func (in *Intent) formDiffers(want icrc3.BlockKind, b *icrc3.Block) []string {
	a := &in.Args
	pairs := [][2]*icrc3.Account{{in.sent.to, b.To}}
	switch in.Method {
	case MethodTransfer:
		pairs = append(pairs, [2]*icrc3.Account{{Owner: in.Caller, Subaccount: a.FromSubaccount}, b.From})
	case MethodTransferFrom:
		pairs = append(pairs, [2]*icrc3.Account{in.sent.from, b.From},
			[2]*icrc3.Account{{Owner: in.Caller, Subaccount: a.SpenderSubaccount}, b.Spender})
	case MethodApprove:
		pairs = append(pairs, [2]*icrc3.Account{{Owner: in.Caller, Subaccount: a.FromSubaccount}, b.From},
			[2]*icrc3.Account{in.sent.spender, b.Spender})
	}
	if want == icrc3.BlockMint {
		pairs = pairs[:1] // a mint records only `to`
	}
	var d []string
	for _, p := range pairs {
		if p[0] != nil && p[1] != nil && (p[0].Subaccount == nil) != (p[1].Subaccount == nil) {
			d = append(d, FieldSubaccountForm)
			break
		}
	}
	if b.Kind != icrc3.BlockMint && b.Kind != icrc3.BlockBurn && (a.Fee == nil) != (b.Fee == nil) {
		d = append(d, FieldFeeForm)
	}
	return d
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
