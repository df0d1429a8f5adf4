package ledgertest

import (
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// The ICP ledger deduplicates on the transaction it would record (its
// TxHash): accounts as AccountIdentifiers (an absent subaccount is 32
// zeros) and the fee as charged (left empty = the ledger fee). Two calls
// the ICRC ledger tells apart can be one transaction here; the second is
// answered Duplicate before the inner ledger sees it.

type icpSeen struct{ index, ts uint64 }

// icpTxOf is the transaction an ICRC call would record; ok is false when
// the call carries no created_at_time (no deduplication) or cannot be
// recorded (the inner ledger then refuses it on its own).
func (l *ICPLedger) icpTxOf(caller principal.Principal, method string, arg []byte) (*icp.Transaction, bool) {
	minting := l.inner.MintingAccount()
	fee := func(f *idl.Nat) *uint64 {
		v := u64Of(ptrNat(l.inner.Fee()))
		if f != nil {
			v = u64Of(icrc1.NatPtrFromIDL(f))
		}
		return &v
	}
	id := func(owner principal.Principal, sub *[]byte) *icp.AccountID {
		var s []byte
		if sub != nil {
			s = *sub
		}
		a, err := icp.NewAccountID(owner.Raw, s)
		if err != nil {
			return nil
		}
		return &a
	}
	var tx icp.Transaction
	var memo *[]byte
	switch method {
	case "icrc1_transfer":
		var a icrc1.TransferArg
		if decodeArg(arg, &a) != nil || a.CreatedAtTime == nil {
			return nil, false
		}
		to, err := a.To.Account()
		if err != nil {
			return nil, false
		}
		from := icrc3.Account{Owner: caller}
		if a.FromSubaccount != nil {
			from.Subaccount = *a.FromSubaccount
		}
		tx = icp.Transaction{Op: icp.OpTransfer, From: id(caller, a.FromSubaccount), To: id(to.Owner, a.To.Subaccount),
			Amount: u64Of(ptrNat(icrc1.NatFromIDL(a.Amount))), Fee: fee(a.Fee), CreatedAtTime: a.CreatedAtTime}
		switch {
		case from.Equal(minting):
			tx.Op, tx.From, tx.Fee = icp.OpMint, nil, nil
		case to.Equal(minting):
			tx.Op, tx.To, tx.Fee = icp.OpBurn, nil, nil
		}
		memo = a.Memo
	case "icrc2_approve":
		var a icrc1.ApproveArgs
		if decodeArg(arg, &a) != nil || a.CreatedAtTime == nil {
			return nil, false
		}
		tx = icp.Transaction{Op: icp.OpApprove, From: id(caller, a.FromSubaccount), Spender: id(a.Spender.Owner, a.Spender.Subaccount),
			Amount: u64Of(ptrNat(icrc1.NatFromIDL(a.Amount))), Fee: fee(a.Fee), ExpiresAt: a.ExpiresAt, CreatedAtTime: a.CreatedAtTime}
		if a.ExpectedAllowance != nil {
			e := u64Of(icrc1.NatPtrFromIDL(a.ExpectedAllowance))
			tx.ExpectedAllowance = &e
		}
		memo = a.Memo
	case "icrc2_transfer_from":
		var a icrc1.TransferFromArgs
		if decodeArg(arg, &a) != nil || a.CreatedAtTime == nil {
			return nil, false
		}
		to, err := a.To.Account()
		if err != nil {
			return nil, false
		}
		tx = icp.Transaction{Op: icp.OpTransfer, From: id(a.From.Owner, a.From.Subaccount), To: id(to.Owner, a.To.Subaccount),
			Spender: id(caller, a.SpenderSubaccount), Amount: u64Of(ptrNat(icrc1.NatFromIDL(a.Amount))), Fee: fee(a.Fee),
			CreatedAtTime: a.CreatedAtTime}
		if to.Equal(minting) {
			tx.Op, tx.To, tx.Fee = icp.OpBurn, nil, nil
		}
		memo = a.Memo
	default:
		return nil, false
	}
	if memo != nil {
		tx.ICRC1Memo, tx.HasICRC1Memo = *memo, true
	}
	return &tx, true
}

func ptrNat(n icrc3.Nat) *icrc3.Nat { return &n }

// duplicateOf is the block an earlier call recorded with the same
// transaction, still inside the window at now.
func (l *ICPLedger) duplicateOf(tx *icp.Transaction, now uint64) (uint64, bool) {
	t := *tx.CreatedAtTime
	if t+l.inner.tw < now || t > now+l.inner.drift {
		return 0, false // TooOld or CreatedInFuture: the inner ledger says so
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	s, ok := l.seen[icp.TxHash(tx)]
	if !ok || s.ts+l.inner.tw < now {
		return 0, false
	}
	return s.index, true
}

func duplicateReply(method string, idx uint64) ([]byte, *Reject) {
	d := &icrc1.DuplicateOf{DuplicateOf: idl.NewNat(idx)}
	switch method {
	case "icrc2_approve":
		return reply(icrc1.ApproveResult{Err: &icrc1.ApproveError{Duplicate: d}})
	case "icrc2_transfer_from":
		return reply(icrc1.TransferFromResult{Err: &icrc1.TransferFromError{Duplicate: d}})
	}
	return reply(icrc1.TransferResult{Err: &icrc1.TransferError{Duplicate: d}})
}
