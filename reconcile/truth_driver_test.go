package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
)

// The truth test's driver: it executes the generated scenarios' calls on
// the world's ledger (with lost replies, retries, faults and changes of
// history) and runs the engine's rounds over them.

// run plays the world's timeline: two batches of scenarios twelve hours
// apart, decide rounds while windows are open, retries, a fault in the
// open phase and one after the first batch's windows closed, and final
// rounds once every window has closed.
func (w *world) run(n int) {
	g := &gen{r: w.r, w: w, zero: make([]byte, 32)}
	w.batch(g, 0, n/2)
	w.round("batch0-open", w.eng, nil, false, nil)
	w.retry(0, outDup, outLate)
	w.round("batch0-after-retries", w.eng, nil, false, nil)

	w.srv.Advance(12 * time.Hour)
	w.batch(g, 1, n-n/2)
	w.round("batch1-open", w.eng, nil, false, nil)
	w.retry(1, outDup, outLate)
	w.faultRounds("open", w.cfg.faults[0], -1)
	if w.cfg.narrow {
		// A configured window narrower than the ledger's is refused: no
		// verdict of any intent may be decided on it.
		narrow := reconcile.LedgerConfig{TW: time.Hour}
		if w.r.IntN(2) == 0 {
			narrow = reconcile.LedgerConfig{Drift: 10 * time.Second}
		}
		w.round("narrow-config", w.newEngineOn(reconcile.NewMemCache(), narrow), &activeFault{kind: faultNarrow}, false, nil)
	}

	w.closeBatch(0)
	w.retry(0, outTooOld)
	w.round("batch0-closed", w.eng, nil, false, nil)
	if w.cfg.verify == icrc3.VerifyQueries {
		w.lagQueries(0)
	}
	var last *reconcile.Engine
	if w.cfg.history != "" {
		w.changeHistory(g)
		before := w.historyChanges()
		w.round("history-changed", w.eng, nil, false, nil)
		if w.historyChanges() == before {
			w.tally.wrong++
			w.problems = append(w.problems, "the new history under the same canister id was not detected as a history change")
		}
		w.eng = w.restart()
		w.round("history-restarted", w.eng, nil, false, nil)
		last = w.eng
	} else {
		last = w.faultRounds("closed", w.cfg.faults[1], 1)
	}

	w.closeBatch(1)
	w.retry(1, outTooOld)
	w.round("final-warm", w.eng, nil, true, nil)
	w.round("final-after-fault", last, nil, true, nil)
	w.round("final-cold", w.newEngine(), nil, true, nil)
	w.checkBad()
}

// changeHistory puts a new history under the world's canister id: the
// ledger reinstalled on the same replica and clock, or a new replica from
// the same seed (same keys, same ids) whose clock restarts earlier than the
// old chain's newest blocks. The long-lived engine keeps its cache across
// it (a restart when the replica is new). The new history re-funds the
// second batch's callers and executes a random half of their calls again;
// from here on the new ledger's executions are the truth. Verdicts already
// final stay as published, so nothing checks them against the new truth.
func (w *world) changeHistory(g *gen) {
	oldNow, cfg, id := w.srv.Now(), w.cfg.ledger, w.l.ID()
	if w.cfg.history == "reinstall" {
		// On the same replica the id must be named; a new replica from the
		// same seed hands out the same ids in the same order (and naming
		// one there would let the first archive take it again).
		cfg.ID = id
	}
	if w.cfg.history == "restart" {
		w.srv.Close()
		srv, err := ledgertest.NewServer(ledgertest.WithSeed(int64(w.cfg.seed)))
		if err != nil {
			w.t.Fatal(err)
		}
		w.srv = srv
		// Earlier than the old chain's newest blocks, yet late enough for
		// the second batch's stamps to be inside the ledger's window.
		earlier := 1 + w.r.Uint64N(uint64(6*time.Hour))
		if target := oldNow - earlier; target > srv.Now() {
			srv.Advance(time.Duration(target - srv.Now()))
		}
	}
	l, err := installLedger(w.srv, cfg, w.cfg.icp)
	if err != nil {
		w.t.Fatal(err)
	}
	if !l.ID().Equal(id) || !l.MintingAccount().Equal(w.mint) {
		w.t.Fatalf("%s: the new history is not under the same canister and minting account", w.cfg)
	}
	w.l = l
	if w.cfg.history == "restart" {
		w.eng = w.restart()
	}
	if err := w.l.GenerateHistory(w.r.IntN(3*w.cfg.background), int64(w.cfg.seed%1_000_000)*100+99, time.Hour); err != nil {
		w.t.Fatalf("%s: history: %v", w.cfg, err)
	}
	for _, s := range w.scens {
		if s.batch != 1 {
			continue
		}
		for _, f := range s.setup {
			f()
		}
		if w.r.IntN(2) == 0 {
			s.logf("new history at %d: executed again: %s", w.srv.Now(), w.exec(s.sent))
		} else {
			s.logf("new history at %d: not executed", w.srv.Now())
		}
	}
}

