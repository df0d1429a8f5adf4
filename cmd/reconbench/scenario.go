package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
)

// The scenario is one big ledger whose history is built chronologically
// (the ledger clock only moves forward): everything before the window, then
// one intent window of 24 h holding blocks·24h/span blocks, with transfers
// planted at chosen ledger times, then the window's closure and a short
// tail. Three intents stamped S executed at the window's start, middle and
// end; a fourth with the same stamp never executed. Every step of the
// window also plants one payment with its own stamp, for the many-intents
// run.

const (
	// planSteps is how many slices the window is generated in; each slice
	// plants one payment.
	planSteps = 100
	// tw is the ledger's transaction window; the engine's default window
	// (TW + 2 min drift either side) covers it.
	tw = 24 * time.Hour
)

// caseNames are the single-intent cases, in the order they are reported.
var caseNames = []string{"start", "middle", "end", "absent"}

// facts are what the measurements need to know about the built ledger.
// They cross the pipe from a ledger child process as JSON.
type facts struct {
	URL     string `json:"url"`
	RootKey []byte `json:"root_key"`
	Ledger  string `json:"ledger"` // textual canister id

	Stamp   uint64            `json:"stamp"`    // S, the stamp of the four cases
	Found   map[string]uint64 `json:"found_at"` // where start, middle and end executed
	Window  [2]uint64         `json:"window"`   // first and last block of the cases' window
	Planted []planted         `json:"planted"`  // one payment per window step

	Blocks       uint64  `json:"blocks"`
	Archives     int     `json:"archives"`
	BuildSeconds float64 `json:"build_seconds"`
}

type planted struct {
	Stamp  uint64 `json:"stamp"`
	Amount uint64 `json:"amount"`
	Memo   []byte `json:"memo"`
	Index  uint64 `json:"index"`
}

type scenario struct {
	facts
	ledgerID principal.Principal
	cases    map[string]*matcher.Intent // start, middle, end, absent

	// The host: in this process (srv, ledger) or a child process.
	srv    *ledgertest.Server
	ledger *ledgertest.Ledger
	icp    *ledgertest.ICPLedger // set on an ICP-style scenario; ledger is its inner ledger
	child  *ledgerChild

	conc int           // page requests in flight per client
	rtt  time.Duration // injected per request (for the floor)
}

// injectRTT makes every request concerning the ledger or one of its
// archives wait rtt at the replica before its reply: mainnet's round trip
// through the boundary nodes, for reconciled and the baselines alike.
func (sc *scenario) injectRTT(rtt time.Duration) {
	if rtt <= 0 {
		return
	}
	sc.srv.SetFaults(sc.ledger.ID(), ledgertest.Faults{Latency: rtt})
	for _, a := range sc.archives() {
		sc.srv.SetFaults(a.ID, ledgertest.Faults{Latency: rtt})
	}
}

// archives are the scenario ledger's archives: an ICP-style ledger's are
// its own, not its inner ledger's (which archives nothing).
func (sc *scenario) archives() []ledgertest.ArchiveInfo {
	if sc.icp != nil {
		return sc.icp.Archives()
	}
	return sc.ledger.Archives()
}

// principalN is a deterministic principal distinct from the generated
// history's accounts.
func principalN(n byte) principal.Principal {
	return principal.Principal{Raw: []byte{0xbe, 0x7c, n, 0x01}}
}

var (
	alice = principalN(1)
	bob   = principalN(2)
	carol = principalN(3)
)

// buildScenario builds the ledger. span is the whole history's time span;
// the 24 h window holds blocks·24h/span of the blocks.
func buildScenario(blocks int, span time.Duration, seed int64) (*scenario, error) {
	return buildScenarioOn(blocks, span, seed, false)
}

