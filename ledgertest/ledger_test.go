package ledgertest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

func TestTransferBadFee(t *testing.T) {
	h := newFakeHost()
	l, alice, bob := newTestLedger(t, h, LedgerConfig{})
	n := l.Len()
	_, err := l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(5), Fee: ptr(nat(9_999))})
	te := asTransferErr(t, err)
	if te.BadFee == nil || te.BadFee.ExpectedFee.BigInt().Uint64() != 10_000 {
		t.Fatalf("want BadFee{10000}, got %v", te)
	}
	if l.Len() != n {
		t.Fatal("a failed call wrote a block")
	}
}

func TestTransferTooOldAndCreatedInFuture(t *testing.T) {
	h := newFakeHost()
	l, alice, bob := newTestLedger(t, h, LedgerConfig{})
	now := h.Now()
	// created_at + TW < now is TooOld; exactly at the boundary it is not.
	old := now - uint64(24*time.Hour) - 1
	te := asTransferErr(t, second(l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(5), CreatedAtTime: &old})))
	if te.TooOld == nil {
		t.Fatalf("want TooOld, got %v", te)
	}
	edge := now - uint64(24*time.Hour)
	if _, err := l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(5), CreatedAtTime: &edge}); err != nil {
		t.Fatalf("created_at = now-TW must be accepted: %v", err)
	}
	future := now + uint64(60*time.Second) + 1
	te = asTransferErr(t, second(l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(5), CreatedAtTime: &future})))
	if te.CreatedInFuture == nil || te.CreatedInFuture.LedgerTime != now {
		t.Fatalf("want CreatedInFuture{%d}, got %v", now, te)
	}
	inDrift := now + uint64(60*time.Second)
	if _, err := l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(5), CreatedAtTime: &inDrift}); err != nil {
		t.Fatalf("created_at = now+drift must be accepted: %v", err)
	}
}

func second(_ uint64, err error) error { return err }

func TestTransferDuplicate(t *testing.T) {
	h := newFakeHost()
	l, alice, bob := newTestLedger(t, h, LedgerConfig{})
	ts := h.Now()
	arg := TransferArg{To: acc(bob, nil), Amount: nat(77), Memo: ptr([]byte("m")), CreatedAtTime: &ts}
	idx, err := l.Transfer(alice, arg)
	if err != nil {
		t.Fatal(err)
	}
	h.advance(time.Hour)
	if _, err := l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(1)}); err != nil {
		t.Fatal(err)
	}
	te := asTransferErr(t, second(l.Transfer(alice, arg)))
	if te.Duplicate == nil || te.Duplicate.DuplicateOf.BigInt().Uint64() != idx {
		t.Fatalf("want Duplicate{%d}, got %v", idx, te)
	}
	// Not duplicates: subaccount null vs zeros, fee None vs Some, memo absent
	// vs empty. Each executes.
	variants := []TransferArg{
		{FromSubaccount: ptr(make([]byte, 32)), To: acc(bob, nil), Amount: nat(77), Memo: ptr([]byte("m")), CreatedAtTime: &ts},
		{To: acc(bob, make([]byte, 32)), Amount: nat(77), Memo: ptr([]byte("m")), CreatedAtTime: &ts},
		{To: acc(bob, nil), Amount: nat(77), Memo: ptr([]byte("m")), CreatedAtTime: &ts, Fee: ptr(nat(10_000))},
		{To: acc(bob, nil), Amount: nat(77), CreatedAtTime: &ts},
		{To: acc(bob, nil), Amount: nat(77), Memo: ptr([]byte{}), CreatedAtTime: &ts},
	}
	for i, v := range variants {
		if _, err := l.Transfer(alice, v); err != nil {
			t.Fatalf("variant %d: %v", i, err)
		}
	}
	// Without created_at_time there is no dedup.
	plain := TransferArg{To: acc(bob, nil), Amount: nat(3)}
	a, _ := l.Transfer(alice, plain)
	b, err := l.Transfer(alice, plain)
	if err != nil || a == b {
		t.Fatalf("plain retry must execute twice: %d %d %v", a, b, err)
	}
	// After the window (TW + drift past the block) the same request is TooOld, never executed again.
	h.advance(24*time.Hour + time.Minute)
	te = asTransferErr(t, second(l.Transfer(alice, arg)))
	if te.TooOld == nil {
		t.Fatalf("want TooOld after the window, got %v", te)
	}
}