// batch draws, executes and publishes k scenarios, with background
// history between chunks of them.
func (w *world) batch(g *gen, b, k int) {
	for i := 0; i < k; i++ {
		if i%25 == 0 {
			w.chunks++
			if err := w.l.GenerateHistory(w.cfg.background, int64(w.cfg.seed%1_000_000)*100+int64(w.chunks), time.Hour); err != nil {
				w.t.Fatalf("%s: history: %v", w.cfg, err)
			}
		}
		w.srv.Advance(time.Duration(w.r.Int64N(int64(2 * time.Second))))
		s := g.scenario(len(w.scens), b)
		if s.sendNow {
			w.send(s)
		}
		s.raw = s.intent.intentJSON(fmt.Sprintf("w%d-s%d", w.cfg.idx, s.idx), w.l.ID(), "unknown")
		in, err := matcher.ParseIntent(s.raw)
		if err != nil {
			w.t.Fatalf("%s: harness built an invalid intent %s: %v", w.cfg, s.raw, err)
		}
		w.scens = append(w.scens, s)
		w.ins = append(w.ins, in)
		w.tally.scenarios++
		if w.r.IntN(1000) < w.cfg.badExpiry {
			w.bad = append(w.bad, badIntent{scen: s.idx, raw: w.badTwin(s)})
		}
	}
}

// badTwin is s's intent under another id with an ingress_expiry that no
// envelope of the call can have had.
func (w *world) badTwin(s *scenario) []byte {
	var body map[string]any
	if err := json.Unmarshal(s.intent.intentJSON(fmt.Sprintf("w%d-s%d-bad", w.cfg.idx, s.idx), w.l.ID(), "unknown"), &body); err != nil {
		w.t.Fatal(err)
	}
	exp := uint64(0)
	if from := s.intent.stamp() - uint64(2*time.Minute); w.r.IntN(2) == 0 {
		exp = from - 1 - w.r.Uint64N(uint64(time.Hour))
	}
	body["ingress_expiry"] = fmt.Sprint(exp)
	b, err := json.Marshal(body)
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

// send executes the scenario's call once; its reply is lost, so the tool
// layer cannot know the block index.
func (w *world) send(s *scenario) {
	if !s.http {
		if arm := w.exec(s.sent); arm != "Ok" {
			w.t.Fatalf("%s: %s\nthe original call failed: %s", w.cfg, s, arm)
		}
		s.logf("executed at %d (go)", w.srv.Now())
		return
	}
	before := len(w.l.Executions())
	ag, err := w.srv.NewAgent(s.id)
	if err != nil {
		w.t.Fatal(err)
	}
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{LoseReplies: true})
	var res any
	switch {
	case s.sent.xfer != nil:
		res = new(icrc1.TransferResult)
		err = ag.Call(w.l.ID(), s.sent.method, []any{*s.sent.xfer}, []any{res})
	case s.sent.appr != nil:
		res = new(icrc1.ApproveResult)
		err = ag.Call(w.l.ID(), s.sent.method, []any{*s.sent.appr}, []any{res})
	default:
		res = new(icrc1.TransferFromResult)
		err = ag.Call(w.l.ID(), s.sent.method, []any{*s.sent.tf}, []any{res})
	}
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{})
	if err == nil {
		w.t.Fatalf("%s: %s\nthe reply was not lost: %+v", w.cfg, s, res)
	}
	if after := len(w.l.Executions()); after != before+1 {
		w.t.Fatalf("%s: %s\nthe call over HTTP did not execute (%v)", w.cfg, s, err)
	}
	s.logf("executed at %d over HTTP, reply lost (%v)", w.srv.Now(), firstLine(err))
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// exec runs c Go-side as its caller and names the result's arm.
func (w *world) exec(c call) string {
	var err error
	switch {
	case c.xfer != nil:
		_, err = w.l.Transfer(c.caller, *c.clone().xfer)
	case c.appr != nil:
		_, err = w.l.Approve(c.caller, *c.clone().appr)
	default:
		_, err = w.l.TransferFrom(c.caller, *c.clone().tf)
	}
	if err == nil {
		return "Ok"
	}
	var te *icrc1.TransferError
	var ae *icrc1.ApproveError
	var fe *icrc1.TransferFromError
	switch {
	case errors.As(err, &te):
		return armName(te.Duplicate != nil, te.TooOld != nil, err)
	case errors.As(err, &ae):
		return armName(ae.Duplicate != nil, ae.TooOld != nil, err)
	case errors.As(err, &fe):
		return armName(fe.Duplicate != nil, fe.TooOld != nil, err)
	}
	return err.Error()
}

