package matcher

import (
	"bytes"

	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc3"
)

// matchICP compares an ICP ledger block with the intent by docs/design.md#matching, as
// that ledger records ICRC calls:
//   - accounts are AccountIdentifiers, so the intent's accounts are
//     compared by their identifiers (an absent subaccount is 32 zero
//     bytes; the identifier cannot tell the two apart, and neither does the
//     ledger's deduplication);
//   - the intent's memo is icrc1_memo, and the legacy u64 memo is 0 for
//     every ICRC call (a block with another legacy memo came from the
//     ledger's own `transfer`, never from this intent);
//   - every transfer and approve records the fee the ledger charged. An
//     intent that left fee empty agrees with any recorded fee: the block is
//     chained to the certified tip, so its fee is what the ledger charged,
//     and the ledger charges its fee whether or not the call named it. An
//     `icrc1_fee` query would add nothing but a single node's word. An
//     intent that named a fee must find exactly it (the ledger refuses any
//     other with BadFee and writes no block).
//
// With arg_hex every match is exact: the ledger deduplicates on the same
// coarse identity (zero subaccount = none, fee left empty = fee given),
// so no block equal up to this comparison can be another call's.
func matchICP(in *Intent, b *icrc3.Block, r LedgerRules) Result {
	blk, ok, err := icp.FromICRC3(b)
	if !ok || err != nil {
		// Bytes that no longer hash to the verified hash (altered in the
		// cache) or do not decode were never what the ledger wrote: they
		// record no call. The chain walk refuses such blocks before a
		// verdict, so this is reached only on damage after verification.
		return Result{}
	}
	tx := &blk.Tx
	if tx.CreatedAtTime == nil || *tx.CreatedAtTime != in.Args.CreatedAt {
		return Result{}
	}
	want := in.ExpectedKind(r)
	if family(want) != family(b.Kind) {
		return Result{}
	}
	ids, ok := in.icpIDs()
	if !ok {
		return Result{}
	}
	if !ids.sameCallerSide(in, want, tx) {
		return Result{}
	}
	if d := ids.differs(in, want, b.Kind, tx); len(d) > 0 {
		return Result{NearMiss: true, Differs: d}
	}
	return Result{Match: true, Exact: in.sent != nil}
}

// icpIDs are the AccountIdentifiers of the intent's accounts; a field the
// method does not have is nil.
type icpIDs struct {
	caller, from, to, spender *icp.AccountID
}

func (in *Intent) icpIDs() (icpIDs, bool) {
	id := func(a *icrc3.Account) (*icp.AccountID, bool) {
		if a == nil {
			return nil, true
		}
		v, err := icp.NewAccountID(a.Owner.Raw, a.Subaccount)
		if err != nil {
			return nil, false
		}
		return &v, true
	}
	caller := in.CallerAccount()
	var out icpIDs
	ok := true
	for _, p := range []struct {
		dst **icp.AccountID
		a   *icrc3.Account
	}{{&out.caller, &caller}, {&out.from, in.Args.From}, {&out.to, in.Args.To}, {&out.spender, in.Args.Spender}} {
		v, good := id(p.a)
		*p.dst, ok = v, ok && good
	}
	return out, ok
}

func idEqual(a, b *icp.AccountID) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// sameCallerSide: the sender for transfer and approve, the spender for
// transfer_from, `to` for a mint (which records no sender).
func (ids icpIDs) sameCallerSide(in *Intent, want icrc3.BlockKind, tx *icp.Transaction) bool {
	switch {
	case want == icrc3.BlockMint:
		return idEqual(ids.to, tx.To)
	case in.Method == MethodTransferFrom:
		return idEqual(ids.caller, tx.Spender)
	}
	return idEqual(ids.caller, tx.From)
}

func (ids icpIDs) differs(in *Intent, want, got icrc3.BlockKind, tx *icp.Transaction) []string {
	var d []string
	a := &in.Args
	if got != want || in.Method == MethodTransfer && tx.Spender != nil {
		d = append(d, FieldMethod)
	}
	switch {
	case want == icrc3.BlockMint:
	case in.Method == MethodTransferFrom:
		if !idEqual(ids.from, tx.From) {
			d = append(d, FieldFrom)
		}
	default:
		if !idEqual(ids.caller, tx.From) {
			d = append(d, FieldFrom)
		}
	}
	switch in.Method {
	case MethodTransferFrom:
		if !idEqual(ids.caller, tx.Spender) {
			d = append(d, FieldSpender)
		}
	case MethodApprove:
		if !idEqual(ids.spender, tx.Spender) {
			d = append(d, FieldSpender)
		}
	}
	switch {
	case in.Method == MethodApprove:
	case want == icrc3.BlockBurn:
		// A burn records no `to`; only a recorded one can disagree.
		if tx.To != nil && !idEqual(ids.to, tx.To) {
			d = append(d, FieldTo)
		}
	default:
		if !idEqual(ids.to, tx.To) {
			d = append(d, FieldTo)
		}
	}
	amt := icrc3.NatFromUint64(tx.Amount)
	if in.Method == MethodApprove {
		// The ICP ledger's tokens are u64: a larger allowance is recorded
		// as u64::MAX, which approveAmountEqual accepts.
		if !approveAmountEqual(a.Amount, &amt) {
			d = append(d, FieldAmount)
		}
		if !optNatEqual(a.ExpectedAllowance, natOf(tx.ExpectedAllowance)) {
			d = append(d, FieldExpectedAllowance)
		}
		if !optUint64Equal(a.ExpiresAt, tx.ExpiresAt) {
			d = append(d, FieldExpiresAt)
		}
	} else if !a.Amount.Equal(amt) {
		d = append(d, FieldAmount)
	}
	if a.Fee != nil && !feeEqual(*a.Fee, natOf(tx.Fee)) {
		d = append(d, FieldFee)
	}
	if tx.Memo != 0 || a.HasMemo != tx.HasICRC1Memo || a.HasMemo && !bytes.Equal(a.Memo, tx.ICRC1Memo) {
		d = append(d, FieldMemo)
	}
	return d
}

func natOf(v *uint64) *icrc3.Nat {
	if v == nil {
		return nil
	}
	n := icrc3.NatFromUint64(*v)
	return &n
}