// buildScenarioOn builds the scenario's history on an ICRC ledger, or on
// an ICP-style one (icp) whose inner ledger executes the same calls.
func buildScenarioOn(blocks int, span time.Duration, seed int64, icp bool) (*scenario, error) {
	t0 := time.Now()
	if span < 2*tw {
		return nil, fmt.Errorf("span %s: want at least %s", span, 2*tw)
	}
	window := int(float64(blocks) * float64(tw) / float64(span))
	tail := min(1000, blocks/100)
	before := blocks - window - tail - 1 /* funding */ - 3 /* cases */
	if window < 2*planSteps || before < 1 {
		return nil, fmt.Errorf("%d blocks over %s: want at least %d blocks in the window", blocks, span, 2*planSteps)
	}
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(seed))
	if err != nil {
		return nil, err
	}
	sc := &scenario{srv: srv, facts: facts{URL: srv.URL(), RootKey: srv.RootKey(), Found: map[string]uint64{}}}
	fail := func(err error) (*scenario, error) {
		srv.Close()
		return nil, err
	}
	// DFINITY-like archiving: at most 2000 blocks on the ledger, archives of
	// ~200k blocks each.
	lcfg := ledgertest.LedgerConfig{ArchiveThreshold: 2000, ArchiveBatch: 1000, ArchiveCapacity: 200_000}
	var l *ledgertest.Ledger
	if icp {
		if sc.icp, err = srv.NewICPLedger(lcfg); err != nil {
			return fail(err)
		}
		l = sc.icp.Inner()
	} else if l, err = srv.NewLedger(lcfg); err != nil {
		return fail(err)
	}
	sc.ledger, sc.Ledger = l, l.ID().Encode()

	// Everything before the window, ending at the ledger's current time.
	if err := l.GenerateHistory(before-planSteps, seed, span-tw); err != nil {
		return fail(err)
	}
	mint := l.MintingAccount()
	if _, err := l.Transfer(mint.Owner, icrc1.TransferArg{To: icrc3.Account{Owner: alice}.ToCandid(),
		Amount: icrc1.IDLNat(icrc3.NatFromUint64(1_000_000_000_000))}); err != nil {
		return fail(fmt.Errorf("fund payer: %w", err))
	}
	// Keep the window clear of the pre-window history's last blocks.
	srv.Advance(3 * time.Minute)
	sc.Stamp = srv.Now()
	pay := func(stamp, amount uint64, memo []byte, to principal.Principal) (uint64, error) {
		return l.Transfer(alice, icrc1.TransferArg{To: icrc3.Account{Owner: to}.ToCandid(),
			Amount: icrc1.IDLNat(icrc3.NatFromUint64(amount)), Memo: &memo, CreatedAtTime: &stamp})
	}
	if sc.Found["start"], err = pay(sc.Stamp, 1, []byte{1}, bob); err != nil {
		return fail(fmt.Errorf("plant start: %w", err))
	}
	step := tw / planSteps
	perStep := (window + planSteps) / planSteps // the pre-window blocks moved here cover the plants
	for i := 0; i < planSteps; i++ {
		d := step
		if i == planSteps-1 {
			// The end payment must stay inside the ledger's 24 h window,
			// with room for the wall clock the ledger clock follows.
			d -= 5 * time.Minute
		}
		srv.Advance(d)
		if err := l.GenerateHistory(perStep-1, seed+int64(1+i), d); err != nil {
			return fail(err)
		}
		p := planted{Stamp: srv.Now(), Amount: 1000 + uint64(i), Memo: []byte(fmt.Sprintf("plant-%d", i))}
		if p.Index, err = pay(p.Stamp, p.Amount, p.Memo, carol); err != nil {
			return fail(fmt.Errorf("plant payment %d: %w", i, err))
		}
		sc.Planted = append(sc.Planted, p)
		if i == planSteps/2-1 {
			if sc.Found["middle"], err = pay(sc.Stamp, 2, []byte{2}, bob); err != nil {
				return fail(fmt.Errorf("plant middle: %w", err))
			}
		}
	}
	if sc.Found["end"], err = pay(sc.Stamp, 3, []byte{3}, bob); err != nil {
		return fail(fmt.Errorf("plant end: %w", err))
	}
	// Close the cases' window in ledger time, then a little more history.
	if end := sc.Stamp + uint64(tw+3*time.Minute); end > srv.Now() {
		srv.Advance(time.Duration(end - srv.Now()))
	}
	if rest := blocks - int(l.Len()); rest > 0 {
		if err := l.GenerateHistory(rest, seed+1_000, 3*time.Minute); err != nil {
			return fail(err)
		}
	}
	if err := sc.init(); err != nil {
		return fail(err)
	}
	w := sc.cases["absent"].Window(matcher.LedgerRules{})
	sc.Window[0], sc.Window[1] = sc.blocksIn(w.From, w.To)
	if sc.icp != nil {
		if err := sc.icp.Sync(); err != nil {
			return fail(err)
		}
	}
	sc.Blocks, sc.Archives = l.Len(), len(sc.archives())
	sc.BuildSeconds = time.Since(t0).Seconds()
	return sc, nil
}

