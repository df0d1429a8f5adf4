package reconcile_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/identity"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
)

// The scenario generator of TestTruth. A scenario is one intended ledger
// call as a tool layer would make it, what really happened to it (executed
// with the reply lost, never sent, retried inside or after the window) and
// the intent the tool layer publishes about it — sometimes for a call that
// differs from the one that executed. Scenarios are grouped into worlds:
// one replica and ledger each, with its own block style, tip format,
// endpoint family, archiving, background history and faults.

var (
	truthSeed  = flag.Int64("truth.seed", 20261129, "seed of TestTruth's scenario generator")
	truthN     = flag.Int("truth.n", 2000, "number of TestTruth scenarios")
	truthWorld = flag.Int("truth.world", -1, "run only this world of TestTruth (to replay a failure)")
	truthICPN  = flag.Int("truth.icpn", 2000, "number of TestTruthICP scenarios")
)

// perWorld scenarios share one ledger: DecideMany then settles them with one
// certified tip per round, which is what keeps thousands of scenarios fast.
const perWorld = 250

type opKind int

const (
	opTransfer opKind = iota
	opMint
	opBurn
	opApprove
	opTransferFrom
	opBurnFrom
	nOps
)

var opNames = [...]string{"transfer", "mint", "burn", "approve", "transfer_from", "burn_from"}

func (o opKind) String() string { return opNames[o] }

type outcome int

const (
	// outLost: the call executed and its reply was lost.
	outLost outcome = iota
	// outNever: the call never reached the ledger.
	outNever
	// outDup: executed, then retried with the same bytes inside the window
	// (the ledger answers Duplicate and executes nothing).
	outDup
	// outTooOld: executed or not, then retried after the ledger's window
	// (the ledger answers TooOld, which says nothing about execution).
	outTooOld
	// outLate: not executed when first decided; a same-bytes retry inside
	// the window then executed it.
	outLate
	nOutcomes
)

var outcomeNames = [...]string{"lost", "never", "dup", "too_old", "late"}

func (o outcome) String() string { return outcomeNames[o] }

// variation is how the published intent differs from the call that was
// sent. Some variations are still the same call by docs/design.md#matching (an absent
// subaccount equals the all-zero one; an intent without fee does not
// compare it); the oracle decides, not the generator.
type variation int

const (
	varNone variation = iota
	varCaller
	varMemo
	varAmount
	varTo
	varSubaccount
	varFee
	nVariations
)

var variationNames = [...]string{"none", "caller", "memo", "amount", "to", "subaccount", "fee"}

func (v variation) String() string { return variationNames[v] }

type faultKind int

const (
	faultOmit faultKind = iota
	faultAlter
	faultLag
	faultWrongKey
	// The single-node inputs of docs/trust.md, each lied about by the node
	// answering queries (replicated calls stay honest).
	faultLieMinting
	faultLieBlockTypes
	faultLieArchives
	faultLieProbes
	nFaults
	// faultNarrow is no replica fault: a round decided by an engine whose
	// configured window is narrower than the ledger's.
	faultNarrow = nFaults
)

var faultNames = [...]string{"omit_block", "alter_block", "lag_blocks", "wrong_key",
	"lie_minting_account", "lie_block_types", "lie_archives", "lie_probes", "narrow_window"}

func (f faultKind) String() string { return faultNames[f] }

// worldCfg is everything about a world that the seed decides.
type worldCfg struct {
	idx      int
	seed     uint64
	ledger   ledgertest.LedgerConfig
	endpoint icrc3.Endpoint
	// background is the number of background blocks generated between
	// scenario chunks.
	background int
	// httpShare is the share (per mille) of executed calls sent through
	// agent-go over HTTP with lost replies.
	httpShare int
	// faults are injected in the open phase and the closed phase.
	faults [2]faultKind
	// lieMint is whom lie_minting_account names: "caller" or "recipient"
	// of a sampled scenario, "none" or "other"; certFails also loses the
	// replies of update calls, so the certified read fails and only the
	// node's word is left.
	lieMint   string
	certFails bool
	// verify: queries worlds certify no tip; their windows close on the
	// last block read, capped by the subnet's certified time, and a
	// replica answering queries lags behind closed windows once.
	verify icrc3.VerifyMode
	// history replaces the closed phase's fault with a new history under
	// the same canister id: "reinstall" (the same replica and clock) or
	// "restart" (a new replica from the same seed, its clock earlier than
	// the old chain's blocks). sqlite keeps the world's long-lived engine's
	// cache in SQLite, reopened at every restart; else one MemCache
	// outlives the engines.
	history string
	sqlite  bool
	// badExpiry is the share (per mille) of scenarios that also publish an
	// intent with a malformed ingress_expiry: 0, or before stamp − drift.
	badExpiry int
	// narrow adds a round decided with a configured window narrower than
	// the ledger's.
	narrow bool
	// icp worlds run on the ICP-style ledger, read as the ICP ledger's
	// history family.
	icp bool
	// joining worlds decide each round as a burst does: one intent starts
	// the ledger's decision and the others join it while it walks
	// (Engine.DecideJoining), a few at a time.
	joining bool
}

