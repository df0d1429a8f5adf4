package ledgertest

import (
	"bytes"
	"fmt"

	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// Aliases so harnesses can stay inside this package's vocabulary.
type (
	TransferArg       = icrc1.TransferArg
	TransferError     = icrc1.TransferError
	ApproveArg        = icrc1.ApproveArgs
	ApproveError      = icrc1.ApproveError
	TransferFromArg   = icrc1.TransferFromArgs
	TransferFromError = icrc1.TransferFromError
)

// TrapError is a canister trap: no block is written and the caller gets
// reject code 5 over HTTP.
type TrapError struct{ Message string }

func (e *TrapError) Error() string { return "canister trapped: " + e.Message }

func trapf(format string, a ...any) *TrapError { return &TrapError{Message: fmt.Sprintf(format, a...)} }

type reqKind uint8

const (
	kindTransfer reqKind = iota + 1
	kindTransferFrom
	kindApprove
)

// txReq is a call after Candid decoding and trap checks, in ledger terms.
type txReq struct {
	kind               reqKind
	from, to, spender  icrc3.Account
	fromID, toID, spID uint32 // pre-interned ids (plus one); 0: intern from the accounts
	amt                icrc3.Nat
	fee                icrc3.Nat
	hasFee             bool
	memo               []byte
	hasMemo            bool
	createdAt          uint64
	hasCreatedAt       bool
	expAllow           icrc3.Nat
	hasExpAllow        bool
	expiresAt          uint64
	hasExpiresAt       bool
}

type errKind uint8

const (
	eBadFee errKind = iota + 1
	eBadBurn
	eInsufficientFunds
	eInsufficientAllowance
	eTooOld
	eCreatedInFuture
	eDuplicate
	eAllowanceChanged
	eExpired
)

// ledgerErr is a ledger error before it is shaped into the method's Candid
// error variant.
type ledgerErr struct {
	kind errKind
	nat  icrc3.Nat
	time uint64
}

func (e *ledgerErr) String() string {
	return fmt.Sprintf("ledger error %d (%s, %d)", e.kind, e.nat, e.time)
}

func (e *ledgerErr) transferError() *icrc1.TransferError {
	n := icrc1.IDLNat(e.nat)
	switch e.kind {
	case eBadFee:
		return &icrc1.TransferError{BadFee: &icrc1.ExpectedFee{ExpectedFee: n}}
	case eBadBurn:
		return &icrc1.TransferError{BadBurn: &icrc1.MinBurnAmount{MinBurnAmount: n}}
	case eInsufficientFunds:
		return &icrc1.TransferError{InsufficientFunds: &icrc1.BalanceArg{Balance: n}}
	case eTooOld:
		return &icrc1.TransferError{TooOld: &idl.Null{}}
	case eCreatedInFuture:
		return &icrc1.TransferError{CreatedInFuture: &icrc1.LedgerTime{LedgerTime: e.time}}
	case eDuplicate:
		return &icrc1.TransferError{Duplicate: &icrc1.DuplicateOf{DuplicateOf: n}}
	}
	return &icrc1.TransferError{GenericError: &icrc1.GenericErrorArg{ErrorCode: idl.NewNat(uint(0)), Message: e.String()}}
}

func (e *ledgerErr) transferFromError() *icrc1.TransferFromError {
	if e.kind == eInsufficientAllowance {
		return &icrc1.TransferFromError{InsufficientAllowance: &icrc1.AllowanceArg{Allowance: icrc1.IDLNat(e.nat)}}
	}
	t := e.transferError()
	return &icrc1.TransferFromError{BadFee: t.BadFee, BadBurn: t.BadBurn, InsufficientFunds: t.InsufficientFunds,
		TooOld: t.TooOld, CreatedInFuture: t.CreatedInFuture, Duplicate: t.Duplicate, GenericError: t.GenericError}
}

func (e *ledgerErr) approveError() *icrc1.ApproveError {
	switch e.kind {
	case eAllowanceChanged:
		return &icrc1.ApproveError{AllowanceChanged: &icrc1.CurrentAllowance{CurrentAllowance: icrc1.IDLNat(e.nat)}}
	case eExpired:
		return &icrc1.ApproveError{Expired: &icrc1.LedgerTime{LedgerTime: e.time}}
	}
	t := e.transferError()
	return &icrc1.ApproveError{BadFee: t.BadFee, InsufficientFunds: t.InsufficientFunds,
		TooOld: t.TooOld, CreatedInFuture: t.CreatedInFuture, Duplicate: t.Duplicate, GenericError: t.GenericError}
}

func (l *Ledger) idOf(a icrc3.Account, pre uint32) uint32 {
	if pre != 0 {
		return pre
	}
	return l.accts.intern(a)
}

func (l *Ledger) balance(norm uint32) icrc3.Nat {
	if int(norm) < len(l.balances) {
		return l.balances[norm]
	}
	return icrc3.Nat{}
}

func (l *Ledger) setBalance(norm uint32, n icrc3.Nat) {
	for int(norm) >= len(l.balances) {
		l.balances = append(l.balances, icrc3.Nat{})
	}
	l.balances[norm] = n
}

func (l *Ledger) currentAllowance(key [2]uint32, now uint64) allowance {
	a, ok := l.allowances[key]
	if !ok || (a.expiresAt != 0 && a.expiresAt <= now) {
		return allowance{}
	}
	return a
}

// execute applies a call with the DFINITY ledger's check order (ICRC3.md
// §4): amount conversion, BadFee, BadBurn, purge, then TooOld,
// CreatedInFuture and Duplicate when created_at_time is set, then the
// operation itself, then the append. Memo length and self-approval traps are
// checked by the callers before this. l.mu must be held for writing.
func (l *Ledger) execute(r *txReq, now uint64) (uint64, *ledgerErr, *TrapError) {
	rec := blockRec{ts: now}
	var fromID, toID, spID uint32
	switch r.kind {
	case kindTransfer, kindTransferFrom:
		fromID = l.idOf(r.from, r.fromID)
		toID = l.idOf(r.to, r.toID)
		if r.kind == kindTransferFrom {
			spID = l.idOf(r.spender, r.spID)
		}
	case kindApprove:
		fromID = l.idOf(r.from, r.fromID)
		spID = l.idOf(r.spender, r.spID)
	default:
		return 0, nil, trapf("unknown request kind %d", r.kind)
	}
	mintNorm := l.accts.get(l.mintingID).norm
	fromNorm := l.accts.get(fromID).norm

	amt := r.amt
	switch r.kind {
	case kindTransfer, kindTransferFrom:
		toNorm := l.accts.get(toID).norm
		switch {
		case toNorm == mintNorm && fromNorm == mintNorm:
			return 0, nil, trapf("the minting account cannot send tokens to itself")
		case toNorm == mintNorm:
			rec.op = opBurn
		case fromNorm == mintNorm:
			if r.kind == kindTransferFrom {
				return 0, nil, trapf("the minter account cannot delegate mints")
			}
			rec.op = opMint
		default:
			rec.op = opXfer
		}
		// No account can hold more than a u64 of tokens.
		if !fitsU64(amt) {
			return 0, &ledgerErr{kind: eInsufficientFunds, nat: l.balance(fromNorm)}, nil
		}
	case kindApprove:
		rec.op = opApprove
		if !fitsU64(amt) {
			amt = natMaxU64
		}
	}

	expectedFee := l.fee
	if rec.op == opMint || rec.op == opBurn {
		expectedFee = icrc3.Nat{}
	}
	if r.hasFee && !r.fee.Equal(expectedFee) {
		return 0, &ledgerErr{kind: eBadFee, nat: expectedFee}, nil
	}
	if rec.op == opBurn && amt.Cmp(l.fee) < 0 {
		return 0, &ledgerErr{kind: eBadBurn, nat: l.fee}, nil
	}

	rec.amt = amt
	switch rec.op {
	case opXfer, opApprove:
		rec.fee = l.fee
		if r.hasFee {
			rec.flags |= fTxFee
		} else {
			rec.flags |= fBlockFee
		}
	}
	switch rec.op {
	case opXfer:
		rec.from, rec.to, rec.spender = fromID, toID, spID
	case opMint:
		rec.to = toID
	case opBurn:
		rec.from, rec.spender = fromID, spID
	case opApprove:
		rec.from, rec.spender = fromID, spID
		if r.hasExpAllow {
			rec.flags |= fExpAllow
			rec.expAllow = r.expAllow
		}
		if r.hasExpiresAt {
			rec.flags |= fExpiresAt
			rec.expiresAt = r.expiresAt
		}
	}
	if r.hasMemo {
		rec.flags |= fMemo
		rec.memo = r.memo
	}
	if r.hasCreatedAt {
		rec.flags |= fCreatedAt
		rec.createdAt = r.createdAt
	}

	l.purgeDedup(now)
	rec.txHash = l.rh.txHash(&rec, l.accts, l.style)
	if r.hasCreatedAt {
		if r.createdAt+l.tw < now {
			return 0, &ledgerErr{kind: eTooOld}, nil
		}
		if r.createdAt > now+l.drift {
			return 0, &ledgerErr{kind: eCreatedInFuture, time: now}, nil
		}
		if idx, ok := l.dedup[rec.txHash]; ok {
			return 0, &ledgerErr{kind: eDuplicate, nat: icrc3.NatFromUint64(idx)}, nil
		}
	}

	// Apply: every check happens before the first mutation.
	fee := icrc3.Nat{}
	if rec.op == opXfer || rec.op == opApprove {
		fee = l.fee
	}
	bal := l.balance(fromNorm)
	switch rec.op {
	case opXfer, opBurn:
		need := natAdd(amt, fee)
		var akey [2]uint32
		useAllowance := spID != 0 && l.accts.get(spID).norm != fromNorm
		if useAllowance {
			akey = [2]uint32{fromNorm, l.accts.get(spID).norm}
			cur := l.currentAllowance(akey, now)
			if cur.amount.Cmp(need) < 0 {
				return 0, &ledgerErr{kind: eInsufficientAllowance, nat: cur.amount}, nil
			}
		}
		if bal.Cmp(need) < 0 {
			return 0, &ledgerErr{kind: eInsufficientFunds, nat: bal}, nil
		}
		if useAllowance {
			cur := l.currentAllowance(akey, now)
			cur.amount = natSub(cur.amount, need)
			if cur.amount.IsZero() {
				delete(l.allowances, akey)
			} else {
				l.allowances[akey] = cur
			}
		}
		l.setBalance(fromNorm, natSub(bal, need))
		if rec.op == opXfer {
			toNorm := l.accts.get(toID).norm
			l.setBalance(toNorm, natAdd(l.balance(toNorm), amt))
			l.supply = natSub(l.supply, fee)
		} else {
			l.supply = natSub(l.supply, amt)
		}
	case opMint:
		toNorm := l.accts.get(toID).norm
		l.setBalance(toNorm, natAdd(l.balance(toNorm), amt))
		l.supply = natAdd(l.supply, amt)
	case opApprove:
		if bal.Cmp(fee) < 0 {
			return 0, &ledgerErr{kind: eInsufficientFunds, nat: bal}, nil
		}
		if r.hasExpiresAt && r.expiresAt <= now {
			return 0, &ledgerErr{kind: eExpired, time: now}, nil
		}
		akey := [2]uint32{fromNorm, l.accts.get(spID).norm}
		cur := l.currentAllowance(akey, now)
		if r.hasExpAllow && !r.expAllow.Equal(cur.amount) {
			return 0, &ledgerErr{kind: eAllowanceChanged, nat: cur.amount}, nil
		}
		if amt.IsZero() {
			delete(l.allowances, akey)
		} else {
			na := allowance{amount: amt}
			if r.hasExpiresAt {
				na.expiresAt = r.expiresAt
			}
			l.allowances[akey] = na
		}
		l.setBalance(fromNorm, natSub(bal, fee))
		l.supply = natSub(l.supply, fee)
	}
	return l.appendBlock(&rec), nil, nil
}

// appendBlock chains, stores and certifies a block, remembers its dedup
// identity and archives when the threshold is reached.
func (l *Ledger) appendBlock(rec *blockRec) uint64 {
	idx := uint64(len(l.chain))
	var ph *icrc3.Hash
	if idx > 0 {
		ph = &l.chain[idx-1].hash
	}
	rec.hash = l.rh.blockHash(rec, ph, l.style)
	l.chain = append(l.chain, storedBlock{ts: rec.ts, createdAt: rec.createdAt, amt: rec.amt, memo: rec.memo, hash: rec.hash,
		from: rec.from, to: rec.to, spender: rec.spender, op: rec.op, flags: rec.flags})
	if rec.flags&(fExpAllow|fExpiresAt) != 0 {
		l.extras[idx] = approveExtra{expAllow: rec.expAllow, expiresAt: rec.expiresAt}
	}
	if rec.flags&fCreatedAt != 0 {
		l.dedup[rec.txHash] = idx
		l.dedupQ = append(l.dedupQ, dedupEntry{idx: idx, txHash: rec.txHash})
	}
	if !l.bulk {
		l.certify()
	}
	l.maybeArchive()
	return idx
}

// certify sets the certified data to the current tip, as the ledger does
// after every append.
func (l *Ledger) certify() {
	cd := l.certifiedAt(uint64(len(l.chain)))
	l.certified.Store(&cd)
}

// purgeDedup forgets transactions whose block is older than TW+drift, as
// the DFINITY ledger does; the remembered set then covers exactly the
// window in which a retry can still be accepted.
func (l *Ledger) purgeDedup(now uint64) {
	for l.dedupHead < len(l.dedupQ) {
		e := &l.dedupQ[l.dedupHead]
		if l.chain[e.idx].ts+l.tw+l.drift >= now {
			break
		}
		if cur, ok := l.dedup[e.txHash]; ok && cur == e.idx {
			delete(l.dedup, e.txHash)
		}
		l.dedupHead++
	}
	if l.dedupHead > 1024 && l.dedupHead*2 > len(l.dedupQ) {
		n := copy(l.dedupQ, l.dedupQ[l.dedupHead:])
		l.dedupQ = l.dedupQ[:n]
		l.dedupHead = 0
	}
}

func subaccountOf(p *[]byte) ([]byte, *TrapError) {
	if p == nil {
		return nil, nil
	}
	if len(*p) != 32 {
		return nil, trapf("invalid subaccount length %d", len(*p))
	}
	return bytes.Clone(*p), nil
}

func accountOf(c icrc3.CandidAccount) (icrc3.Account, *TrapError) {
	a, err := c.Account()
	if err != nil {
		return icrc3.Account{}, trapf("%v", err)
	}
	return a, nil
}

func (l *Ledger) memoOf(p *[]byte, r *txReq) *TrapError {
	if p == nil {
		return nil
	}
	if len(*p) > l.cfg.MaxMemoLength {
		return trapf("the memo field size of %d bytes is above the allowed limit of %d bytes", len(*p), l.cfg.MaxMemoLength)
	}
	r.memo, r.hasMemo = bytes.Clone(*p), true
	if r.memo == nil {
		r.memo = []byte{}
	}
	return nil
}

func setOptNat(p *idl.Nat, dst *icrc3.Nat, has *bool) {
	if p != nil {
		*dst, *has = icrc1.NatFromIDL(*p), true
	}
}

func setOptU64(p *uint64, dst *uint64, has *bool) {
	if p != nil {
		*dst, *has = *p, true
	}
}

func (l *Ledger) transferReq(caller principal.Principal, a *icrc1.TransferArg) (*txReq, *TrapError) {
	r := &txReq{kind: kindTransfer}
	if t := l.memoOf(a.Memo, r); t != nil {
		return nil, t
	}
	sub, t := subaccountOf(a.FromSubaccount)
	if t != nil {
		return nil, t
	}
	r.from = icrc3.Account{Owner: caller, Subaccount: sub}
	if r.to, t = accountOf(a.To); t != nil {
		return nil, t
	}
	r.amt = icrc1.NatFromIDL(a.Amount)
	setOptNat(a.Fee, &r.fee, &r.hasFee)
	setOptU64(a.CreatedAtTime, &r.createdAt, &r.hasCreatedAt)
	return r, nil
}

func (l *Ledger) transferFromReq(caller principal.Principal, a *icrc1.TransferFromArgs) (*txReq, *TrapError) {
	r := &txReq{kind: kindTransferFrom}
	if t := l.memoOf(a.Memo, r); t != nil {
		return nil, t
	}
	sub, t := subaccountOf(a.SpenderSubaccount)
	if t != nil {
		return nil, t
	}
	r.spender = icrc3.Account{Owner: caller, Subaccount: sub}
	if r.from, t = accountOf(a.From); t != nil {
		return nil, t
	}
	if r.to, t = accountOf(a.To); t != nil {
		return nil, t
	}
	r.amt = icrc1.NatFromIDL(a.Amount)
	setOptNat(a.Fee, &r.fee, &r.hasFee)
	setOptU64(a.CreatedAtTime, &r.createdAt, &r.hasCreatedAt)
	return r, nil
}

func (l *Ledger) approveReq(caller principal.Principal, a *icrc1.ApproveArgs) (*txReq, *TrapError) {
	r := &txReq{kind: kindApprove}
	if bytes.Equal(caller.Raw, a.Spender.Owner.Raw) {
		return nil, trapf("self approval is not allowed")
	}
	if t := l.memoOf(a.Memo, r); t != nil {
		return nil, t
	}
	sub, t := subaccountOf(a.FromSubaccount)
	if t != nil {
		return nil, t
	}
	r.from = icrc3.Account{Owner: caller, Subaccount: sub}
	if r.spender, t = accountOf(a.Spender); t != nil {
		return nil, t
	}
	r.amt = icrc1.NatFromIDL(a.Amount)
	setOptNat(a.Fee, &r.fee, &r.hasFee)
	setOptNat(a.ExpectedAllowance, &r.expAllow, &r.hasExpAllow)
	setOptU64(a.ExpiresAt, &r.expiresAt, &r.hasExpiresAt)
	setOptU64(a.CreatedAtTime, &r.createdAt, &r.hasCreatedAt)
	return r, nil
}

// call runs one update under the write lock at time now and records the
// execution on success.
func (l *Ledger) call(method string, caller principal.Principal, arg any, now uint64, build func() (*txReq, *TrapError)) (uint64, *ledgerErr, *TrapError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, t := build()
	if t != nil {
		return 0, nil, t
	}
	idx, lerr, t := l.execute(r, now)
	if lerr == nil && t == nil {
		l.execs = append(l.execs, Execution{Index: idx, Method: method, Caller: caller, Arg: arg, Time: now})
	}
	return idx, lerr, t
}

// goCall runs one Go-side call at the server's current time and turns its
// outcome into the error the HTTP path would encode: the method's own error
// type for ledger errors, *TrapError for traps.
func goCall[E error](l *Ledger, method string, caller principal.Principal, arg any, build func() (*txReq, *TrapError), asErr func(*ledgerErr) E) (uint64, error) {
	idx, lerr, t := l.call(method, caller, arg, l.h.Now(), build)
	switch {
	case t != nil:
		return 0, t
	case lerr != nil:
		return 0, asErr(lerr)
	}
	return idx, nil
}

// Transfer runs icrc1_transfer as caller at the server's current time. The
// error is a *TransferError for ledger errors or a *TrapError for traps.
func (l *Ledger) Transfer(caller principal.Principal, a TransferArg) (uint64, error) {
	return goCall(l, "icrc1_transfer", caller, a, func() (*txReq, *TrapError) { return l.transferReq(caller, &a) }, (*ledgerErr).transferError)
}

// Approve runs icrc2_approve; the error is a *ApproveError or a *TrapError.
func (l *Ledger) Approve(caller principal.Principal, a ApproveArg) (uint64, error) {
	return goCall(l, "icrc2_approve", caller, a, func() (*txReq, *TrapError) { return l.approveReq(caller, &a) }, (*ledgerErr).approveError)
}

// TransferFrom runs icrc2_transfer_from; the error is a *TransferFromError or a *TrapError.
func (l *Ledger) TransferFrom(caller principal.Principal, a TransferFromArg) (uint64, error) {
	return goCall(l, "icrc2_transfer_from", caller, a, func() (*txReq, *TrapError) { return l.transferFromReq(caller, &a) }, (*ledgerErr).transferFromError)
}

// Mint credits to with amount by a transfer from the minting account at the
// server's current time: the ledger records a mint block, as the DFINITY
// ledger does for transfers from its minting account.
func (l *Ledger) Mint(to icrc3.Account, amount icrc3.Nat) (uint64, error) {
	a := TransferArg{To: to.ToCandid(), Amount: icrc1.IDLNat(amount)}
	if sub := l.minting.Subaccount; sub != nil {
		s := append([]byte(nil), sub...)
		a.FromSubaccount = &s
	}
	return l.Transfer(l.minting.Owner, a)
}
