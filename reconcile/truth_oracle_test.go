package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/aviate-labs/agent-go/candid/idl"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
)

// The truth test's oracle: what docs/design.md#statuses allows as a verdict for a
// scenario, given the executions the ledger itself recorded.

// checkBad decides the malformed twins: every one must be invalid with
// E_BAD_EXPIRY, refused by the parser (expiry 0) or by the engine.
func (w *world) checkBad() {
	if len(w.bad) == 0 {
		return
	}
	var ins []*matcher.Intent
	var at []badIntent
	for _, b := range w.bad {
		in, err := matcher.ParseIntent(b.raw)
		if err != nil {
			var me *matcher.Error
			if !errors.As(err, &me) || me.Code != matcher.CodeBadExpiry {
				w.badProblem(b, fmt.Sprintf("refused by the parser with %v, want %s", err, matcher.CodeBadExpiry))
				continue
			}
			w.tally.count(reconciled.StatusInvalid)
			w.tally.underAdv("intent:bad_expiry", true)
			w.tally.finals++
			continue
		}
		ins, at = append(ins, in), append(at, b)
	}
	if len(ins) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	vs, err := w.newEngine().DecideMany(ctx, ins)
	if err != nil {
		w.t.Fatalf("%s: malformed intents: %v", w.cfg, err)
	}
	for i, v := range vs {
		w.tally.count(v.Status)
		w.tally.underAdv("intent:bad_expiry", v.Final)
		if v.Status != reconciled.StatusInvalid || !v.Final || v.Reason == nil || v.Reason.Code != matcher.CodeBadExpiry {
			vj, _ := json.Marshal(v)
			w.badProblem(at[i], fmt.Sprintf("verdict %s, want invalid %s", vj, matcher.CodeBadExpiry))
			continue
		}
		w.tally.finals++
	}
}

func (w *world) badProblem(b badIntent, p string) {
	w.tally.wrong++
	w.problems = append(w.problems, fmt.Sprintf("malformed twin of %s\n  body: %s\n  %s", w.scens[b.scen], b.raw, p))
}

