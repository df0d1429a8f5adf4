package matcher

import (
	"math"
	"reflect"
	"testing"

	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc3"
)

func icpID(t testing.TB, a icrc3.Account) *icp.AccountID {
	t.Helper()
	id, err := icp.NewAccountID(a.Owner.Raw, a.Subaccount)
	if err != nil {
		t.Fatal(err)
	}
	return &id
}

// icpBlock encodes tx as the ICP ledger writes it and converts it as the
// ICP history does, so the matcher is tested on what the decoder produces.
func icpBlock(t testing.TB, tx icp.Transaction) *icrc3.Block {
	t.Helper()
	ph := [32]byte{1}
	raw, err := icp.Encode(&icp.Block{ParentHash: &ph, Timestamp: stamp + 1, Tx: tx})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := icp.ToICRC3(5, raw)
	if err != nil {
		t.Fatal(err)
	}
	return &b
}

func icpFee(v uint64) *uint64 { return &v }

// icpTransfer is what the ICP ledger writes for transferBody.
func icpTransfer(t testing.TB) icp.Transaction {
	return icp.Transaction{Op: icp.OpTransfer, From: icpID(t, icrc3.Account{Owner: callerP}), To: icpID(t, icrc3.Account{Owner: toP}),
		Amount: 150000000, Fee: icpFee(10000), ICRC1Memo: []byte("lunch"), HasICRC1Memo: true, CreatedAtTime: u64p(stamp)}
}

func wantResult(t *testing.T, name string, got Result, match bool, differs ...string) {
	t.Helper()
	if got.Match != match || !match && len(differs) > 0 != got.NearMiss || len(differs) > 0 && !reflect.DeepEqual(got.Differs, differs) {
		t.Errorf("%s: %+v, want match=%v differs=%v", name, got, match, differs)
	}
}

func TestMatchICPTransfer(t *testing.T) {
	in := mustParse(t, transferBody())
	wantResult(t, "as written", Match(in, icpBlock(t, icpTransfer(t)), rules), true)

	// fee left empty agrees with the fee the ledger recorded; a named fee
	// must be exactly it.
	tx := icpTransfer(t)
	tx.Fee = icpFee(123)
	wantResult(t, "other recorded fee, fee empty", Match(in, icpBlock(t, tx), rules), true)
	named := mustParse(t, transferBody().with("args.fee", "10000"))
	wantResult(t, "named fee", Match(named, icpBlock(t, icpTransfer(t)), rules), true)
	wantResult(t, "named fee differs", Match(named, icpBlock(t, tx), rules), false, FieldFee)

	// An all-zero subaccount names the same AccountIdentifier as none.
	zero := mustParse(t, transferBody().with("args.from_subaccount", zeroSubHex))
	if zero.Args.FromSubaccount == nil {
		t.Fatal("test intent lost its subaccount")
	}
	wantResult(t, "zero subaccount", Match(zero, icpBlock(t, icpTransfer(t)), rules), true)
	tx = icpTransfer(t)
	tx.To = icpID(t, icrc3.Account{Owner: toP, Subaccount: make([]byte, 32)})
	wantResult(t, "zero subaccount in the block", Match(in, icpBlock(t, tx), rules), true)
	tx.To = icpID(t, icrc3.Account{Owner: toP, Subaccount: sub(1)})
	wantResult(t, "subaccount 1 is another account", Match(in, icpBlock(t, tx), rules), false, FieldTo)
	if r := Match(zero, icpBlock(t, icpTransfer(t)), rules); r.Exact {
		t.Error("exact without arg_hex")
	}

	tx = icpTransfer(t)
	tx.To = icpID(t, icrc3.Account{Owner: otherP})
	tx.Amount++
	wantResult(t, "to and amount", Match(in, icpBlock(t, tx), rules), false, FieldTo, FieldAmount)

	tx = icpTransfer(t)
	tx.From = icpID(t, icrc3.Account{Owner: callerP, Subaccount: sub(1)})
	wantResult(t, "another sender is another call", Match(in, icpBlock(t, tx), rules), false)

	tx = icpTransfer(t)
	tx.CreatedAtTime = u64p(stamp + 1)
	wantResult(t, "another stamp", Match(in, icpBlock(t, tx), rules), false)
}

func TestMatchICPMemo(t *testing.T) {
	in := mustParse(t, transferBody())
	tx := icpTransfer(t)
	tx.Memo = 7
	wantResult(t, "legacy memo set", Match(in, icpBlock(t, tx), rules), false, FieldMemo)

	tx = icpTransfer(t)
	tx.ICRC1Memo = []byte("lunck")
	wantResult(t, "other memo", Match(in, icpBlock(t, tx), rules), false, FieldMemo)

	empty := mustParse(t, transferBody().with("args.memo", ""))
	none := mustParse(t, transferBody().with("args.memo", nil))
	tx = icpTransfer(t)
	tx.ICRC1Memo, tx.HasICRC1Memo = nil, false
	wantResult(t, "no memo", Match(none, icpBlock(t, tx), rules), true)
	wantResult(t, "empty memo against none", Match(empty, icpBlock(t, tx), rules), false, FieldMemo)
	tx.HasICRC1Memo = true
	wantResult(t, "empty memo", Match(empty, icpBlock(t, tx), rules), true)
}

