package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/ledgertest"
)

// The windows a case closes: TW + D of the daemon's defaults (24 h + 2 min)
// plus a margin.
const closeWindow = 24*time.Hour + 5*time.Minute

// outcome is an acceptable verdict under a fault: a status and, for
// unreadable, the reason code.
type outcome struct {
	status reconciled.Status
	code   string
}

func unreadable(code string) outcome { return outcome{reconciled.StatusUnreadable, code} }

var notYet = outcome{status: reconciled.StatusNotYet}

func (o outcome) String() string {
	if o.code == "" {
		return string(o.status)
	}
	return string(o.status) + "/" + o.code
}

func outcomeOf(v reconciled.Verdict) outcome {
	o := outcome{status: v.Status}
	if v.Reason != nil && v.Status == reconciled.StatusUnreadable {
		o.code = v.Reason.Code
	}
	return o
}

// scenario is the truth of a case: whether the payment executed, where its
// block is, and whether its window is closed in certified time.
type scenario struct {
	executed bool
	index    uint64 // the payment's block (executed only)
	ledger   *ledgertest.Ledger
	p        payment
}

// setUp builds a ledger whose history has archives: the payment (when
// executed) is one of the first blocks, so it ends up archived, then
// generated history an hour later pushes it down; closed advances the
// clock past the payment's window.
func setUp(r *rig, cfg ledgertest.LedgerConfig, executed, closed bool, seed int64) scenario {
	r.t.Helper()
	l := r.archivedLedger(cfg)
	s := scenario{executed: executed, ledger: l,
		p: payment{stamp: r.srv.Now(), amount: 1000 + uint64(seed), memo: fmt.Sprint("fault-", seed)}}
	if executed {
		idx, err := l.Transfer(payer, s.p.arg())
		if err != nil {
			r.t.Fatal(err)
		}
		s.index = idx
	}
	r.srv.Advance(time.Hour)
	if err := l.GenerateHistory(900, seed, 30*time.Minute); err != nil {
		r.t.Fatal(err)
	}
	if len(l.Archives()) < 2 {
		r.t.Fatalf("history has %d archives, want several", len(l.Archives()))
	}
	if closed {
		r.srv.Advance(closeWindow)
	}
	return s
}

// checkFinal checks that v is the truth of the scenario: found at the
// payment's block, or absent when it never executed.
func (s scenario) checkFinal(t *testing.T, v reconciled.Verdict) {
	t.Helper()
	if !v.Final {
		t.Fatalf("not final: %+v", v)
	}
	if !s.executed {
		if v.Status != reconciled.StatusAbsent {
			t.Fatalf("final verdict %s, want absent (the payment never executed)", outcomeOf(v))
		}
		return
	}
	if v.Status != reconciled.StatusFound || v.Block == nil || uint64(v.Block.Index) != s.index {
		t.Fatalf("final verdict %s block %+v, want found at %d", outcomeOf(v), v.Block, s.index)
	}
	if v.Evidence == nil || v.Evidence.Verified != "certificate+chain" {
		t.Fatalf("found without certificate+chain evidence: %+v", v.Evidence)
	}
}

// holder is the archive that serves block i.
func holder(t *testing.T, l *ledgertest.Ledger, i uint64) ledgertest.ArchiveInfo {
	t.Helper()
	for _, a := range l.Archives() {
		if a.Start <= i && i <= a.End {
			return a
		}
	}
	t.Fatalf("block %d is in no archive: %+v", i, l.Archives())
	return ledgertest.ArchiveInfo{}
}

// faultCase is one row of the matrix.
type faultCase struct {
	name string
	cfg  ledgertest.LedgerConfig
	// executed and closed choose the scenario: an executed payment behind
	// a closed window is where a missed block would read as "absent".
	executed, closed bool
	// apply sets the fault (on the ledger or one of its archives).
	apply func(r *rig, s scenario)
	// want lists the acceptable verdicts under the fault; a final one is
	// acceptable only when it is the truth.
	want []outcome
}

func onLedger(f ledgertest.Faults) func(*rig, scenario) {
	return func(r *rig, s scenario) { r.srv.SetFaults(s.ledger.ID(), f) }
}

func onHolder(f func(idx uint64) ledgertest.Faults) func(*rig, scenario) {
	return func(r *rig, s scenario) {
		r.srv.SetFaults(holder(r.t, s.ledger, s.index).ID, f(s.index))
	}
}

func onArchives(f ledgertest.Faults) func(*rig, scenario) {
	return func(r *rig, s scenario) {
		for _, a := range s.ledger.Archives() {
			r.srv.SetFaults(a.ID, f)
		}
	}
}