// adversaries names what the world lies about or breaks, for the
// per-adversary table.
func (c worldCfg) adversaries() []string {
	out := []string{"fault:" + c.faults[0].String()}
	if c.history == "" {
		out = append(out, "fault:"+c.faults[1].String())
	} else {
		cache := "memory"
		if c.sqlite {
			cache = "sqlite"
		}
		out = append(out, "history:"+c.history+":"+cache)
	}
	if c.verify == icrc3.VerifyQueries {
		out = append(out, "verify:queries", "verify:queries:lagging")
	}
	if c.badExpiry > 0 {
		out = append(out, "intent:bad_expiry")
	}
	if c.narrow {
		out = append(out, "config:narrow_window")
	}
	if c.joining {
		out = append(out, "decide:joining")
	}
	return out
}

func (c worldCfg) String() string {
	style := map[ledgertest.BlockStyle]string{ledgertest.StyleDFINITY: "dfinity", ledgertest.StyleSpec: "spec"}[c.ledger.BlockStyle]
	tip := map[ledgertest.TipFormat]string{ledgertest.TipLEB128: "leb128", ledgertest.TipLegacy: "legacy"}[c.ledger.TipFormat]
	ep := string(c.endpoint)
	if ep == "" {
		ep = "auto"
	}
	if c.icp {
		style = "icp"
	}
	return fmt.Sprintf("world %d seed %d: style=%s tip=%s endpoint=%s archive=%d/%d history=%d http=%d‰ faults=%s,%s lie_mint=%s/%v verify=%s change=%q sqlite=%v bad_expiry=%d‰ narrow=%v joining=%v",
		c.idx, c.seed, style, tip, ep, c.ledger.ArchiveThreshold, c.ledger.ArchiveBatch, c.background, c.httpShare, c.faults[0], c.faults[1],
		c.lieMint, c.certFails, c.verify, c.history, c.sqlite, c.badExpiry, c.narrow, c.joining)
}

func newWorldCfg(seed int64, idx int) worldCfg {
	ws := uint64(seed)*0x9e3779b97f4a7c15 + uint64(idx)
	r := rand.New(rand.NewPCG(ws, 0x7275746873))
	c := worldCfg{idx: idx, seed: ws}
	if r.IntN(2) == 1 {
		c.ledger.BlockStyle = ledgertest.StyleSpec
	}
	if r.IntN(2) == 1 {
		c.ledger.TipFormat = ledgertest.TipLegacy
	}
	switch r.IntN(3) {
	case 0:
		c.endpoint = icrc3.EndpointLegacy
	case 1:
		c.endpoint = icrc3.EndpointICRC3
	default:
		// Auto on a ledger without the legacy family: the ICRC-3 pages.
		c.ledger.DisableLegacy = r.IntN(2) == 0
	}
	if r.IntN(4) != 0 {
		c.ledger.ArchiveThreshold = 200 + r.Uint64N(800)
		c.ledger.ArchiveBatch = c.ledger.ArchiveThreshold / (2 + r.Uint64N(3))
		if r.IntN(2) == 0 {
			c.ledger.ArchiveCapacity = c.ledger.ArchiveBatch * (1 + r.Uint64N(3))
		}
	}
	c.background = 20 + r.IntN(180)
	c.httpShare = 20 + r.IntN(130)
	// The adversaries go round by world index, so that every run of eight
	// worlds or more (the CI size) meets each of them; the rest is drawn.
	c.faults = [2]faultKind{faultKind(idx % int(nFaults)), faultKind(r.IntN(int(nFaults)))}
	c.lieMint = [...]string{"caller", "recipient", "none", "other"}[r.IntN(4)]
	c.certFails = r.IntN(2) == 0
	if idx%10 == 4 {
		// A ledger read by signed queries trusts the node's blocks by the
		// operator's choice: a node altering or dropping them, or lying
		// about one-block replies, is what that choice accepts.
		c.verify, c.ledger.Uncertified = icrc3.VerifyQueries, true
		for i, f := range c.faults {
			switch f {
			case faultOmit, faultAlter, faultLieProbes:
				c.faults[i] = faultLag
			}
		}
	}
	switch idx % 4 {
	case 1:
		c.history = "reinstall"
	case 2:
		c.history = "restart"
	}
	c.sqlite = (idx/4)%2 == 1
	if idx%3 == 0 {
		c.badExpiry = 30 + r.IntN(70)
	}
	c.narrow = idx%4 == 3
	c.joining = r.IntN(2) == 0
	return c
}

