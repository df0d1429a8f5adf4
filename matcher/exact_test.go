package matcher

import (
	"testing"

	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// With arg_hex the matcher compares as the ledger deduplicates: an explicit
// all-zero subaccount is not an absent one, and tx.fee is recorded exactly
// when the call set a fee. A block equal only up to normalisation is a near
// miss naming the form that differs.
func TestExactMatchTransferForms(t *testing.T) {
	zeroTo := transferArg()
	zeroTo.To.Subaccount = blobp(zeros32())
	zeroFrom := transferArg()
	zeroFrom.FromSubaccount = blobp(zeros32())
	withFee := transferArg()
	withFee.Fee = idlNatp(10)

	sentPlain := mustParse(t, transferBody().with("arg_hex", candidHex(t, transferArg())))
	sentZeroTo := mustParse(t, transferBody().with("arg_hex", candidHex(t, zeroTo)))
	sentZeroFrom := mustParse(t, transferBody().with("args.from_subaccount", zeroSubHex, "arg_hex", candidHex(t, zeroFrom)))
	sentFee := mustParse(t, transferBody().with("args.fee", "10", "arg_hex", candidHex(t, withFee)))
	normal := mustParse(t, transferBody())

	plain := transferBlock()
	blockZeroTo := transferBlock()
	blockZeroTo.to = acct(toP, zeros32())
	blockZeroFrom := transferBlock()
	blockZeroFrom.from = acct(callerP, zeros32())
	blockFee := transferBlock()
	blockFee.blockFee, blockFee.txFee = nil, natp(10)

	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			b := func(x blk) *icrc3.Block { return s.apply(x, "1xfer", "xfer").block(t) }
			exact := func(in *Intent, x blk) {
				t.Helper()
				r := Match(in, b(x), rules)
				if !r.Match || !r.Exact {
					t.Errorf("exact block: %+v, want an exact match", r)
				}
			}
			exact(sentPlain, plain)
			exact(sentZeroTo, blockZeroTo)
			exact(sentZeroFrom, blockZeroFrom)
			exact(sentFee, blockFee)
			checkResult(t, Match(sentPlain, b(blockZeroTo), rules), false, true, FieldSubaccountForm)
			checkResult(t, Match(sentZeroTo, b(plain), rules), false, true, FieldSubaccountForm)
			checkResult(t, Match(sentPlain, b(blockZeroFrom), rules), false, true, FieldSubaccountForm)
			checkResult(t, Match(sentZeroFrom, b(plain), rules), false, true, FieldSubaccountForm)
			checkResult(t, Match(sentPlain, b(blockFee), rules), false, true, FieldFeeForm)
			checkResult(t, Match(sentFee, b(plain), rules), false, true, FieldFeeForm)
			// Without the sent bytes every form matches, normalised.
			for _, x := range []blk{plain, blockZeroTo, blockZeroFrom, blockFee} {
				if r := Match(normal, b(x), rules); !r.Match || r.Exact {
					t.Errorf("normalised intent: %+v, want a normalised match", r)
				}
			}
		})
	}
}

// Accounts a block does not record and fees ledgers drop have no form to
// compare; the other methods' accounts compare as sent.
func TestExactMatchOtherKinds(t *testing.T) {
	// A mint records only `to`, and no fee.
	mintArg := transferArg()
	mintArg.Fee = idlNatp(0)
	mint := mustParse(t, transferBody().with("caller", mintingP.Encode(), "args.fee", "0", "arg_hex", candidHex(t, mintArg)))
	mb := blk{btype: "1mint", to: acct(toP, nil), amt: natp(150000000), memo: []byte("lunch"), hasMemo: true, createdAt: u64p(stamp)}
	if r := Match(mint, mb.block(t), rules); !r.Match || !r.Exact {
		t.Errorf("mint: %+v, want an exact match", r)
	}
	mb.to = acct(toP, zeros32())
	checkResult(t, Match(mint, mb.block(t), rules), false, true, FieldSubaccountForm)

	// transfer_from: from, to and spender as sent.
	tf := icrc1.TransferFromArgs{From: icrc3.CandidAccount{Owner: otherP, Subaccount: blobp(zeros32())}, To: icrc3.CandidAccount{Owner: toP},
		Amount: idlNat(500), Fee: idlNatp(10), CreatedAtTime: u64p(stamp)}
	tfIn := mustParse(t, transferFromBody().with("arg_hex", candidHex(t, tf)))
	tb := blk{op: "xfer", from: acct(otherP, zeros32()), to: acct(toP, nil), spender: acct(callerP, nil), amt: natp(500), txFee: natp(10), createdAt: u64p(stamp)}
	if r := Match(tfIn, tb.block(t), rules); !r.Match || !r.Exact {
		t.Errorf("transfer_from: %+v, want an exact match", r)
	}
	tb.from = acct(otherP, nil)
	checkResult(t, Match(tfIn, tb.block(t), rules), false, true, FieldSubaccountForm)

	// approve: spender as sent.
	ap := icrc1.ApproveArgs{Spender: icrc3.CandidAccount{Owner: otherP}, Amount: idlNat(1000),
		ExpectedAllowance: idlNatp(0), ExpiresAt: u64p(1791600000000000000), CreatedAtTime: u64p(stamp)}
	apIn := mustParse(t, approveBody().with("arg_hex", candidHex(t, ap)))
	ab := blk{op: "approve", from: acct(callerP, nil), spender: acct(otherP, nil), amt: natp(1000), ea: natp(0),
		expiresAt: u64p(1791600000000000000), blockFee: natp(10), createdAt: u64p(stamp)}
	if r := Match(apIn, ab.block(t), rules); !r.Match || !r.Exact {
		t.Errorf("approve: %+v, want an exact match", r)
	}
	ab.spender = acct(otherP, zeros32())
	checkResult(t, Match(apIn, ab.block(t), rules), false, true, FieldSubaccountForm)
}