func armName(dup, tooOld bool, err error) string {
	switch {
	case dup:
		return "Duplicate"
	case tooOld:
		return "TooOld"
	}
	return err.Error()
}

// retry replays the sent bytes of batch b's scenarios with the given
// outcomes: a duplicate inside the window, the late first execution, or a
// retry after the ledger's window (TooOld).
func (w *world) retry(b int, outs ...outcome) {
	for _, s := range w.scens {
		if s.batch != b {
			continue
		}
		for _, o := range outs {
			if s.out != o {
				continue
			}
			want := map[outcome]string{outDup: "Duplicate", outLate: "Ok", outTooOld: "TooOld"}[o]
			got := w.exec(s.sent)
			s.logf("retried at %d: %s", w.srv.Now(), got)
			if got != want {
				w.t.Fatalf("%s: %s\nretry answered %s, want %s", w.cfg, s, got, want)
			}
		}
	}
}

// closeBatch advances the clock past every window of batch b (stamp + TW +
// D, the engine's defaults) by a random margin of up to a minute.
func (w *world) closeBatch(b int) {
	var end uint64
	for _, s := range w.scens {
		if s.batch == b {
			end = max(end, s.intent.stamp()+uint64(24*time.Hour+2*time.Minute))
		}
	}
	target := end + 1 + w.r.Uint64N(uint64(time.Minute))
	if w.cfg.verify == icrc3.VerifyQueries {
		// Queries mode closes on the last block read, and no later than
		// certified time less the lag a replica answering queries may
		// have (icrc3's queriesLag).
		target += uint64(30 * time.Second)
	}
	if now := w.srv.Now(); target > now {
		w.srv.Advance(time.Duration(target - now))
	}
	if w.cfg.verify == icrc3.VerifyQueries {
		// A block past the windows' end, which no intent can match (it
		// carries no created_at_time): an idle ledger closes no window.
		w.mintTo(icrc3.Account{Owner: principal.Principal{Raw: []byte{0xcc, 0x02}}}, 1)
	}
}

// lagQueries decides a sample with a cold engine while the replica
// answering a queries-mode ledger's queries lags behind an execution of
// batch b, whose windows the certified time has closed, then every intent
// once it caught up. Only the blocks are that replica's word; the time
// comes from the subnet: a window must not close on a time the blocks read
// do not cover.
func (w *world) lagQueries(b int) {
	execs := w.l.Executions()
	cands := w.batchExecs(execs, b)
	if len(cands) == 0 {
		return
	}
	f := &activeFault{kind: faultLag, target: cands[w.r.IntN(len(cands))]}
	f.visible = f.target
	eng := w.newEngine()
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{LagBlocks: w.l.Len() - f.visible})
	w.round("lag-queries", eng, f, false, w.sample(faultSample))
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{})
	w.round("lag-queries-lifted", eng, nil, false, nil)
}