func (w *world) describeMatches(s *scenario, execs []ledgertest.Execution) string {
	var out []string
	for _, e := range w.matching(s, execs) {
		out = append(out, fmt.Sprintf("block %d at %d", e.Index, e.Time))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// check says what is wrong with verdict v of s, or "".
func (w *world) check(s *scenario, v reconciled.Verdict, execs []ledgertest.Execution, after uint64, f *activeFault) string {
	stamp := s.intent.stamp()
	from, to := stamp-uint64(2*time.Minute), stamp+uint64(24*time.Hour+2*time.Minute)
	if v.IntentID != w.ins[s.idx].ID {
		return fmt.Sprintf("verdict for %q", v.IntentID)
	}
	// A ledger that cannot even be detected gives no rules to compute the
	// window with; any other verdict carries it.
	if v.Window == nil && v.Status == reconciled.StatusUnreadable {
		return w.checkUnreadable(v, f)
	}
	if f != nil && f.kind == faultNarrow && v.Status != reconciled.StatusUnreadable {
		return fmt.Sprintf("%s decided on a configured window narrower than the ledger's", v.Status)
	}
	if v.Window == nil || uint64(v.Window.FromTS) != from || uint64(v.Window.ToTS) != to {
		return fmt.Sprintf("window %+v, want [%d, %d]", v.Window, from, to)
	}
	if p := w.checkWindowBlocks(v, from, to); p != "" {
		return p
	}
	matches := w.matching(s, execs)
	var ct uint64
	if v.Evidence != nil && v.Evidence.CertifiedTime != nil {
		ct = uint64(*v.Evidence.CertifiedTime)
	}
	if v.Status != reconciled.StatusUnreadable && v.Status != reconciled.StatusInvalid {
		if ct == 0 || ct > after {
			return fmt.Sprintf("certified time %d is missing or after the ledger's clock %d", ct, after)
		}
	}
	switch v.Status {
	case reconciled.StatusFound:
		if !v.Final || v.Block == nil {
			return "found without a block or not final"
		}
		for _, e := range matches {
			if e.Index == uint64(v.Block.Index) {
				return ""
			}
		}
		return fmt.Sprintf("found block %d, which is no execution of the intent", v.Block.Index)
	case reconciled.StatusAbsent:
		switch {
		case !v.Final:
			return "absent but not final"
		case len(matches) > 0:
			return "absent, but the ledger executed the intent"
		case ct <= to:
			return fmt.Sprintf("absent while the window was open (certified time %d <= to %d)", ct, to)
		}
		return ""
	case reconciled.StatusNotYet:
		if v.Final {
			return "not_yet marked final"
		}
		if ct > to {
			return fmt.Sprintf("not_yet after the window closed (certified time %d > to %d)", ct, to)
		}
		for _, e := range matches {
			if f != nil && f.kind == faultLag && e.Index >= f.visible {
				continue // the lagging replica's tip does not reach it yet
			}
			return fmt.Sprintf("not_yet, but block %d below the certified tip executes the intent", e.Index)
		}
		return ""
	case reconciled.StatusUnreadable:
		return w.checkUnreadable(v, f)
	}
	return fmt.Sprintf("status %q for a valid intent", v.Status)
}

// checkWindowBlocks says what is wrong with the window's first and last
// blocks that v names, or "": the first block of the ledger at or after
// from, and the last at or before to that the decision's certified tip
// reaches. Blocks without a timestamp are in no window.
func (w *world) checkWindowBlocks(v reconciled.Verdict, from, to uint64) string {
	fb, lb := v.Window.FirstBlock, v.Window.LastBlock
	if (fb == nil) != (lb == nil) {
		return fmt.Sprintf("window blocks %v..%v: one of them missing", fb, lb)
	}
	if fb == nil || w.cfg.icp || v.Evidence == nil || v.Evidence.TipIndex == nil {
		return ""
	}
	tsAt := func(i uint64) uint64 {
		b, ok := w.l.Block(i)
		if !ok {
			return 0
		}
		return ts(b)
	}
	f, l, tip := uint64(*fb), uint64(*lb), uint64(*v.Evidence.TipIndex)
	if f > l || l > tip {
		return fmt.Sprintf("window blocks %d..%d, certified tip %d", f, l, tip)
	}
	if t := tsAt(f); t == 0 || t < from {
		return fmt.Sprintf("window's first block %d has ts %d, before the window's start %d", f, t, from)
	}
	if t := tsAt(l); t == 0 || t > to {
		return fmt.Sprintf("window's last block %d has ts %d, after the window's end %d", l, t, to)
	}
	for i := f; i > 0; i-- {
		if t := tsAt(i - 1); t != 0 {
			if t >= from {
				return fmt.Sprintf("window's first block %d, but block %d has ts %d >= %d", f, i-1, t, from)
			}
			break
		}
	}
	for i := l + 1; i <= tip; i++ {
		if t := tsAt(i); t != 0 {
			if t <= to {
				return fmt.Sprintf("window's last block %d, but block %d below the tip has ts %d <= %d", l, i, t, to)
			}
			break
		}
	}
	return ""
}

func (w *world) checkUnreadable(v reconciled.Verdict, f *activeFault) string {
	if f == nil {
		return fmt.Sprintf("unreadable without a fault: %+v", v.Reason)
	}
	if f.kind == faultNarrow && (v.Reason == nil || v.Reason.Code != "E_LEDGER_CONFIG") {
		return fmt.Sprintf("unreadable under a narrow configured window with %+v, want E_LEDGER_CONFIG", v.Reason)
	}
	if v.Reason == nil || v.Reason.Code == "" {
		return "unreadable without a reason"
	}
	return ""
}

// matching returns the executions that are the intent's call by docs/design.md#matching.
// It reads the ledger's record of calls, never blocks and never the
// matcher: the same caller and method, the same arguments with an absent
// subaccount equal to the all-zero one, and the fee compared only when the
// intent set one (against what the ledger charged).
func (w *world) matching(s *scenario, execs []ledgertest.Execution) []ledgertest.Execution {
	var out []ledgertest.Execution
	for _, e := range execs {
		if w.sameCall(s.intent, e) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

func (w *world) sameCall(in call, e ledgertest.Execution) bool {
	if e.Method != in.method || !bytes.Equal(e.Caller.Raw, in.caller.Raw) {
		return false
	}
	switch a := e.Arg.(type) {
	case icrc1.TransferArg:
		b := in.xfer
		fromSide := icrc3.Account{Owner: in.caller, Subaccount: deref(b.FromSubaccount)}
		feeless := candidToAcct(b.To).Equal(w.mint) || fromSide.Equal(w.mint)
		return sameSub(a.FromSubaccount, b.FromSubaccount) && sameAcct(a.To, b.To) && natEq(a.Amount, b.Amount) &&
			memoEq(a.Memo, b.Memo) && u64Eq(a.CreatedAtTime, b.CreatedAtTime) && w.feeOK(b.Fee, feeless)
	case icrc1.ApproveArgs:
		b := in.appr
		return sameSub(a.FromSubaccount, b.FromSubaccount) && sameAcct(a.Spender, b.Spender) && natEq(a.Amount, b.Amount) &&
			optNatEq(a.ExpectedAllowance, b.ExpectedAllowance) && u64Eq(a.ExpiresAt, b.ExpiresAt) &&
			memoEq(a.Memo, b.Memo) && u64Eq(a.CreatedAtTime, b.CreatedAtTime) && w.feeOK(b.Fee, false)
	case icrc1.TransferFromArgs:
		b := in.tf
		feeless := candidToAcct(b.To).Equal(w.mint)
		return sameSub(a.SpenderSubaccount, b.SpenderSubaccount) && sameAcct(a.From, b.From) && sameAcct(a.To, b.To) &&
			natEq(a.Amount, b.Amount) && memoEq(a.Memo, b.Memo) && u64Eq(a.CreatedAtTime, b.CreatedAtTime) && w.feeOK(b.Fee, feeless)
	}
	return false
}

// feeOK: an intent's fee, when set, must be what the ledger charged — its
// fee for transfers and approves, nothing for mints and burns.
func (w *world) feeOK(fee *idl.Nat, feeless bool) bool {
	if fee == nil {
		return true
	}
	want := new(big.Int).SetUint64(w.fee)
	if feeless {
		want.SetUint64(0)
	}
	return fee.BigInt().Cmp(want) == 0
}

func deref(p *[]byte) []byte {
	if p == nil {
		return nil
	}
	return *p
}

func candidToAcct(c icrc3.CandidAccount) icrc3.Account {
	return icrc3.Account{Owner: c.Owner, Subaccount: deref(c.Subaccount)}
}

// sameSub: ICRC-1 subaccount equality (none equals 32 zero bytes).
func sameSub(a, b *[]byte) bool {
	norm := func(p *[]byte) []byte {
		if p == nil {
			return make([]byte, 32)
		}
		return *p
	}
	return bytes.Equal(norm(a), norm(b))
}

func sameAcct(a, b icrc3.CandidAccount) bool {
	return bytes.Equal(a.Owner.Raw, b.Owner.Raw) && sameSub(a.Subaccount, b.Subaccount)
}

func natEq(a, b idl.Nat) bool {
	x, y := a.BigInt(), b.BigInt()
	if x == nil {
		x = new(big.Int)
	}
	if y == nil {
		y = new(big.Int)
	}
	return x.Cmp(y) == 0
}

func optNatEq(a, b *idl.Nat) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return natEq(*a, *b)
}

// memoEq: an absent memo differs from an empty one.
func memoEq(a, b *[]byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return bytes.Equal(*a, *b)
}

func u64Eq(a, b *uint64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