func lift(r *rig, s scenario) {
	r.srv.SetFaults(s.ledger.ID(), ledgertest.Faults{})
	for _, a := range s.ledger.Archives() {
		r.srv.SetFaults(a.ID, ledgertest.Faults{})
	}
}

func faultMatrix() []faultCase {
	found := outcome{status: reconciled.StatusFound}
	cases := []faultCase{
		{name: "http-500", executed: true, closed: true, apply: onLedger(ledgertest.Faults{HTTPStatus: 500}), want: []outcome{unreadable("E_TRANSPORT")}},
		{name: "http-503", executed: true, closed: true, apply: onLedger(ledgertest.Faults{HTTPStatus: 503}), want: []outcome{unreadable("E_TRANSPORT")}},
		{name: "archive-http-502", executed: true, closed: true, apply: onArchives(ledgertest.Faults{HTTPStatus: 502}), want: []outcome{unreadable("E_ARCHIVE_UNREACHABLE")}},
		{name: "garbage-truncated", executed: true, closed: true, apply: onLedger(ledgertest.Faults{Garbage: "truncated"}), want: []outcome{unreadable("E_DECODE")}},
		{name: "garbage-cbor", executed: true, closed: true, apply: onLedger(ledgertest.Faults{Garbage: "cbor"}), want: []outcome{unreadable("E_DECODE")}},
		{name: "garbage-candid", executed: true, closed: true, apply: onLedger(ledgertest.Faults{Garbage: "candid"}), want: []outcome{unreadable("E_DECODE")}},
		{name: "archive-garbage-candid", executed: true, closed: true, apply: onArchives(ledgertest.Faults{Garbage: "candid"}), want: []outcome{unreadable("E_DECODE")}},
		{name: "archive-unreachable", executed: true, closed: true, apply: onArchives(ledgertest.Faults{Unreachable: true}), want: []outcome{unreadable("E_ARCHIVE_UNREACHABLE")}},
		{name: "archive-unreachable-absent", executed: false, closed: true, apply: onArchives(ledgertest.Faults{Unreachable: true}), want: []outcome{unreadable("E_ARCHIVE_UNREACHABLE")}},
		{name: "omit-block", executed: true, closed: true, apply: onHolder(func(i uint64) ledgertest.Faults { return ledgertest.Faults{OmitBlock: i + 1} }), want: []outcome{unreadable("E_CHAIN")}},
		{name: "alter-block", executed: true, closed: true, apply: onHolder(func(i uint64) ledgertest.Faults { return ledgertest.Faults{AlterBlock: i + 1} }), want: []outcome{unreadable("E_CHAIN")}},
		{name: "alter-block-open-window", executed: true, closed: false, apply: onHolder(func(i uint64) ledgertest.Faults { return ledgertest.Faults{AlterBlock: i + 1} }), want: []outcome{unreadable("E_CHAIN")}},
		{name: "wrong-key", executed: true, closed: true, apply: onLedger(ledgertest.Faults{WrongKey: true}), want: []outcome{unreadable("E_CERTIFICATE")}},
		{name: "wrong-key-absent", executed: false, closed: true, apply: onLedger(ledgertest.Faults{WrongKey: true}), want: []outcome{unreadable("E_CERTIFICATE")}},
		{name: "foreign-certificate", executed: true, closed: true, apply: onLedger(ledgertest.Faults{ForeignCertificate: true}), want: []outcome{unreadable("E_CERTIFICATE")}},
		{name: "foreign-certificate-absent", executed: false, closed: true, apply: onLedger(ledgertest.Faults{ForeignCertificate: true}), want: []outcome{unreadable("E_CERTIFICATE")}},
		{name: "stale-certificate", executed: false, closed: true, apply: staleBy(10 * time.Minute), want: []outcome{unreadable("E_STALE_CERTIFICATE")}},
		// Certified time behind the ledger's: the window still looks open
		// (certified time decides), so the answer may only be not_yet or
		// unreadable — never absent.
		{name: "time-backwards-absent", executed: false, closed: true, apply: onLedger(ledgertest.Faults{TimeBackwards: 2 * time.Hour}), want: []outcome{notYet, unreadable("E_CHAIN")}},
		{name: "time-backwards-found", executed: true, closed: true, apply: onLedger(ledgertest.Faults{TimeBackwards: 2 * time.Hour}), want: []outcome{found, unreadable("E_CHAIN")}},
		// Legacy tip layout: not a fault; decided like any other.
		{name: "legacy-tip-found", cfg: ledgertest.LedgerConfig{TipFormat: ledgertest.TipLegacy}, executed: true, closed: true, apply: onLedger(ledgertest.Faults{}), want: []outcome{found}},
		{name: "legacy-tip-absent", cfg: ledgertest.LedgerConfig{TipFormat: ledgertest.TipLegacy}, executed: false, closed: true, apply: onLedger(ledgertest.Faults{}), want: []outcome{{status: reconciled.StatusAbsent}}},
		{name: "legacy-tip-icrc3-only", cfg: ledgertest.LedgerConfig{TipFormat: ledgertest.TipLegacy, DisableLegacy: true}, executed: true, closed: true, apply: onLedger(ledgertest.Faults{}), want: []outcome{found}},
	}
	for code := uint64(1); code <= 5; code++ {
		cases = append(cases, faultCase{name: fmt.Sprint("reject-", code), executed: true, closed: true,
			apply: onLedger(ledgertest.Faults{QueryReject: code}), want: []outcome{unreadable("E_REJECT")}})
	}
	cases = append(cases, faultCase{name: "archive-reject-5", executed: true, closed: true,
		apply: onArchives(ledgertest.Faults{QueryReject: 5}), want: []outcome{unreadable("E_ARCHIVE_UNREACHABLE"), unreadable("E_REJECT")}})
	return cases
}