func TestTransferInsufficientFunds(t *testing.T) {
	h := newFakeHost()
	l, alice, bob := newTestLedger(t, h, LedgerConfig{})
	te := asTransferErr(t, second(l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(1_000_000_000)})))
	if te.InsufficientFunds == nil || te.InsufficientFunds.Balance.BigInt().Uint64() != 1_000_000_000 {
		t.Fatalf("amount+fee > balance: want InsufficientFunds{1e9}, got %v", te)
	}
	huge := idl.NewBigNat(icrc3.NatFromUint64(1<<63).Big().Lsh(icrc3.NatFromUint64(1).Big(), 70))
	te = asTransferErr(t, second(l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: huge})))
	if te.InsufficientFunds == nil {
		t.Fatalf("amount beyond u64: want InsufficientFunds, got %v", te)
	}
	if _, err := l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(1_000_000_000 - 10_000)}); err != nil {
		t.Fatalf("exact balance must pass: %v", err)
	}
	if b := l.BalanceOf(icrc3.Account{Owner: alice, Subaccount: make([]byte, 32)}); !b.IsZero() {
		t.Fatalf("alice balance (zeros subaccount reads the default) = %s", b)
	}
}

func TestMintBurnAndBadBurn(t *testing.T) {
	h := newFakeHost()
	l, alice, _ := newTestLedger(t, h, LedgerConfig{})
	m := l.MintingAccount()
	supply0 := l.supply
	idx, err := l.Transfer(m.Owner, TransferArg{To: acc(alice, nil), Amount: nat(500), Fee: ptr(nat(0))})
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := l.Block(idx)
	tx, _ := blk.Get("tx")
	if op, _ := tx.Get("op"); op.Text() != "mint" {
		t.Fatalf("mint block op = %q", op.Text())
	}
	for _, k := range []string{"from", "fee", "spender"} {
		if _, ok := tx.Get(k); ok {
			t.Fatalf("mint block has tx.%s: %+v", k, tx)
		}
	}
	if _, ok := blk.Get("fee"); ok {
		t.Fatal("mint block has a top-level fee")
	}
	te := asTransferErr(t, second(l.Transfer(m.Owner, TransferArg{To: acc(alice, nil), Amount: nat(1), Fee: ptr(nat(10_000))})))
	if te.BadFee == nil || te.BadFee.ExpectedFee.BigInt().Sign() != 0 {
		t.Fatalf("mint with a fee: want BadFee{0}, got %v", te)
	}
	te = asTransferErr(t, second(l.Transfer(alice, TransferArg{To: m.ToCandid(), Amount: nat(9_999)})))
	if te.BadBurn == nil || te.BadBurn.MinBurnAmount.BigInt().Uint64() != 10_000 {
		t.Fatalf("want BadBurn{10000}, got %v", te)
	}
	idx, err = l.Transfer(alice, TransferArg{To: m.ToCandid(), Amount: nat(10_000), Memo: ptr([]byte{1})})
	if err != nil {
		t.Fatal(err)
	}
	blk, _ = l.Block(idx)
	tx, _ = blk.Get("tx")
	if op, _ := tx.Get("op"); op.Text() != "burn" {
		t.Fatalf("burn block op = %q", op.Text())
	}
	if _, ok := tx.Get("to"); ok {
		t.Fatal("burn block has tx.to")
	}
	if _, ok := blk.Get("fee"); ok {
		t.Fatal("burn block has a fee")
	}
	want := natAdd(supply0, icrc3.NatFromUint64(500))
	want = natSub(want, icrc3.NatFromUint64(10_000))
	if !l.supply.Equal(want) {
		t.Fatalf("supply %s, want %s", l.supply, want)
	}
}

