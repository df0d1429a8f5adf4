package matcher

import (
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/reconciled/reconciled/icrc3"
)

// style builds the same logical block the two ways ledgers write it.
type style struct {
	name  string
	apply func(b blk, btype, op string) blk
}

var styles = []style{
	{"btype", func(b blk, btype, _ string) blk { b.btype = btype; return b }},
	{"tx.op", func(b blk, _, op string) blk { b.op = op; return b }},
}

func checkResult(t *testing.T, got Result, match, near bool, differs ...string) {
	t.Helper()
	if got.Match != match || got.NearMiss != near || !slices.Equal(got.Differs, differs) {
		t.Errorf("Match = %+v, want Match=%v NearMiss=%v Differs=%v", got, match, near, differs)
	}
}

// transferBlock is the block a ledger writes for transferBody.
func transferBlock() blk {
	return blk{
		from: acct(callerP, nil), to: acct(toP, nil), amt: natp(150000000),
		blockFee: natp(10), memo: []byte("lunch"), hasMemo: true, createdAt: u64p(stamp),
	}
}

func TestMatchTransferBothStyles(t *testing.T) {
	in := mustParse(t, transferBody())
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			b := s.apply(transferBlock(), "1xfer", "xfer").block(t)
			checkResult(t, Match(in, b, rules), true, false)
			if b.Kind != icrc3.BlockTransfer {
				t.Fatalf("kind %q", b.Kind)
			}
		})
	}
}

func TestMatchMemoAbsentVersusEmpty(t *testing.T) {
	noMemo := mustParse(t, transferBody().with("args.memo", nil))
	emptyMemo := mustParse(t, transferBody().with("args.memo", ""))
	absentBlock := transferBlock()
	absentBlock.hasMemo, absentBlock.memo = false, nil
	emptyBlock := transferBlock()
	emptyBlock.memo = []byte{}
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			ab := s.apply(absentBlock, "1xfer", "xfer").block(t)
			eb := s.apply(emptyBlock, "1xfer", "xfer").block(t)
			checkResult(t, Match(noMemo, ab, rules), true, false)
			checkResult(t, Match(emptyMemo, eb, rules), true, false)
			checkResult(t, Match(noMemo, eb, rules), false, true, FieldMemo)
			checkResult(t, Match(emptyMemo, ab, rules), false, true, FieldMemo)
		})
	}
}

func TestMatchZeroSubaccountEqualsNone(t *testing.T) {
	zeroInIntent := mustParse(t, transferBody().with("args.from_subaccount", zeroSubHex))
	noneInIntent := mustParse(t, transferBody())
	noneBlock := transferBlock()
	zeroBlock := transferBlock()
	zeroBlock.from = acct(callerP, zeros32())
	zeroBlock.to = acct(toP, zeros32())
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			nb := s.apply(noneBlock, "1xfer", "xfer").block(t)
			zb := s.apply(zeroBlock, "1xfer", "xfer").block(t)
			checkResult(t, Match(zeroInIntent, nb, rules), true, false)
			checkResult(t, Match(noneInIntent, zb, rules), true, false)
			checkResult(t, Match(zeroInIntent, zb, rules), true, false)
		})
	}
	// A non-zero subaccount is another account: on the sender side the block
	// is someone else's; on the receiving side it is a near miss.
	otherFrom := transferBlock()
	otherFrom.from = acct(callerP, sub(1))
	checkResult(t, Match(noneInIntent, otherFrom.with("1xfer").block(t), rules), false, false)
	otherTo := transferBlock()
	otherTo.to = acct(toP, sub(1))
	checkResult(t, Match(noneInIntent, otherTo.with("1xfer").block(t), rules), false, true, FieldTo)
	withSub := mustParse(t, transferBody().with("args.from_subaccount", subOneHex))
	checkResult(t, Match(withSub, otherFrom.with("1xfer").block(t), rules), true, false)
}

func (b blk) with(btype string) blk { b.btype = btype; return b }