// staleBy makes certificates carry a /time age older than the wall clock
// (the test clock has been advanced, so the fault must undo that first).
func staleBy(age time.Duration) func(*rig, scenario) {
	return func(r *rig, s scenario) {
		ahead := time.Duration(r.srv.Now() - uint64(time.Now().UnixNano()))
		r.srv.SetFaults(s.ledger.ID(), ledgertest.Faults{StaleTime: ahead + age})
	}
}

// Every fault ends in unreadable with its reason code (or in the truth),
// never in a false found or absent, and the truth follows once the fault
// is lifted. Each case is published through NATS and answered on the
// verdict stream.
func TestFaultMatrix(t *testing.T) {
	r := newRig(t, rigOpts{})
	for i, c := range faultMatrix() {
		t.Run(c.name, func(t *testing.T) {
			parent := r.t
			r.t = t
			defer func() { r.t = parent }()
			s := setUp(r, c.cfg, c.executed, c.closed, int64(100+i))
			c.apply(r, s)
			id := "fault-" + c.name
			r.publish(s.ledger.ID().Encode(), id, jsonOf(s.p.intent(id, s.ledger.ID())))
			first := r.wait(id, verdictAny)
			got := outcomeOf(first)
			ok := false
			for _, w := range c.want {
				ok = ok || w == got
			}
			if !ok {
				reason := ""
				if first.Reason != nil {
					reason = first.Reason.Message
				}
				t.Fatalf("under the fault: %s (%s), want one of %v", got, reason, c.want)
			}
			t.Logf("under the fault: %s", got)
			if first.Final {
				s.checkFinal(t, first) // a final verdict under a fault must still be the truth
				return
			}
			lift(r, s)
			s.checkFinal(t, r.settle(id, verdictFinal))
			vs, err := r.st.Verdicts(r.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range vs {
				if v.Seq != uint64(k+1) || (v.Final && k != len(vs)-1) {
					t.Fatalf("verdict history out of order: %+v", vs)
				}
			}
		})
	}
}

// A query that outlasts the client's HTTP timeout is a transport failure,
// not a verdict; the intent is decided once replies come in time again.
func TestFaultQueryTimeout(t *testing.T) {
	r := newRig(t, rigOpts{QueryTimeout: time.Second})
	s := setUp(r, ledgertest.LedgerConfig{}, true, true, 7)
	r.srv.SetFaults(s.ledger.ID(), ledgertest.Faults{Latency: 3 * time.Second})
	id := "fault-timeout"
	r.publish(s.ledger.ID().Encode(), id, jsonOf(s.p.intent(id, s.ledger.ID())))
	v := r.wait(id, verdictAny)
	if got := outcomeOf(v); got != unreadable("E_TRANSPORT") {
		t.Fatalf("under latency: %s (%+v), want unreadable/E_TRANSPORT", got, v.Reason)
	}
	if !strings.Contains(v.Reason.Message, "Timeout") && !strings.Contains(v.Reason.Message, "deadline") {
		t.Fatalf("the reason does not name the timeout: %s", v.Reason.Message)
	}
	lift(r, s)
	s.checkFinal(t, r.settle(id, verdictFinal))
}

// A lagging replica answers from an older state. Once the daemon has seen
// the longer chain, a shorter one must not make a payment among the
// newest blocks look absent.
func TestFaultLaggingReplica(t *testing.T) {
	r := newRig(t, rigOpts{})
	l := r.archivedLedger(ledgertest.LedgerConfig{})
	if err := l.GenerateHistory(600, 5, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	p := payment{stamp: r.srv.Now(), amount: 77, memo: "lag"}
	idx, err := l.Transfer(payer, p.arg())
	if err != nil {
		t.Fatal(err)
	}
	for k := range 5 { // a few newer blocks after the payment
		q := payment{stamp: r.srv.Now(), amount: uint64(200 + k), memo: "after"}
		if _, err := l.Transfer(payer, q.arg()); err != nil {
			t.Fatal(err)
		}
	}
	// An unrelated intent makes the daemon read the certified tip.
	warm := payment{stamp: r.srv.Now(), amount: 5, memo: "warm"}
	r.publish(l.ID().Encode(), "lag-warm", jsonOf(warm.intent("lag-warm", l.ID())))
	if v := r.wait("lag-warm", verdictAny); v.Status != reconciled.StatusNotYet {
		t.Fatalf("warm-up: %s", outcomeOf(v))
	}
	r.srv.Advance(closeWindow)
	r.srv.SetFaults(l.ID(), ledgertest.Faults{LagBlocks: 10})
	r.publish(l.ID().Encode(), "lag-pay", jsonOf(p.intent("lag-pay", l.ID())))
	v := r.wait("lag-pay", verdictAny)
	t.Logf("behind a lagging replica: %s", outcomeOf(v))
	switch got := outcomeOf(v); {
	case got.status == reconciled.StatusFound:
		if uint64(v.Block.Index) != idx {
			t.Fatalf("found at %d, want %d", v.Block.Index, idx)
		}
		return
	case got == unreadable("E_LAGGING"):
	default:
		t.Fatalf("behind a lagging replica: %s (%+v), want found at %d or unreadable/E_LAGGING", got, v.Reason, idx)
	}
	r.srv.SetFaults(l.ID(), ledgertest.Faults{})
	v = r.settle("lag-pay", verdictFinal)
	if v.Status != reconciled.StatusFound || uint64(v.Block.Index) != idx {
		t.Fatalf("after the lag: %s %+v, want found at %d", outcomeOf(v), v.Block, idx)
	}
}

// chaosFault is one fault of the randomised schedule, applied to the ledger
// or to one of its archives.
type chaosFault struct {
	name  string
	build func(r *rig, l *ledgertest.Ledger, executed []uint64, rng *rand.Rand) (target principal.Principal, f ledgertest.Faults)
}

func chaosFaults() []chaosFault {
	onL := func(f ledgertest.Faults) func(*rig, *ledgertest.Ledger, []uint64, *rand.Rand) (principal.Principal, ledgertest.Faults) {
		return func(_ *rig, l *ledgertest.Ledger, _ []uint64, _ *rand.Rand) (principal.Principal, ledgertest.Faults) {
			return l.ID(), f
		}
	}
	onA := func(f ledgertest.Faults) func(*rig, *ledgertest.Ledger, []uint64, *rand.Rand) (principal.Principal, ledgertest.Faults) {
		return func(_ *rig, l *ledgertest.Ledger, _ []uint64, rng *rand.Rand) (principal.Principal, ledgertest.Faults) {
			as := l.Archives()
			return as[rng.IntN(len(as))].ID, f
		}
	}
	// A lying node that drops or changes one of the payments' blocks, on
	// whichever canister serves it.
	lie := func(alter bool) func(*rig, *ledgertest.Ledger, []uint64, *rand.Rand) (principal.Principal, ledgertest.Faults) {
		return func(r *rig, l *ledgertest.Ledger, executed []uint64, rng *rand.Rand) (principal.Principal, ledgertest.Faults) {
			i := executed[rng.IntN(len(executed))]
			target := l.ID()
			for _, a := range l.Archives() {
				if a.Start <= i && i <= a.End {
					target = a.ID
				}
			}
			if alter {
				return target, ledgertest.Faults{AlterBlock: i + 1}
			}
			return target, ledgertest.Faults{OmitBlock: i + 1}
		}
	}
	return []chaosFault{
		{"none", onL(ledgertest.Faults{})},
		{"http-500", onL(ledgertest.Faults{HTTPStatus: 500})},
		{"archive-http-503", onA(ledgertest.Faults{HTTPStatus: 503})},
		{"reject", onL(ledgertest.Faults{QueryReject: 4})},
		{"archive-reject", onA(ledgertest.Faults{QueryReject: 2})},
		{"truncated", onL(ledgertest.Faults{Garbage: "truncated"})},
		{"garbage-cbor", onA(ledgertest.Faults{Garbage: "cbor"})},
		{"garbage-candid", onL(ledgertest.Faults{Garbage: "candid"})},
		{"archive-unreachable", onA(ledgertest.Faults{Unreachable: true})},
		{"omit", lie(false)},
		{"alter", lie(true)},
		{"wrong-key", onL(ledgertest.Faults{WrongKey: true})},
		{"foreign-certificate", onL(ledgertest.Faults{ForeignCertificate: true})},
		{"time-backwards", onL(ledgertest.Faults{TimeBackwards: 2 * time.Hour})},
		{"latency", onL(ledgertest.Faults{Latency: 30 * time.Millisecond})},
		{"stale", func(r *rig, l *ledgertest.Ledger, _ []uint64, _ *rand.Rand) (principal.Principal, ledgertest.Faults) {
			ahead := time.Duration(r.srv.Now() - uint64(time.Now().UnixNano()))
			return l.ID(), ledgertest.Faults{StaleTime: ahead + 10*time.Minute}
		}},
	}
}

// Intents published in batches while random faults come and go (and the
// follow-up runs all along): every verdict ever published is either not
// final or the truth, and once the faults are gone every intent ends in
// the truth. -e2e.long runs more intents and rounds; -e2e.seed picks the
// schedule.
func TestFaultChaos(t *testing.T) {
	rounds, perRound := 8, 3
	if *longRuns {
		rounds, perRound = 40, 5
	}
	rng := rand.New(rand.NewPCG(*seedFlag, 0xfa17))
	r := newRig(t, rigOpts{Poll: 20 * time.Millisecond})
	l := r.archivedLedger(ledgertest.LedgerConfig{})

	// The payments, every other one executed, then history that pushes them
	// into the archives, then their windows closed.
	type planned struct {
		id       string
		p        payment
		executed bool
		index    uint64
	}
	var plan []planned
	var executed []uint64
	base := r.srv.Now()
	for i := range rounds * perRound {
		pl := planned{id: fmt.Sprint("chaos-", i), p: payment{stamp: base + uint64(i), amount: uint64(10 + i), memo: fmt.Sprint("c", i)}}
		if rng.IntN(2) == 0 {
			idx, err := l.Transfer(payer, pl.p.arg())
			if err != nil {
				t.Fatal(err)
			}
			pl.executed, pl.index = true, idx
			executed = append(executed, idx)
		}
		plan = append(plan, pl)
	}
	if len(executed) == 0 {
		t.Fatalf("seed %d executed no payment", *seedFlag)
	}
	r.srv.Advance(time.Hour)
	if err := l.GenerateHistory(900, int64(*seedFlag), 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	r.srv.Advance(closeWindow)

	truth := map[string]planned{}
	for _, pl := range plan {
		truth[pl.id] = pl
	}
	check := func(v reconciled.Verdict, under string) {
		t.Helper()
		if !v.Final {
			return
		}
		pl := truth[v.IntentID]
		switch {
		case v.Status == reconciled.StatusFound && pl.executed && v.Block != nil && uint64(v.Block.Index) == pl.index:
		case v.Status == reconciled.StatusAbsent && !pl.executed:
		default:
			t.Errorf("%s (executed=%v at %d) under %s: final %s %+v — not the truth", v.IntentID, pl.executed, pl.index, under, v.Status, v.Block)
		}
	}

	faults := chaosFaults()
	var targets []principal.Principal
	for round := range rounds {
		for _, tg := range targets {
			r.srv.SetFaults(tg, ledgertest.Faults{})
		}
		fc := faults[rng.IntN(len(faults))]
		tg, f := fc.build(r, l, executed, rng)
		targets = append(targets[:0], tg)
		r.srv.SetFaults(tg, f)
		for k := range perRound {
			pl := plan[round*perRound+k]
			r.publish(l.ID().Encode(), pl.id, jsonOf(pl.p.intent(pl.id, l.ID())))
		}
		for k := range perRound {
			pl := plan[round*perRound+k]
			check(r.wait(pl.id, verdictAny), fc.name)
		}
	}
	for _, tg := range targets {
		r.srv.SetFaults(tg, ledgertest.Faults{})
	}
	for _, pl := range plan {
		check(r.settle(pl.id, verdictFinal), "no fault")
	}
	// Every verdict the stream ever carried, intermediate ones included.
	for _, pl := range plan {
		vs, err := r.st.Verdicts(r.ctx, pl.id)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range vs {
			if v.Seq != uint64(k+1) || (v.Final && k != len(vs)-1) {
				t.Fatalf("%s: verdict history out of order: %+v", pl.id, vs)
			}
			check(v, "history")
		}
	}
}