func TestTransferFromAllowanceAndBurnViaSpender(t *testing.T) {
	h := newFakeHost()
	l, alice, bob := newTestLedger(t, h, LedgerConfig{})
	carol := testPrincipal(3)
	te := second(l.TransferFrom(bob, TransferFromArg{From: acc(alice, nil), To: acc(carol, nil), Amount: nat(100)}))
	var tfe *icrc1.TransferFromError
	if !errors.As(te, &tfe) || tfe.InsufficientAllowance == nil || tfe.InsufficientAllowance.Allowance.BigInt().Sign() != 0 {
		t.Fatalf("want InsufficientAllowance{0}, got %v", te)
	}
	if _, err := l.Approve(alice, ApproveArg{Spender: acc(bob, nil), Amount: nat(30_000)}); err != nil {
		t.Fatal(err)
	}
	// amount + fee must fit the allowance.
	te = second(l.TransferFrom(bob, TransferFromArg{From: acc(alice, nil), To: acc(carol, nil), Amount: nat(20_001)}))
	if !errors.As(te, &tfe) || tfe.InsufficientAllowance == nil || tfe.InsufficientAllowance.Allowance.BigInt().Uint64() != 30_000 {
		t.Fatalf("want InsufficientAllowance{30000}, got %v", te)
	}
	idx, err := l.TransferFrom(bob, TransferFromArg{From: acc(alice, nil), To: acc(carol, nil), Amount: nat(10_000)})
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := l.Block(idx)
	tx, _ := blk.Get("tx")
	if sp, ok := tx.Get("spender"); !ok || !sp.Equal(icrc3.Account{Owner: bob}.Value()) {
		t.Fatalf("transfer_from block lacks the spender: %+v", tx)
	}
	if op, _ := tx.Get("op"); op.Text() != "xfer" {
		t.Fatalf("op = %q", op.Text())
	}
	// 10_000 left: a burn via transfer_from spends amount only (no fee).
	m := l.MintingAccount()
	idx, err = l.TransferFrom(bob, TransferFromArg{From: acc(alice, nil), To: m.ToCandid(), Amount: nat(10_000)})
	if err != nil {
		t.Fatalf("burn via transfer_from: %v", err)
	}
	blk, _ = l.Block(idx)
	tx, _ = blk.Get("tx")
	if op, _ := tx.Get("op"); op.Text() != "burn" {
		t.Fatalf("op = %q", op.Text())
	}
	if _, ok := tx.Get("spender"); !ok {
		t.Fatal("burn via transfer_from lacks the spender")
	}
	var trap *TrapError
	if err := second(l.TransferFrom(bob, TransferFromArg{From: m.ToCandid(), To: acc(carol, nil), Amount: nat(1)})); !errors.As(err, &trap) {
		t.Fatalf("a delegated mint must trap, got %v", err)
	}
}

func TestApproveErrors(t *testing.T) {
	h := newFakeHost()
	l, alice, bob := newTestLedger(t, h, LedgerConfig{})
	var trap *TrapError
	if err := second(l.Approve(alice, ApproveArg{Spender: acc(alice, sub(1)), Amount: nat(1)})); !errors.As(err, &trap) {
		t.Fatalf("self-approval must trap, got %v", err)
	}
	n := l.Len()
	var ae *icrc1.ApproveError
	now := h.Now()
	err := second(l.Approve(alice, ApproveArg{Spender: acc(bob, nil), Amount: nat(1), ExpiresAt: &now}))
	if !errors.As(err, &ae) || ae.Expired == nil || ae.Expired.LedgerTime != now {
		t.Fatalf("want Expired{%d}, got %v", now, err)
	}
	err = second(l.Approve(alice, ApproveArg{Spender: acc(bob, nil), Amount: nat(1), ExpectedAllowance: ptr(nat(5))}))
	if !errors.As(err, &ae) || ae.AllowanceChanged == nil || ae.AllowanceChanged.CurrentAllowance.BigInt().Sign() != 0 {
		t.Fatalf("want AllowanceChanged{0}, got %v", err)
	}
	if l.Len() != n {
		t.Fatal("failed approvals wrote blocks")
	}
	exp := now + uint64(time.Hour)
	huge := idl.NewBigNat(icrc3.NatFromUint64(1).Big().Lsh(icrc3.NatFromUint64(1).Big(), 80))
	idx, err := l.Approve(alice, ApproveArg{Spender: acc(bob, nil), Amount: huge, ExpiresAt: &exp, ExpectedAllowance: ptr(nat(0))})
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := l.Block(idx)
	if got := natOf(t, blk, "tx", "amt"); got != ^uint64(0) {
		t.Fatalf("approve amt not clamped: %d", got)
	}
	if got := natOf(t, blk, "tx", "expires_at"); got != exp {
		t.Fatalf("expires_at %d", got)
	}
	out, rej := l.Query(h.queryCtx(), "icrc2_allowance", mustEncode(t, icrc1.AllowanceArgs{Account: acc(alice, nil), Spender: acc(bob, make([]byte, 32))}))
	if rej != nil {
		t.Fatal(rej)
	}
	var al icrc1.Allowance
	decodeOne(t, out, &al)
	if al.Allowance.BigInt().Uint64() != ^uint64(0) || al.ExpiresAt == nil || *al.ExpiresAt != exp {
		t.Fatalf("allowance %v %v", al.Allowance, al.ExpiresAt)
	}
	// After expiry the allowance reads 0 and a transfer_from fails.
	h.advance(time.Hour)
	err = second(l.TransferFrom(bob, TransferFromArg{From: acc(alice, nil), To: acc(bob, nil), Amount: nat(1)}))
	var tfe *icrc1.TransferFromError
	if !errors.As(err, &tfe) || tfe.InsufficientAllowance == nil || tfe.InsufficientAllowance.Allowance.BigInt().Sign() != 0 {
		t.Fatalf("expired allowance: want InsufficientAllowance{0}, got %v", err)
	}
}