func TestMatchFee(t *testing.T) {
	noFee := mustParse(t, transferBody())
	fee10 := mustParse(t, transferBody().with("args.fee", "10"))
	fee20 := mustParse(t, transferBody().with("args.fee", "20"))
	topFee := transferBlock() // the ledger's fee at top level: the caller set none
	txFee := transferBlock()  // the caller's fee in tx.fee
	txFee.blockFee, txFee.txFee = nil, natp(10)
	noFeeBlock := transferBlock()
	noFeeBlock.blockFee = nil
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			tb := s.apply(topFee, "1xfer", "xfer").block(t)
			xb := s.apply(txFee, "1xfer", "xfer").block(t)
			nb := s.apply(noFeeBlock, "1xfer", "xfer").block(t)
			checkResult(t, Match(noFee, tb, rules), true, false)
			checkResult(t, Match(noFee, xb, rules), true, false)
			checkResult(t, Match(fee10, tb, rules), true, false)
			checkResult(t, Match(fee10, xb, rules), true, false)
			checkResult(t, Match(fee20, tb, rules), false, true, FieldFee)
			checkResult(t, Match(fee20, xb, rules), false, true, FieldFee)
			// A block that charged nothing agrees only with an explicit 0.
			checkResult(t, Match(fee10, nb, rules), false, true, FieldFee)
			checkResult(t, Match(mustParse(t, transferBody().with("args.fee", "0")), nb, rules), true, false)
		})
	}
}

func TestMatchMint(t *testing.T) {
	// The minting account's owner calls icrc1_transfer: the block records
	// only to, amt, memo and ts.
	body := transferBody().with("caller", mintingP.Encode())
	in := mustParse(t, body)
	if k := in.ExpectedKind(rules); k != icrc3.BlockMint {
		t.Fatalf("ExpectedKind = %q, want 1mint", k)
	}
	mint := blk{to: acct(toP, nil), amt: natp(150000000), memo: []byte("lunch"), hasMemo: true, createdAt: u64p(stamp)}
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			b := s.apply(mint, "1mint", "mint").block(t)
			checkResult(t, Match(in, b, rules), true, false)
			// Mint charges no fee: only an explicit 0 agrees.
			checkResult(t, Match(mustParse(t, body.with("args.fee", "0")), b, rules), true, false)
			checkResult(t, Match(mustParse(t, body.with("args.fee", "10")), b, rules), false, true, FieldFee)
			checkResult(t, Match(mustParse(t, body.with("args.amount", "1")), b, rules), false, true, FieldAmount)
			// Without the minting account nothing says the sender minted.
			checkResult(t, Match(in, b, LedgerRules{}), false, false)
			// A mint to someone else is not this intent, not even nearly.
			other := mint
			other.to = acct(otherP, nil)
			checkResult(t, Match(in, s.apply(other, "1mint", "mint").block(t), rules), false, false)
		})
	}
}

func TestMatchBurnViaTransfer(t *testing.T) {
	in := mustParse(t, transferBody().with("args.to", mintingP.Encode()))
	if k := in.ExpectedKind(rules); k != icrc3.BlockBurn {
		t.Fatalf("ExpectedKind = %q, want 1burn", k)
	}
	burn := blk{from: acct(callerP, nil), amt: natp(150000000), memo: []byte("lunch"), hasMemo: true, createdAt: u64p(stamp)}
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			checkResult(t, Match(in, s.apply(burn, "1burn", "burn").block(t), rules), true, false)
			// The same burn made through transfer_from records a spender.
			viaTF := burn
			viaTF.spender = acct(callerP, nil)
			checkResult(t, Match(in, s.apply(viaTF, "1burn", "burn").block(t), rules), false, true, FieldMethod)
		})
	}
}