// batchExecs are the indexes of the stamped executions of batch b's calls,
// ascending.
func (w *world) batchExecs(execs []ledgertest.Execution, b int) []uint64 {
	var out []uint64
	for _, e := range execs {
		if !stamped(e) {
			continue
		}
		for _, s := range w.scens {
			if s.batch == b && e.Method == s.sent.method && execStamp(e) == s.sent.stamp() && bytes.Equal(e.Caller.Raw, s.sent.caller.Raw) {
				out = append(out, e.Index)
				break
			}
		}
	}
	return out
}

// activeFault is the fault on the ledger while a round was decided.
type activeFault struct {
	kind    faultKind
	target  uint64 // the block omitted or altered
	visible uint64 // LagBlocks: the chain length the lagging replica shows
}

func (f *activeFault) String() string {
	if f == nil {
		return "none"
	}
	return fmt.Sprintf("%s (block %d, visible %d)", f.kind, f.target, f.visible)
}

// faultRounds decides every intent with a cold engine while a fault is on,
// then again with the same engine once it is lifted; it returns that engine
// for the final rounds. The target is a block of a scenario's execution, so
// it lies inside some windows. lagBatch >= 0 restricts the target to
// executions of that batch (see lagTarget).
func (w *world) faultRounds(phase string, k faultKind, lagBatch int) *reconcile.Engine {
	execs := w.l.Executions()
	var cands []uint64
	for _, e := range execs {
		if stamped(e) {
			cands = append(cands, e.Index)
		}
	}
	eng := w.newEngine()
	if len(cands) == 0 {
		w.round("fault-"+phase+"-none", eng, nil, false, nil)
		return eng
	}
	f := &activeFault{kind: k, target: cands[w.r.IntN(len(cands))]}
	sample := w.sample(faultSample)
	var faults ledgertest.Faults
	switch k {
	case faultOmit:
		faults.OmitBlock = f.target + 1
	case faultAlter:
		faults.AlterBlock = f.target + 1
	case faultWrongKey:
		faults.WrongKey = true
	case faultLag:
		f.target = w.lagTarget(execs, lagBatch, f.target)
		f.visible = f.target
		faults.LagBlocks = w.l.Len() - f.visible
	case faultLieMinting:
		faults.LieMintingAccount = w.lieAccount(w.scens[sample[w.r.IntN(len(sample))]])
		faults.LoseReplies = w.cfg.certFails
	case faultLieBlockTypes:
		faults.LieBlockTypes = [...]string{"none", "1xfer", "2approve,107set_fee_collector"}[w.r.IntN(3)]
	case faultLieArchives:
		faults.LieArchives = true
	case faultLieProbes:
		faults.LieProbes = true
	}
	w.srv.SetFaults(w.l.ID(), faults)
	w.round("fault-"+phase+"-"+k.String(), eng, f, false, sample)
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{})
	w.round("fault-"+phase+"-lifted", eng, nil, false, nil)
	return eng
}

// lieAccount is the minting account a lying node names, by the world's
// lie: the caller-side account of s's intent (its transfer would be read as
// a mint), its recipient (a burn), none at all, or an account no call uses.
func (w *world) lieAccount(s *scenario) string {
	sub, _, _, _, to := s.intent.fields()
	switch w.cfg.lieMint {
	case "caller":
		return icrc3.Account{Owner: s.intent.caller, Subaccount: deref(*sub)}.String()
	case "recipient":
		return candidToAcct(*to).String()
	case "none":
		return "none"
	}
	return icrc3.Account{Owner: principal.Principal{Raw: []byte{0xcc, 0x01}}}.String()
}

// lagTarget picks the first block a lagging replica hides. The test
// replica certifies the current /time over the lagged tip, which no real
// replica can: a certificate vouches for the state at its time, and every
// block stamped before that time is in that state. Hiding blocks of a
// closed window under such a certificate would make "absent" unavoidable
// for any reader, so once windows have closed the lag only hides blocks of
// batch lagBatch, whose windows are still open.
func (w *world) lagTarget(execs []ledgertest.Execution, lagBatch int, def uint64) uint64 {
	if lagBatch < 0 {
		return def
	}
	ex := w.batchExecs(execs, lagBatch)
	if len(ex) == 0 {
		return w.l.Len()
	}
	first := ex[0]
	// Between the first execution of the batch and the tip.
	return first + w.r.Uint64N(w.l.Len()-first)
}