func TestMemoTooLongTraps(t *testing.T) {
	h := newFakeHost()
	l, alice, bob := newTestLedger(t, h, LedgerConfig{})
	n := l.Len()
	var trap *TrapError
	if err := second(l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(1), Memo: ptr(make([]byte, 33))})); !errors.As(err, &trap) {
		t.Fatalf("want a trap, got %v", err)
	}
	// Over the Candid path it is reject code 5 and no block.
	_, rej := l.Update(CallContext{Caller: alice, Time: h.Now(), Replicated: true}, "icrc1_transfer",
		mustEncode(t, TransferArg{To: acc(bob, nil), Amount: nat(1), Memo: ptr(make([]byte, 33))}))
	if rej == nil || rej.Code != RejectCanisterError {
		t.Fatalf("want reject 5, got %+v", rej)
	}
	if l.Len() != n {
		t.Fatal("a trap wrote a block")
	}
	if _, err := l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(1), Memo: ptr(make([]byte, 32))}); err != nil {
		t.Fatalf("32-byte memo: %v", err)
	}
}

func TestUpdateOverCandid(t *testing.T) {
	h := newFakeHost()
	l, alice, bob := newTestLedger(t, h, LedgerConfig{})
	ctx := CallContext{Caller: alice, Time: h.Now(), Replicated: true}
	out, rej := l.Update(ctx, "icrc1_transfer", mustEncode(t, TransferArg{To: acc(bob, nil), Amount: nat(5)}))
	if rej != nil {
		t.Fatal(rej)
	}
	var res icrc1.TransferResult
	decodeOne(t, out, &res)
	if res.Ok == nil || res.Ok.BigInt().Uint64() != l.Len()-1 {
		t.Fatalf("result %+v", res)
	}
	out, rej = l.Update(ctx, "icrc1_transfer", mustEncode(t, TransferArg{To: acc(bob, nil), Amount: nat(5), Fee: ptr(nat(1))}))
	if rej != nil {
		t.Fatal(rej)
	}
	res = icrc1.TransferResult{}
	decodeOne(t, out, &res)
	if res.Err == nil || res.Err.BadFee == nil {
		t.Fatalf("want Err BadFee, got %+v", res)
	}
	// Garbage arguments are a reject, never a panic.
	if _, rej := l.Update(ctx, "icrc1_transfer", []byte("DIDL\x00\x01\x7d")); rej == nil || rej.Code != RejectCanisterError {
		t.Fatalf("garbage arg: %+v", rej)
	}
	if _, rej := l.Query(h.queryCtx(), "nope", nil); rej == nil || rej.Code != RejectDestinationInvalid {
		t.Fatalf("unknown method: %+v", rej)
	}
	if got := len(l.Executions()); got != 1 {
		t.Fatalf("executions %d, want 1", got)
	}
	ex := l.Executions()[0]
	if ex.Method != "icrc1_transfer" || !bytes.Equal(ex.Caller.Raw, alice.Raw) || ex.Index != l.Len()-1 {
		t.Fatalf("execution %+v", ex)
	}
	if _, ok := ex.Arg.(icrc1.TransferArg); !ok {
		t.Fatalf("execution arg %T", ex.Arg)
	}
}