func TestMatchBurnViaTransferFrom(t *testing.T) {
	in := mustParse(t, transferFromBody().with("args.to", mintingP.Encode(), "args.fee", nil))
	if k := in.ExpectedKind(rules); k != icrc3.BlockBurn {
		t.Fatalf("ExpectedKind = %q, want 1burn", k)
	}
	burn := blk{from: acct(otherP, nil), spender: acct(callerP, nil), amt: natp(500), createdAt: u64p(stamp)}
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			checkResult(t, Match(in, s.apply(burn, "1burn", "burn").block(t), rules), true, false)
			noSpender := burn
			noSpender.spender = nil
			checkResult(t, Match(in, s.apply(noSpender, "1burn", "burn").block(t), rules), false, false)
			otherFrom := burn
			otherFrom.from = acct(toP, nil)
			checkResult(t, Match(in, s.apply(otherFrom, "1burn", "burn").block(t), rules), false, true, FieldFrom)
		})
	}
}

func transferFromBlock() blk {
	return blk{
		from: acct(otherP, nil), to: acct(toP, nil), spender: acct(callerP, nil),
		amt: natp(500), txFee: natp(10), createdAt: u64p(stamp),
	}
}

func TestMatchTransferFrom(t *testing.T) {
	in := mustParse(t, transferFromBody())
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			b := s.apply(transferFromBlock(), "2xfer", "xfer").block(t)
			if b.Kind != icrc3.BlockTransferFrom {
				t.Fatalf("kind %q", b.Kind)
			}
			checkResult(t, Match(in, b, rules), true, false)
			amt := transferFromBlock()
			amt.amt = natp(501)
			checkResult(t, Match(in, s.apply(amt, "2xfer", "xfer").block(t), rules), false, true, FieldAmount)
			// Another spender moving the same tokens is someone else's call.
			spender := transferFromBlock()
			spender.spender = acct(callerP, sub(3))
			checkResult(t, Match(in, s.apply(spender, "2xfer", "xfer").block(t), rules), false, false)
		})
	}
	// An icrc1_transfer records no spender, so it is not even near a
	// transfer_from, whose caller-side account is the spender.
	plain := transferFromBlock()
	plain.spender = nil
	plain.from = acct(callerP, nil)
	selfTF := mustParse(t, transferFromBody().with("args.from", callerText))
	checkResult(t, Match(selfTF, plain.with("1xfer").block(t), rules), false, false)
}

// Spec-style 2xfer blocks may omit the spender when it is the source account.
func TestMatchTransferFromOmittedSpender(t *testing.T) {
	b := transferFromBlock()
	b.spender = nil
	b.from = acct(callerP, nil)
	self := mustParse(t, transferFromBody().with("args.from", callerText))
	checkResult(t, Match(self, b.with("2xfer").block(t), rules), true, false)
	// Read as spender = from = caller, which is not the intent's source.
	checkResult(t, Match(mustParse(t, transferFromBody()), b.with("2xfer").block(t), rules), false, true, FieldFrom)
}

func approveBlock() blk {
	return blk{
		from: acct(callerP, nil), spender: acct(otherP, nil), amt: natp(1000),
		ea: natp(0), expiresAt: u64p(1791600000000000000), blockFee: natp(10), createdAt: u64p(stamp),
	}
}

func TestMatchApprove(t *testing.T) {
	in := mustParse(t, approveBody())
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			mk := func(b blk) *icrc3.Block { return s.apply(b, "2approve", "approve").block(t) }
			checkResult(t, Match(in, mk(approveBlock()), rules), true, false)
			noEA := approveBlock()
			noEA.ea = nil
			checkResult(t, Match(in, mk(noEA), rules), false, true, FieldExpectedAllowance)
			exp := approveBlock()
			exp.expiresAt = u64p(1)
			checkResult(t, Match(in, mk(exp), rules), false, true, FieldExpiresAt)
			noExp := approveBlock()
			noExp.expiresAt = nil
			checkResult(t, Match(in, mk(noExp), rules), false, true, FieldExpiresAt)
			sp := approveBlock()
			sp.spender = acct(toP, nil)
			checkResult(t, Match(in, mk(sp), rules), false, true, FieldSpender)
			bare := mustParse(t, approveBody().with("args.expected_allowance", nil, "args.expires_at", nil))
			checkResult(t, Match(bare, mk(noExp), rules), false, true, FieldExpectedAllowance)
			noExp.ea = nil
			checkResult(t, Match(bare, mk(noExp), rules), true, false)
		})
	}
}