// init derives the intents of the four cases from the facts.
func (sc *scenario) init() error {
	id, err := principal.Decode(sc.Ledger)
	if err != nil {
		return fmt.Errorf("ledger id %q: %w", sc.Ledger, err)
	}
	sc.ledgerID = id
	sc.cases = map[string]*matcher.Intent{}
	for k, name := range caseNames {
		in, err := matcher.ParseIntent(transferIntentJSON("case-"+name, sc.Ledger, sc.Stamp, uint64(k+1), []byte{byte(k + 1)}, bob))
		if err != nil {
			return err
		}
		sc.cases[name] = in
	}
	return nil
}

func (sc *scenario) close() error {
	if sc.child != nil {
		return sc.child.stop()
	}
	sc.srv.Close()
	return nil
}

// blocksIn finds the first and last block with from <= ts <= to.
func (sc *scenario) blocksIn(from, to uint64) (first, last uint64) {
	n := int(sc.ledger.Len())
	tsAt := func(i int) uint64 {
		v, _ := sc.ledger.Block(uint64(i))
		return blockTS(v)
	}
	first = uint64(sort.Search(n, func(i int) bool { return tsAt(i) >= from }))
	last = uint64(sort.Search(n, func(i int) bool { return tsAt(i) > to })) - 1
	return first, last
}

// blockTS reads a block Value's top-level ts.
func blockTS(v icrc3.Value) uint64 {
	for _, f := range v.Map {
		if f.Key == "ts" {
			ts, _ := f.Value.Nat.Uint64()
			return ts
		}
	}
	return 0
}

// manyIntents returns n intent bodies with overlapping windows: one
// matching each planted payment, the rest with a planted stamp and another
// amount (near misses: absent once their window closes, not_yet before).
func (sc *scenario) manyIntents(n int) (ids []string, bodies [][]byte) {
	for k := 0; k < n; k++ {
		p := sc.Planted[k%len(sc.Planted)]
		amount, memo := p.Amount, p.Memo
		if k >= len(sc.Planted) {
			amount = 1_000_000 + uint64(k)
		}
		id := "many-" + strconv.Itoa(k)
		ids = append(ids, id)
		bodies = append(bodies, transferIntentJSON(id, sc.Ledger, p.Stamp, amount, memo, carol))
	}
	return ids, bodies
}

// transferIntentJSON is the intent of an icrc1_transfer by alice.
func transferIntentJSON(id, canister string, stamp, amount uint64, memo []byte, to principal.Principal) []byte {
	body := map[string]any{
		"intent_id": id, "canister_id": canister, "method": "icrc1_transfer",
		"caller": alice.Encode(), "after": "Err.TooOld",
		"args": map[string]any{
			"from_subaccount": nil, "to": icrc3.Account{Owner: to}.String(), "amount": strconv.FormatUint(amount, 10),
			"fee": nil, "memo": hex.EncodeToString(memo), "created_at_time": strconv.FormatUint(stamp, 10),
		},
	}
	b, err := json.Marshal(body)
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	return b
}