func stamped(e ledgertest.Execution) bool {
	switch a := e.Arg.(type) {
	case icrc1.TransferArg:
		return a.CreatedAtTime != nil
	case icrc1.ApproveArgs:
		return a.CreatedAtTime != nil
	case icrc1.TransferFromArgs:
		return a.CreatedAtTime != nil
	}
	return false
}

func execStamp(e ledgertest.Execution) uint64 {
	switch a := e.Arg.(type) {
	case icrc1.TransferArg:
		return *a.CreatedAtTime
	case icrc1.ApproveArgs:
		return *a.CreatedAtTime
	case icrc1.TransferFromArgs:
		return *a.CreatedAtTime
	}
	return 0
}

// faultSample is how many intents a round under a fault decides. Under a
// lying node every intent's scan re-reads down to the bad page, so a round
// of all intents costs intents × window pages; a sample keeps the test
// fast and still puts intents of both batches on the faulty ledger.
const faultSample = 48

// sample returns k distinct scenario indexes, ascending.
func (w *world) sample(k int) []int {
	idx := w.r.Perm(len(w.scens))
	if len(idx) > k {
		idx = idx[:k]
	}
	sort.Ints(idx)
	return idx
}

// round decides the published intents (those of subset, or all) with one
// DecideMany and checks each verdict against the executions recorded
// before it. final demands a final verdict of everyone (every window has
// closed, no fault is on).
func (w *world) round(name string, eng *reconcile.Engine, f *activeFault, isFinal bool, subset []int) {
	if subset == nil {
		subset = make([]int, len(w.scens))
		for i := range subset {
			subset[i] = i
		}
	}
	ins := make([]*matcher.Intent, len(subset))
	for k, i := range subset {
		ins[k] = w.ins[i]
	}
	execs := w.l.Executions()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before := w.srv.Now()
	t0 := time.Now()
	vs, err := w.decide(ctx, eng, name, ins)
	after := w.srv.Now()
	if testing.Verbose() && *truthWorld >= 0 {
		w.t.Logf("round %s: %d intents in %s", name, len(vs), time.Since(t0).Round(time.Microsecond))
	}
	if err != nil {
		w.t.Fatalf("%s: round %s: %v", w.cfg, name, err)
	}
	var advs []string
	switch {
	case f != nil && f.kind == faultNarrow:
		advs = append(advs, "config:narrow_window")
	case f != nil && name == "lag-queries":
		advs = append(advs, "verify:queries:lagging")
	case f != nil:
		advs = append(advs, "fault:"+f.kind.String())
	case strings.HasPrefix(name, "history-"):
		advs = append(advs, w.cfg.adversaries()[1])
	}
	if w.cfg.verify == icrc3.VerifyQueries {
		advs = append(advs, "verify:queries")
	}
	if w.cfg.joining {
		advs = append(advs, "decide:joining")
	}
	for k, v := range vs {
		s := w.scens[subset[k]]
		w.tally.count(v.Status)
		if f != nil {
			w.tally.underF++
		}
		for _, a := range advs {
			w.tally.underAdv(a, v.Final)
		}
		p := w.check(s, v, execs, after, f)
		if p == "" && isFinal {
			if !v.Final {
				p = "not final after every window closed and every fault was lifted"
			} else {
				w.tally.finals++
			}
		}
		if name == "final-cold" {
			if len(w.matching(s, execs)) > 0 {
				w.tally.executed++
			}
			w.tally.covered("op:" + s.op.String())
			w.tally.covered("out:" + s.out.String())
			w.tally.covered("var:" + s.vary.String() + ":" + string(v.Status))
			if s.http {
				w.tally.covered("http")
			}
			if v.Status == reconciled.StatusFound && len(w.l.Archives()) > 0 && uint64(v.Block.Index) <= w.l.Archives()[len(w.l.Archives())-1].End {
				w.tally.covered("archived")
			}
		}
		if p != "" {
			w.tally.wrong++
			vj, _ := json.Marshal(v)
			w.problems = append(w.problems, fmt.Sprintf("round %s (ledger time %d..%d, fault %s): %s\n%s\n  matching executions: %s\n  verdict: %s",
				name, before, after, f, p, s, w.describeMatches(s, execs), vj))
		}
	}
}