// newICPWorldCfg is world idx on the ICP-style ledger: its history is
// always certified (the ICP family has no queries mode), and the
// lying-node faults it does not play (lies about block types, archives or
// probes, which the ICP family never asks) become ones it does.
func newICPWorldCfg(seed int64, idx int) worldCfg {
	c := newWorldCfg(seed, idx)
	c.icp = true
	c.verify, c.ledger.Uncertified = "", false
	c.ledger.BlockStyle, c.ledger.TipFormat, c.ledger.DisableLegacy, c.endpoint = ledgertest.StyleDFINITY, ledgertest.TipLEB128, false, ""
	for i, f := range c.faults {
		switch f {
		case faultLieBlockTypes, faultLieArchives, faultLieProbes:
			c.faults[i] = [...]faultKind{faultOmit, faultAlter, faultWrongKey}[(idx+i)%3]
		}
	}
	return c
}

// call is one ledger call: a method, a caller and its Candid argument.
type call struct {
	method string
	caller principal.Principal
	xfer   *icrc1.TransferArg
	appr   *icrc1.ApproveArgs
	tf     *icrc1.TransferFromArgs
}

// clone deep-copies c so that a variation never aliases the sent call.
func (c call) clone() call {
	d := c
	cpBytes := func(p *[]byte) *[]byte {
		if p == nil {
			return nil
		}
		b := bytes.Clone(*p)
		if b == nil {
			b = []byte{}
		}
		return &b
	}
	cpAcct := func(a icrc3.CandidAccount) icrc3.CandidAccount {
		return icrc3.CandidAccount{Owner: a.Owner, Subaccount: cpBytes(a.Subaccount)}
	}
	cpNat := func(n *idl.Nat) *idl.Nat {
		if n == nil {
			return nil
		}
		v := idl.NewBigNat(new(big.Int).Set(n.BigInt()))
		return &v
	}
	cpU64 := func(p *uint64) *uint64 {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	switch {
	case c.xfer != nil:
		a := *c.xfer
		a.FromSubaccount, a.To, a.Fee, a.Memo, a.CreatedAtTime = cpBytes(a.FromSubaccount), cpAcct(a.To), cpNat(a.Fee), cpBytes(a.Memo), cpU64(a.CreatedAtTime)
		a.Amount = *cpNat(&a.Amount)
		d.xfer = &a
	case c.appr != nil:
		a := *c.appr
		a.FromSubaccount, a.Spender, a.Fee, a.Memo, a.CreatedAtTime = cpBytes(a.FromSubaccount), cpAcct(a.Spender), cpNat(a.Fee), cpBytes(a.Memo), cpU64(a.CreatedAtTime)
		a.ExpectedAllowance, a.ExpiresAt = cpNat(a.ExpectedAllowance), cpU64(a.ExpiresAt)
		a.Amount = *cpNat(&a.Amount)
		d.appr = &a
	case c.tf != nil:
		a := *c.tf
		a.SpenderSubaccount, a.From, a.To, a.Fee, a.Memo, a.CreatedAtTime = cpBytes(a.SpenderSubaccount), cpAcct(a.From), cpAcct(a.To), cpNat(a.Fee), cpBytes(a.Memo), cpU64(a.CreatedAtTime)
		a.Amount = *cpNat(&a.Amount)
		d.tf = &a
	}
	return d
}

func (c call) stamp() uint64 {
	switch {
	case c.xfer != nil:
		return *c.xfer.CreatedAtTime
	case c.appr != nil:
		return *c.appr.CreatedAtTime
	}
	return *c.tf.CreatedAtTime
}

// fields returns the call's optional fields for in-place variation.
func (c call) fields() (sub **[]byte, memo **[]byte, fee **idl.Nat, amount *idl.Nat, to *icrc3.CandidAccount) {
	switch {
	case c.xfer != nil:
		return &c.xfer.FromSubaccount, &c.xfer.Memo, &c.xfer.Fee, &c.xfer.Amount, &c.xfer.To
	case c.appr != nil:
		return &c.appr.FromSubaccount, &c.appr.Memo, &c.appr.Fee, &c.appr.Amount, &c.appr.Spender
	}
	return &c.tf.SpenderSubaccount, &c.tf.Memo, &c.tf.Fee, &c.tf.Amount, &c.tf.To
}

func candidAcct(a icrc3.CandidAccount) string {
	acc, err := a.Account()
	if err != nil {
		panic(fmt.Sprintf("harness built a bad account: %v", err))
	}
	return acc.String()
}

func optHex(p *[]byte) any {
	if p == nil {
		return nil
	}
	return hex.EncodeToString(*p)
}

func optNat(n *idl.Nat) any {
	if n == nil {
		return nil
	}
	return n.BigInt().String()
}

func optU64(p *uint64) any {
	if p == nil {
		return nil
	}
	return fmt.Sprint(*p)
}

// intentJSON is the intent a tool layer publishes for c (docs/design.md#intent).
func (c call) intentJSON(id string, canister principal.Principal, after string) []byte {
	var args map[string]any
	switch {
	case c.xfer != nil:
		a := c.xfer
		args = map[string]any{"from_subaccount": optHex(a.FromSubaccount), "to": candidAcct(a.To), "amount": a.Amount.BigInt().String(),
			"fee": optNat(a.Fee), "memo": optHex(a.Memo), "created_at_time": optU64(a.CreatedAtTime)}
	case c.appr != nil:
		a := c.appr
		args = map[string]any{"from_subaccount": optHex(a.FromSubaccount), "spender": candidAcct(a.Spender), "amount": a.Amount.BigInt().String(),
			"expected_allowance": optNat(a.ExpectedAllowance), "expires_at": optU64(a.ExpiresAt),
			"fee": optNat(a.Fee), "memo": optHex(a.Memo), "created_at_time": optU64(a.CreatedAtTime)}
	default:
		a := c.tf
		args = map[string]any{"spender_subaccount": optHex(a.SpenderSubaccount), "from": candidAcct(a.From), "to": candidAcct(a.To),
			"amount": a.Amount.BigInt().String(), "fee": optNat(a.Fee), "memo": optHex(a.Memo), "created_at_time": optU64(a.CreatedAtTime)}
	}
	b, err := json.Marshal(map[string]any{"intent_id": id, "canister_id": canister.Encode(), "method": c.method,
		"caller": c.caller.Encode(), "args": args, "after": after})
	if err != nil {
		panic(err)
	}
	return b
}

func (c call) String() string {
	return strings.TrimSpace(string(c.intentJSON("x", principal.Principal{Raw: []byte{}}, "")))
}

// scenario is one intended call and everything that happened to it.
type scenario struct {
	idx     int
	op      opKind
	out     outcome
	vary    variation
	http    bool
	sendNow bool // executed when drawn (lost, dup, half of too_old)
	batch   int
	id      *identity.Ed25519Identity // for http
	sent    call                      // what the tool layer sent (or would have)
	intent  call                      // what it published
	raw     []byte                    // the intent's JSON
	events  []string
	// setup funds and approves what the call needs; a new history under
	// the same canister id runs it again.
	setup []func()
}

func (s *scenario) logf(format string, a ...any) {
	s.events = append(s.events, fmt.Sprintf(format, a...))
}

func (s *scenario) String() string {
	return fmt.Sprintf("scenario %d: op=%s outcome=%s variation=%s http=%v batch=%d\n  sent:   %s\n  intent: %s\n  events: %s",
		s.idx, s.op, s.out, s.vary, s.http, s.batch, s.sent, s.raw, strings.Join(s.events, "; "))
}

// gen draws scenarios for one world.
type gen struct {
	r       *rand.Rand
	w       *world
	zero    []byte
	nextPID int
}

// principal returns a fresh, world-unique principal that cannot collide
// with the background history's (29 bytes) or the minting account's.
func (g *gen) principal() principal.Principal {
	g.nextPID++
	n, w := g.nextPID, g.w.cfg.idx
	return principal.Principal{Raw: []byte{0xbb, byte(w >> 8), byte(w), byte(n >> 16), byte(n >> 8), byte(n), 0x01}}
}

func (g *gen) sub() []byte {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

// subChoice is none, all-zero or another subaccount.
func (g *gen) subChoice(other []byte) *[]byte {
	switch g.r.IntN(3) {
	case 0:
		return nil
	case 1:
		z := bytes.Clone(g.zero)
		return &z
	}
	o := bytes.Clone(other)
	return &o
}

func (g *gen) memo() *[]byte {
	switch g.r.IntN(4) {
	case 0:
		return nil
	case 1:
		return &[]byte{}
	}
	m := make([]byte, 1+g.r.IntN(32))
	for i := range m {
		m[i] = byte(g.r.Uint32())
	}
	return &m
}

func (g *gen) fee(zero bool) *idl.Nat {
	if g.r.IntN(2) == 0 {
		return nil
	}
	f := g.w.fee
	if zero {
		f = 0
	}
	n := idl.NewNat(f)
	return &n
}

func (g *gen) identity() *identity.Ed25519Identity {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(g.r.Uint32())
	}
	sk := ed25519.NewKeyFromSeed(seed)
	id, err := identity.NewEd25519Identity(sk.Public().(ed25519.PublicKey), sk)
	if err != nil {
		panic(err)
	}
	return id
}

// scenario draws one scenario stamped at the ledger's current time, funds
// what it needs (unstamped funding calls can never match an intent) and
// returns it with sent and intent filled in.
func (g *gen) scenario(idx, batch int) *scenario {
	w := g.w
	s := &scenario{idx: idx, batch: batch, op: opKind(g.r.IntN(int(nOps))), out: outcome(g.r.IntN(int(nOutcomes)))}
	if g.r.IntN(10) < 3 {
		s.vary = variation(1 + g.r.IntN(int(nVariations)-1))
	}
	s.sendNow = s.out == outLost || s.out == outDup || (s.out == outTooOld && g.r.IntN(2) == 0)
	s.http = s.sendNow && s.op != opMint && g.r.IntN(1000) < w.cfg.httpShare

	var caller principal.Principal
	switch {
	case s.op == opMint:
		caller = w.mint.Owner
	case s.http:
		s.id = g.identity()
		caller = s.id.Sender()
	default:
		caller = g.principal()
	}
	other := g.sub()
	stamp := w.srv.Now() - g.r.Uint64N(uint64(20*time.Second))
	amount := idl.NewNat(1 + g.r.Uint64N(1_000_000))
	burnAmount := idl.NewNat(w.fee + g.r.Uint64N(1_000_000))
	fund := func(owner principal.Principal) {
		f := func() {
			w.mintTo(icrc3.Account{Owner: owner}, 1_000_000_000_000)
			w.mintTo(icrc3.Account{Owner: owner, Subaccount: other}, 1_000_000_000_000)
		}
		f()
		s.setup = append(s.setup, f)
	}
	c := call{caller: caller}
	switch s.op {
	case opTransfer, opBurn, opMint:
		c.method = "icrc1_transfer"
		a := &icrc1.TransferArg{Amount: amount, Memo: g.memo(), CreatedAtTime: &stamp}
		switch s.op {
		case opTransfer:
			fund(caller)
			a.FromSubaccount = g.subChoice(other)
			a.To = icrc3.CandidAccount{Owner: g.principal(), Subaccount: g.subChoice(g.sub())}
			a.Fee = g.fee(false)
		case opBurn:
			fund(caller)
			a.FromSubaccount = g.subChoice(other)
			a.To = w.mint.ToCandid()
			a.Amount = burnAmount
			a.Fee = g.fee(true)
		case opMint:
			if g.r.IntN(2) == 0 && w.mint.Subaccount == nil {
				z := bytes.Clone(g.zero)
				a.FromSubaccount = &z
			} else if w.mint.Subaccount != nil {
				ms := bytes.Clone(w.mint.Subaccount)
				a.FromSubaccount = &ms
			}
			a.To = icrc3.CandidAccount{Owner: g.principal(), Subaccount: g.subChoice(g.sub())}
			a.Fee = g.fee(true)
		}
		c.xfer = a
	case opApprove:
		fund(caller)
		c.method = "icrc2_approve"
		a := &icrc1.ApproveArgs{FromSubaccount: g.subChoice(other), Amount: idl.NewNat(1 + g.r.Uint64N(1_000_000_000)),
			Spender: icrc3.CandidAccount{Owner: g.principal(), Subaccount: g.subChoice(g.sub())},
			Fee:     g.fee(false), Memo: g.memo(), CreatedAtTime: &stamp}
		if g.r.IntN(2) == 0 {
			// The pair is fresh, so its current allowance is 0.
			z := idl.NewNat(uint64(0))
			a.ExpectedAllowance = &z
		}
		if g.r.IntN(2) == 0 {
			e := w.srv.Now() + uint64(48*time.Hour) + g.r.Uint64N(uint64(24*time.Hour))
			a.ExpiresAt = &e
		}
		c.appr = a
	case opTransferFrom, opBurnFrom:
		c.method = "icrc2_transfer_from"
		owner := g.principal()
		fund(owner)
		approve := func() {
			for _, from := range [][]byte{nil, other} {
				for _, sp := range [][]byte{nil, other} {
					w.approve(icrc3.Account{Owner: owner, Subaccount: from}, icrc3.Account{Owner: caller, Subaccount: sp})
				}
			}
		}
		approve()
		s.setup = append(s.setup, approve)
		a := &icrc1.TransferFromArgs{SpenderSubaccount: g.subChoice(other), From: icrc3.CandidAccount{Owner: owner, Subaccount: g.subChoice(other)},
			Amount: amount, Memo: g.memo(), CreatedAtTime: &stamp}
		if s.op == opBurnFrom {
			a.To, a.Amount, a.Fee = w.mint.ToCandid(), burnAmount, g.fee(true)
		} else {
			a.To, a.Fee = icrc3.CandidAccount{Owner: g.principal(), Subaccount: g.subChoice(g.sub())}, g.fee(false)
		}
		c.tf = a
	}
	s.sent = c
	s.intent = g.vary(s, other)
	return s
}

// vary returns the intent published for s: the sent call, or a variation.
func (g *gen) vary(s *scenario, other []byte) call {
	in := s.sent.clone()
	sub, memo, fee, amount, to := in.fields()
	switch s.vary {
	case varCaller:
		in.caller = g.principal()
	case varMemo:
		switch {
		case *memo == nil:
			*memo = &[]byte{}
		case len(**memo) == 0 && g.r.IntN(2) == 0:
			*memo = nil
		default:
			m := append(bytes.Clone(**memo), byte(g.r.Uint32()))
			if len(m) > 32 {
				m = m[1:]
				m[0] ^= 0xff
			}
			*memo = &m
		}
	case varAmount:
		*amount = idl.NewBigNat(new(big.Int).Add(amount.BigInt(), big.NewInt(1)))
	case varTo:
		// The recipient (the spender, for approve) with another owner or
		// with the subaccount's none/zero form swapped.
		if g.r.IntN(2) == 0 || s.op == opBurn || s.op == opBurnFrom {
			to.Owner = g.principal()
		} else {
			to.Subaccount = swapSub(to.Subaccount, g.zero, g.sub(), g.r.IntN(2) == 0)
		}
	case varSubaccount:
		*sub = swapSub(*sub, g.zero, other, g.r.IntN(2) == 0)
	case varFee:
		switch {
		case *fee == nil:
			f := idl.NewNat(g.w.fee)
			if s.op == opMint || s.op == opBurn || s.op == opBurnFrom {
				f = idl.NewNat(uint64(0))
			}
			*fee = &f
		case g.r.IntN(2) == 0:
			*fee = nil
		default:
			f := idl.NewBigNat(new(big.Int).Add((*fee).BigInt(), big.NewInt(1)))
			*fee = &f
		}
	}
	return in
}

// swapSub changes a subaccount's form: none becomes zero or other, zero
// becomes none or other, other becomes none or zero. none and zero are one
// account (docs/design.md#matching), other is another.
func swapSub(p *[]byte, zero, other []byte, coin bool) *[]byte {
	pick := func(b []byte) *[]byte { c := bytes.Clone(b); return &c }
	switch {
	case p == nil && coin, p != nil && !bytes.Equal(*p, zero) && !coin:
		return pick(zero)
	case p == nil, p != nil && bytes.Equal(*p, zero) && coin:
		return pick(other)
	}
	return nil
}