func TestMetadataQueries(t *testing.T) {
	h := newFakeHost()
	l, alice, _ := newTestLedger(t, h, LedgerConfig{Symbol: "CKT", Decimals: 6})
	ctx := h.queryCtx()
	q := func(method string, arg []byte, out any) {
		t.Helper()
		b, rej := l.Query(ctx, method, arg)
		if rej != nil {
			t.Fatalf("%s: %+v", method, rej)
		}
		decodeOne(t, b, out)
	}
	var sym string
	q("icrc1_symbol", mustEncode(t), &sym)
	var dec uint8
	q("icrc1_decimals", mustEncode(t), &dec)
	var fee, supply idl.Nat
	q("icrc1_fee", mustEncode(t), &fee)
	q("icrc1_total_supply", mustEncode(t), &supply)
	var minting *icrc3.CandidAccount
	q("icrc1_minting_account", mustEncode(t), &minting)
	var md []metadataEntry
	q("icrc1_metadata", mustEncode(t), &md)
	var std []standard
	q("icrc1_supported_standards", mustEncode(t), &std)
	var bts []blockType
	q("icrc3_supported_block_types", mustEncode(t), &bts)
	var bal idl.Nat
	q("icrc1_balance_of", mustEncode(t, acc(alice, nil)), &bal)
	if sym != "CKT" || dec != 6 || fee.BigInt().Uint64() != 10_000 || supply.BigInt().Uint64() != 2_000_000_000 || bal.BigInt().Uint64() != 1_000_000_000 {
		t.Fatalf("symbol %q decimals %d fee %s supply %s balance %s", sym, dec, fee, supply, bal)
	}
	if minting == nil || !bytes.Equal(minting.Owner.Raw, l.MintingAccount().Owner.Raw) || minting.Subaccount != nil {
		t.Fatalf("minting account %+v", minting)
	}
	if len(md) != 5 || md[0].Key != "icrc1:decimals" || md[0].Value.Nat == nil || md[0].Value.Nat.BigInt().Uint64() != 6 {
		t.Fatalf("metadata %+v", md)
	}
	if len(std) != 3 || std[2].Name != "ICRC-3" || len(bts) != 5 {
		t.Fatalf("standards %+v block types %+v", std, bts)
	}
}

func TestDisabledEndpointFamilies(t *testing.T) {
	h := newFakeHost()
	l, _, _ := newTestLedger(t, h, LedgerConfig{DisableICRC3: true})
	if _, rej := l.Query(h.queryCtx(), "icrc3_get_blocks", mustEncode(t, []getBlocksArg{})); rej == nil || rej.Code != RejectDestinationInvalid {
		t.Fatalf("icrc3_get_blocks on an ICRC-3-less ledger: %+v", rej)
	}
	if _, rej := l.Query(h.queryCtx(), "get_blocks", mustEncode(t, getBlocksArg{nat(0), nat(1)})); rej != nil {
		t.Fatalf("legacy get_blocks: %+v", rej)
	}
	l2, _, _ := newTestLedger(t, h, LedgerConfig{DisableLegacy: true})
	if _, rej := l2.Query(h.queryCtx(), "get_blocks", mustEncode(t, getBlocksArg{nat(0), nat(1)})); rej == nil || rej.Code != RejectDestinationInvalid {
		t.Fatalf("get_blocks on a get-blocks-disabled ledger: %+v", rej)
	}
}

// Updates and block queries from many goroutines: run with -race.
func TestConcurrentCallsAndQueries(t *testing.T) {
	h := newFakeHost()
	l, alice, bob := newTestLedger(t, h, LedgerConfig{ArchiveThreshold: 60, ArchiveBatch: 30})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 300; i++ {
			if _, err := l.Transfer(alice, TransferArg{To: acc(bob, nil), Amount: nat(1)}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 200; i++ {
		if _, rej := l.Query(h.queryCtx(), "icrc3_get_blocks", mustEncode(t, []getBlocksArg{{nat(0), nat(1000)}})); rej != nil {
			t.Fatal(rej)
		}
		for _, ai := range l.Archives() {
			if _, rej := h.canister(ai.ID).Query(h.queryCtx(), "icrc3_get_blocks", mustEncode(t, []getBlocksArg{{nat(ai.Start), nat(10)}})); rej != nil {
				t.Fatal(rej)
			}
		}
		_ = l.CertifiedData()
	}
	<-done
	if l.Len() != 302 {
		t.Fatalf("len %d", l.Len())
	}
}