// The ledger clamps an approve above the token maximum to that maximum; the
// clamped block is the record of the call.
func TestMatchApproveClamp(t *testing.T) {
	huge := new(big.Int).Lsh(big.NewInt(1), 70).String()
	in := mustParse(t, approveBody().with("args.amount", huge))
	clamped := approveBlock()
	clamped.amt = natp(math.MaxUint64)
	checkResult(t, Match(in, clamped.with("2approve").block(t), rules), true, false)
	max256, _ := icrc3.NatFromBig(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)))
	above256 := new(big.Int).Lsh(big.NewInt(1), 300).String()
	clamped.amt = &max256
	checkResult(t, Match(mustParse(t, approveBody().with("args.amount", above256)), clamped.with("2approve").block(t), rules), true, false)
	// A smaller intent amount is never clamped up.
	clamped.amt = natp(math.MaxUint64)
	small := mustParse(t, approveBody().with("args.amount", "5"))
	checkResult(t, Match(small, clamped.with("2approve").block(t), rules), false, true, FieldAmount)
	// Clamping applies to approve only.
	tb := transferBlock()
	tb.amt = natp(math.MaxUint64)
	checkResult(t, Match(mustParse(t, transferBody().with("args.amount", huge)), tb.with("1xfer").block(t), rules), false, true, FieldAmount)
}

func TestMatchUnknownKindNeverMatches(t *testing.T) {
	in := mustParse(t, transferBody())
	for _, s := range styles {
		b := s.apply(transferBlock(), "107set_fee_collector", "107set_fee_collector").block(t)
		if b.Kind != icrc3.BlockUnknown {
			t.Fatalf("kind %q", b.Kind)
		}
		checkResult(t, Match(in, b, rules), false, false)
	}
	checkResult(t, Match(in, nil, rules), false, false)
}

func TestMatchTwoBlocksSameStamp(t *testing.T) {
	in := mustParse(t, transferBody())
	other := transferBlock()
	other.amt = natp(149999999)
	blocks := []*icrc3.Block{other.with("1xfer").block(t), transferBlock().with("1xfer").block(t)}
	var matches, near int
	for _, b := range blocks {
		r := Match(in, b, rules)
		if r.Match {
			matches++
		}
		if r.NearMiss {
			near++
			if !slices.Equal(r.Differs, []string{FieldAmount}) {
				t.Errorf("near miss differs %v", r.Differs)
			}
		}
	}
	if matches != 1 || near != 1 {
		t.Errorf("matches=%d near=%d, want 1 and 1", matches, near)
	}
}

func TestMatchNeedsSameStamp(t *testing.T) {
	in := mustParse(t, transferBody())
	b := transferBlock()
	b.createdAt = u64p(stamp + 1)
	checkResult(t, Match(in, b.with("1xfer").block(t), rules), false, false)
	b.createdAt = nil
	checkResult(t, Match(in, b.with("1xfer").block(t), rules), false, false)
}

func TestMatchFamiliesDoNotMix(t *testing.T) {
	// Same stamp, same sender, but an approve is not a near miss of a
	// transfer, nor the reverse.
	checkResult(t, Match(mustParse(t, transferBody()), approveBlock().with("2approve").block(t), rules), false, false)
	checkResult(t, Match(mustParse(t, approveBody()), transferBlock().with("1xfer").block(t), rules), false, false)
	// An icrc1_transfer against a transfer_from that debited the caller's
	// account with the same stamp: same family, another method.
	tf := transferBlock()
	tf.spender = acct(otherP, nil)
	checkResult(t, Match(mustParse(t, transferBody()), tf.with("2xfer").block(t), rules), false, true, FieldMethod)
}

func TestMatchReportsEveryDifference(t *testing.T) {
	in := mustParse(t, transferBody().with("args.fee", "10"))
	b := transferBlock()
	b.to = acct(otherP, nil)
	b.amt = natp(1)
	b.blockFee = natp(11)
	b.memo = []byte("dinner")
	checkResult(t, Match(in, b.with("1xfer").block(t), rules), false, true, FieldTo, FieldAmount, FieldFee, FieldMemo)
}