func TestMatchICPTransferFrom(t *testing.T) {
	in := mustParse(t, transferFromBody())
	tx := icp.Transaction{Op: icp.OpTransfer, From: icpID(t, icrc3.Account{Owner: otherP}), To: icpID(t, icrc3.Account{Owner: toP}),
		Spender: icpID(t, icrc3.Account{Owner: callerP}), Amount: 500, Fee: icpFee(10), CreatedAtTime: u64p(stamp)}
	wantResult(t, "as written", Match(in, icpBlock(t, tx), rules), true)

	wrong := tx
	wrong.From = icpID(t, icrc3.Account{Owner: toP})
	wantResult(t, "other from", Match(in, icpBlock(t, wrong), rules), false, FieldFrom)

	wrong = tx
	wrong.Spender = icpID(t, icrc3.Account{Owner: otherP})
	wantResult(t, "other spender is another call", Match(in, icpBlock(t, wrong), rules), false)

	// A plain transfer from the same spender account is another method.
	plain := mustParse(t, transferBody().with("args.to", toText, "args.amount", "500", "args.memo", nil))
	wrong = tx
	wrong.From = icpID(t, icrc3.Account{Owner: callerP})
	wantResult(t, "transfer against transfer_from", Match(plain, icpBlock(t, wrong), rules), false, FieldMethod)
}

func TestMatchICPApprove(t *testing.T) {
	in := mustParse(t, approveBody())
	tx := icp.Transaction{Op: icp.OpApprove, From: icpID(t, icrc3.Account{Owner: callerP}), Spender: icpID(t, icrc3.Account{Owner: otherP}),
		Amount: 1000, Fee: icpFee(10000), ExpectedAllowance: u64p(0), ExpiresAt: u64p(1791600000000000000), CreatedAtTime: u64p(stamp)}
	wantResult(t, "as written", Match(in, icpBlock(t, tx), rules), true)

	wrong := tx
	wrong.ExpectedAllowance, wrong.ExpiresAt = nil, u64p(1)
	wantResult(t, "expected_allowance and expires_at", Match(in, icpBlock(t, wrong), rules), false, FieldExpectedAllowance, FieldExpiresAt)

	wrong = tx
	wrong.Spender = icpID(t, icrc3.Account{Owner: toP})
	wrong.Amount = 999
	wantResult(t, "spender and amount", Match(in, icpBlock(t, wrong), rules), false, FieldSpender, FieldAmount)

	huge := mustParse(t, approveBody().with("args.amount", "100000000000000000000000"))
	clamped := tx
	clamped.Amount = math.MaxUint64
	wantResult(t, "clamped allowance", Match(huge, icpBlock(t, clamped), rules), true)

	transfer := mustParse(t, transferBody())
	wantResult(t, "families do not mix", Match(transfer, icpBlock(t, tx), rules), false)
}

func TestMatchICPMintAndBurn(t *testing.T) {
	mint := mustParse(t, transferBody().with("caller", mintingP.Encode()))
	tx := icp.Transaction{Op: icp.OpMint, To: icpID(t, icrc3.Account{Owner: toP}), Amount: 150000000,
		ICRC1Memo: []byte("lunch"), HasICRC1Memo: true, CreatedAtTime: u64p(stamp)}
	wantResult(t, "mint", Match(mint, icpBlock(t, tx), rules), true)
	tx.Amount = 1
	wantResult(t, "mint amount", Match(mint, icpBlock(t, tx), rules), false, FieldAmount)

	burn := mustParse(t, transferBody().with("args.to", mintingP.Encode()))
	tx = icp.Transaction{Op: icp.OpBurn, From: icpID(t, icrc3.Account{Owner: callerP}), Amount: 150000000,
		ICRC1Memo: []byte("lunch"), HasICRC1Memo: true, CreatedAtTime: u64p(stamp)}
	wantResult(t, "burn", Match(burn, icpBlock(t, tx), rules), true)
	wantResult(t, "a burn is not a transfer", Match(mustParse(t, transferBody()), icpBlock(t, tx), rules), false, FieldMethod, FieldTo)

	burnFrom := mustParse(t, transferFromBody().with("args.to", mintingP.Encode(), "args.fee", nil))
	tx = icp.Transaction{Op: icp.OpBurn, From: icpID(t, icrc3.Account{Owner: otherP}), Spender: icpID(t, icrc3.Account{Owner: callerP}),
		Amount: 500, CreatedAtTime: u64p(stamp)}
	wantResult(t, "burn through transfer_from", Match(burnFrom, icpBlock(t, tx), rules), true)
	named := mustParse(t, transferFromBody().with("args.to", mintingP.Encode(), "args.fee", "10"))
	wantResult(t, "a burn charges no fee", Match(named, icpBlock(t, tx), rules), false, FieldFee)
}

func TestMatchICPRefusesAlteredBytes(t *testing.T) {
	in := mustParse(t, transferBody())
	b := icpBlock(t, icpTransfer(t))
	b.Native = append(append([]byte{}, b.Native...), 0x20, 0x00)
	wantResult(t, "altered", Match(in, b, rules), false)
}

// The ICP ledger deduplicates with absent subaccount = zeros and fee left
// empty = fee given, so with arg_hex every match is exact, whatever form
// the sent bytes had.
func TestMatchICPExactIsTheLedgersDedup(t *testing.T) {
	zeroTo := transferArg()
	zeroTo.To.Subaccount = blobp(zeros32())
	for name, in := range map[string]*Intent{
		"plain":   mustParse(t, transferBody().with("arg_hex", candidHex(t, transferArg()))),
		"zero to": mustParse(t, transferBody().with("arg_hex", candidHex(t, zeroTo))),
	} {
		r := Match(in, icpBlock(t, icpTransfer(t)), rules)
		if !r.Match || !r.Exact {
			t.Errorf("%s: %+v", name, r)
		}
	}
}
