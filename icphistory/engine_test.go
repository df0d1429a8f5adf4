package icphistory_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/family"
	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icphistory"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/ledgertest/testworld"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// world is an ICP-style ledger with archives on a loopback replica, read
// through icphistory and decided by the engine.
type world struct {
	t      *testing.T
	srv    *ledgertest.Server
	l      *ledgertest.ICPLedger
	client *icrc3history.Client
}

func principalN(n int) principal.Principal {
	return principal.Principal{Raw: []byte{0xbb, byte(n >> 8), byte(n), 0x01}}
}

var (
	alice = principalN(1)
	bob   = principalN(2)
	carol = principalN(3)
)

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldArchiving(t, 6, 4, 8)
}

// newWorldArchiving is newWorld with the archiving threshold, batch and
// capacity given.
func newWorldArchiving(t *testing.T, threshold, batch, capacity uint64) *world {
	t.Helper()
	tw := testworld.New(t, testworld.Options{Seed: 15, ICP: true, Ledger: ledgertest.LedgerConfig{
		ArchiveThreshold: threshold, ArchiveBatch: batch, ArchiveCapacity: capacity,
		InitialBalances: []ledgertest.Balance{
			{Account: icrc3.Account{Owner: alice}, Amount: icrc3.NatFromUint64(1_000_000_000)},
			{Account: icrc3.Account{Owner: bob}, Amount: icrc3.NatFromUint64(1_000_000_000)},
		}},
		Client: &icrc3history.ClientConfig{Concurrency: 2}, ReplicaClock: true})
	return &world{t: t, srv: tw.Server, l: tw.ICP, client: tw.Client}
}

// engine is a fresh engine (and cache) over the world's ledger.
func (w *world) engine() *reconcile.Engine { return w.engineOn(reconcile.NewMemCache()) }

// engineOn reads the ledger as the daemon does: through Choose, which
// tells the family by the endpoints.
func (w *world) engineOn(cache reconcile.BlockCache) *reconcile.Engine {
	h := family.Choose(w.client)
	return reconcile.NewEngine(func(ledger string) (reconcile.History, reconcile.LedgerConfig, error) {
		if ledger != w.l.ID().Encode() {
			return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
		}
		return h, reconcile.LedgerConfig{}, nil
	}, cache, nil)
}

func nat(v uint64) icrc3.Nat { return icrc3.NatFromUint64(v) }

// step advances ledger time so that every call gets its own stamp.
func (w *world) stamp() uint64 {
	w.srv.Advance(time.Second)
	return w.srv.Now()
}

type sent struct {
	index  uint64
	intent *matcher.Intent
}

func (w *world) intent(method string, caller principal.Principal, args map[string]any) *matcher.Intent {
	w.t.Helper()
	b, err := json.Marshal(map[string]any{"intent_id": fmt.Sprintf("i-%d", len(args)), "canister_id": w.l.ID().Encode(),
		"method": method, "caller": caller.Encode(), "args": args, "after": "unknown"})
	if err != nil {
		w.t.Fatal(err)
	}
	in, err := matcher.ParseIntent(b)
	if err != nil {
		w.t.Fatalf("%v\n%s", err, b)
	}
	return in
}

func (w *world) transfer(from principal.Principal, to icrc3.Account, amount uint64, memo []byte) sent {
	w.t.Helper()
	st := w.stamp()
	a := icrc1.TransferArg{To: to.ToCandid(), Amount: icrc1.IDLNat(nat(amount)), CreatedAtTime: &st}
	args := map[string]any{"from_subaccount": nil, "to": to.String(), "amount": fmt.Sprint(amount), "fee": nil,
		"memo": nil, "created_at_time": fmt.Sprint(st)}
	if memo != nil {
		a.Memo, args["memo"] = &memo, hex.EncodeToString(memo)
	}
	i, err := w.l.Inner().Transfer(from, a)
	if err != nil {
		w.t.Fatalf("transfer: %v", err)
	}
	w.sync()
	return sent{i, w.intent("icrc1_transfer", from, args)}
}

func (w *world) sync() {
	w.t.Helper()
	if err := w.l.Sync(); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) approve(from, spender principal.Principal, amount uint64) sent {
	w.t.Helper()
	st := w.stamp()
	exp := st + uint64(time.Hour)
	a := icrc1.ApproveArgs{Spender: icrc3.Account{Owner: spender}.ToCandid(), Amount: icrc1.IDLNat(nat(amount)),
		ExpiresAt: &exp, CreatedAtTime: &st}
	i, err := w.l.Inner().Approve(from, a)
	if err != nil {
		w.t.Fatalf("approve: %v", err)
	}
	w.sync()
	return sent{i, w.intent("icrc2_approve", from, map[string]any{"from_subaccount": nil, "spender": spender.Encode(),
		"amount": fmt.Sprint(amount), "expected_allowance": nil, "expires_at": fmt.Sprint(exp), "fee": nil, "memo": nil,
		"created_at_time": fmt.Sprint(st)})}
}

func (w *world) transferFrom(spender, from principal.Principal, to icrc3.Account, amount uint64, fee *uint64) sent {
	w.t.Helper()
	st := w.stamp()
	a := icrc1.TransferFromArgs{From: icrc3.Account{Owner: from}.ToCandid(), To: to.ToCandid(), Amount: icrc1.IDLNat(nat(amount)),
		CreatedAtTime: &st}
	var feeArg any
	if fee != nil {
		a.Fee, feeArg = ptr(icrc1.IDLNat(nat(*fee))), fmt.Sprint(*fee)
	}
	i, err := w.l.Inner().TransferFrom(spender, a)
	if err != nil {
		w.t.Fatalf("transfer_from: %v", err)
	}
	w.sync()
	return sent{i, w.intent("icrc2_transfer_from", spender, map[string]any{"spender_subaccount": nil, "from": from.Encode(),
		"to": to.String(), "amount": fmt.Sprint(amount), "fee": feeArg, "memo": nil, "created_at_time": fmt.Sprint(st)})}
}

func ptr[T any](v T) *T { return &v }

func decide(t *testing.T, e *reconcile.Engine, in *matcher.Intent) reconciled.Verdict {
	t.Helper()
	v, err := e.Decide(context.Background(), in)
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	return v
}

func (w *world) wantFound(e *reconcile.Engine, s sent, kind icrc3.BlockKind) {
	w.t.Helper()
	v := decide(w.t, e, s.intent)
	if v.Status != reconciled.StatusFound || v.Block == nil {
		w.t.Fatalf("%s: %s %+v, want found in block %d", s.intent.Method, v.Status, v.Reason, s.index)
	}
	raw, _ := w.l.RawBlock(s.index)
	h := icp.BlockHash(raw)
	if uint64(v.Block.Index) != s.index || v.Block.Hash != hex.EncodeToString(h[:]) || v.Block.Kind != string(kind) {
		w.t.Fatalf("%s: found %+v, want block %d hash %x kind %s", s.intent.Method, v.Block, s.index, h, kind)
	}
	if v.Evidence == nil || v.Evidence.IndexSource != reconciled.IndexByChainPosition {
		w.t.Fatalf("evidence %+v does not say the index is the chain position", v.Evidence)
	}
}

func TestICPLedgerIntentsFoundInTheirBlocks(t *testing.T) {
	w := newWorld(t)
	minting := w.l.MintingAccount()
	var all []struct {
		s    sent
		kind icrc3.BlockKind
	}
	add := func(s sent, k icrc3.BlockKind) {
		all = append(all, struct {
			s    sent
			kind icrc3.BlockKind
		}{s, k})
	}
	add(w.transfer(alice, icrc3.Account{Owner: carol}, 5_000, []byte("inv-1")), icrc3.BlockTransfer)
	add(w.approve(bob, carol, 300_000), icrc3.BlockApprove)
	add(w.transferFrom(carol, bob, icrc3.Account{Owner: alice, Subaccount: make([]byte, 32)}, 20_000, ptr(uint64(10_000))), icrc3.BlockTransferFrom)
	add(w.transfer(minting.Owner, icrc3.Account{Owner: carol}, 77_000, nil), icrc3.BlockMint)
	add(w.transfer(alice, minting, 40_000, []byte{1}), icrc3.BlockBurn)
	add(w.transferFrom(carol, bob, minting, 30_000, nil), icrc3.BlockBurn)
	for i := 0; i < 10; i++ {
		add(w.transfer(bob, icrc3.Account{Owner: alice}, uint64(100+i), nil), icrc3.BlockTransfer)
	}
	if len(w.l.Archives()) < 2 {
		t.Fatalf("archives %+v: the walk must cross several", w.l.Archives())
	}
	e := w.engine()
	for _, c := range all {
		w.wantFound(e, c.s, c.kind)
	}
	// A fresh engine finds the oldest first: the walk goes down through
	// every archive.
	w.wantFound(w.engine(), all[0].s, all[0].kind)

	// On the daemon's SQLite cache, and again from it after a restart.
	st, err := store.Open(context.Background(), t.TempDir()+"/recon.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range all {
		w.wantFound(w.engineOn(st), c.s, c.kind)
	}
	w.wantFound(w.engineOn(st), all[2].s, all[2].kind)
}

func TestICPLedgerNeverSentIsNotYetThenAbsent(t *testing.T) {
	w := newWorld(t)
	w.transfer(alice, icrc3.Account{Owner: carol}, 5_000, nil)
	st := w.stamp()
	never := w.intent("icrc1_transfer", alice, map[string]any{"from_subaccount": nil, "to": icrc3.Account{Owner: carol}.String(),
		"amount": "5000", "fee": nil, "memo": nil, "created_at_time": fmt.Sprint(st)})
	e := w.engine()
	if v := decide(t, e, never); v.Status != reconciled.StatusNotYet {
		t.Fatalf("window open: %s %+v, want not_yet", v.Status, v.Reason)
	}
	w.srv.Advance(25 * time.Hour)
	w.transfer(bob, icrc3.Account{Owner: carol}, 1, nil)
	v := decide(t, e, never)
	if v.Status != reconciled.StatusAbsent {
		t.Fatalf("window closed in certified time: %s %+v, want absent", v.Status, v.Reason)
	}
}

func TestICPLedgerFaultsAreUnreadable(t *testing.T) {
	w := newWorld(t)
	first := w.transfer(alice, icrc3.Account{Owner: carol}, 5_000, nil)
	for i := 0; i < 12; i++ {
		w.transfer(bob, icrc3.Account{Owner: alice}, uint64(100+i), nil)
	}
	last := w.transfer(alice, icrc3.Account{Owner: carol}, 6_000, nil)
	arch := w.l.Archives()
	if len(arch) == 0 || arch[0].Start != 0 {
		t.Fatalf("archives %+v", arch)
	}
	cases := []struct {
		name   string
		id     principal.Principal
		f      ledgertest.Faults
		target sent
		code   string
	}{
		{"a node alters a ledger block", w.l.ID(), ledgertest.Faults{AlterBlock: last.index + 1}, last, "E_CHAIN"},
		{"a node omits a ledger block", w.l.ID(), ledgertest.Faults{OmitBlock: last.index + 1}, last, "E_CHAIN"},
		{"an archive node alters a block", arch[0].ID, ledgertest.Faults{AlterBlock: first.index + 1}, first, "E_CHAIN"},
		{"a wrong-key certificate", w.l.ID(), ledgertest.Faults{WrongKey: true}, last, "E_CERTIFICATE"},
		{"an archive down", arch[0].ID, ledgertest.Faults{Unreachable: true}, first, "E_ARCHIVE_UNREACHABLE"},
		{"another canister's certificate", w.l.ID(), ledgertest.Faults{ForeignCertificate: true}, last, "E_CERTIFICATE"},
		{"a stale certificate", w.l.ID(), ledgertest.Faults{StaleTime: time.Hour}, last, "E_STALE_CERTIFICATE"},
		{"garbage replies", w.l.ID(), ledgertest.Faults{Garbage: "candid"}, last, "E_DECODE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w.srv.SetFaults(c.id, c.f)
			defer w.srv.SetFaults(c.id, ledgertest.Faults{})
			v := decide(t, w.engine(), c.target.intent)
			if v.Status != reconciled.StatusUnreadable || v.Reason == nil || v.Reason.Code != c.code {
				t.Fatalf("%s %+v, want unreadable %s", v.Status, v.Reason, c.code)
			}
		})
	}
	// Healthy again: found.
	w.wantFound(w.engine(), first, icrc3.BlockTransfer)
}

func TestDetectTellsTheICPLedgerByItsEndpoints(t *testing.T) {
	w := newWorld(t)
	ok, err := icphistory.IsICP(context.Background(), w.client.Conn)
	if err != nil || !ok {
		t.Fatalf("ICP ledger: %v %v", ok, err)
	}
	icrc, err := w.srv.NewLedger(ledgertest.LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ag, _ := w.srv.NewAgent(nil)
	c, err := icrc3history.NewClient(icrc3history.ClientConfig{Agent: ag, Ledger: icrc.ID(), RootKey: w.srv.RootKey()})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := icphistory.IsICP(context.Background(), c.Conn); err != nil || ok {
		t.Fatalf("ICRC ledger read as ICP: %v %v", ok, err)
	}
	fam := family.Choose(w.client)
	f, err := fam.Detect(context.Background())
	if err != nil || f.MintingAccount == nil || !f.MintingAccount.Equal(w.l.MintingAccount()) || f.PageSize != icphistory.Page || !fam.IsICPLedger() {
		t.Fatalf("features %+v %v", f, err)
	}
	other := family.Choose(c)
	if f, err := other.Detect(context.Background()); err != nil || other.IsICPLedger() || f.PageSize == icphistory.Page && !f.LegacyBlocks {
		t.Fatalf("ICRC ledger through Choose: %+v %v", f, err)
	}
}

func TestEmptyICPLedgerClosesWindowsOnCertifiedTime(t *testing.T) {
	tw := testworld.New(t, testworld.Options{Seed: 16, ICP: true, Client: &icrc3history.ClientConfig{}, ReplicaClock: true})
	srv := tw.Server
	w := &world{t: t, srv: srv, l: tw.ICP, client: tw.Client}
	never := w.intent("icrc1_transfer", alice, map[string]any{"from_subaccount": nil, "to": icrc3.Account{Owner: carol}.String(),
		"amount": "5", "fee": nil, "memo": nil, "created_at_time": fmt.Sprint(srv.Now())})
	e := w.engine()
	if v := decide(t, e, never); v.Status != reconciled.StatusNotYet {
		t.Fatalf("empty ledger, window open: %s %+v", v.Status, v.Reason)
	}
	srv.Advance(25 * time.Hour)
	if v := decide(t, e, never); v.Status != reconciled.StatusAbsent {
		t.Fatalf("empty ledger, window closed: %s %+v", v.Status, v.Reason)
	}
}

// Without the family choice the daemon read every ledger as ICRC-3: an
// ICP ledger intent was unreadable (E_UNSUPPORTED) for ever. Through
// Choose the same intent is found.
func TestICPLedgerNeedsItsOwnFamily(t *testing.T) {
	w := newWorld(t)
	s := w.transfer(alice, icrc3.Account{Owner: carol}, 5_000, nil)
	icrcOnly := reconcile.NewEngine(func(string) (reconcile.History, reconcile.LedgerConfig, error) {
		return w.client, reconcile.LedgerConfig{}, nil
	}, reconcile.NewMemCache(), nil)
	if v := decide(t, icrcOnly, s.intent); v.Status != reconciled.StatusUnreadable || v.Reason == nil || v.Reason.Code != "E_UNSUPPORTED" {
		t.Fatalf("read as ICRC-3: %s %+v, want unreadable E_UNSUPPORTED", v.Status, v.Reason)
	}
	w.wantFound(w.engine(), s, icrc3.BlockTransfer)
}

// A replica behind the ledger answers with a shorter chain whose last hash
// it certifies: read fresh, it is an older prefix (the newest transfer not
// yet); read by an engine that verified further, it is a lagging replica,
// not a history change, and what was verified stays found.
func TestLaggingICPReplicaIsAnOlderPrefix(t *testing.T) {
	w := newWorld(t)
	first := w.transfer(alice, icrc3.Account{Owner: carol}, 5_000, nil)
	for i := range 4 {
		w.transfer(bob, icrc3.Account{Owner: alice}, uint64(100+i), nil)
	}
	last := w.transfer(alice, icrc3.Account{Owner: carol}, 6_000, nil)
	warm := w.engine()
	w.wantFound(warm, last, icrc3.BlockTransfer)

	const lag = 3
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{LagBlocks: lag})
	defer w.srv.SetFaults(w.l.ID(), ledgertest.Faults{})
	tipWant := w.l.Len() - lag - 1
	v := decide(t, w.engine(), last.intent)
	if v.Status != reconciled.StatusNotYet || v.Evidence == nil || v.Evidence.TipIndex == nil || uint64(*v.Evidence.TipIndex) != tipWant {
		t.Fatalf("fresh engine under a lagging replica: %s %+v, evidence %+v; want not_yet at tip %d", v.Status, v.Reason, v.Evidence, tipWant)
	}
	raw, _ := w.l.RawBlock(tipWant)
	if h := icp.BlockHash(raw); v.Evidence.TipHash != hex.EncodeToString(h[:]) {
		t.Fatalf("tip hash %s, want the hash of block %d %x", v.Evidence.TipHash, tipWant, h)
	}
	w.wantFound(w.engine(), first, icrc3.BlockTransfer)

	v = decide(t, warm, last.intent)
	if v.Status != reconciled.StatusFound || v.Evidence.HistoryChanged != nil {
		t.Fatalf("warm engine under a lagging replica: %s %+v, history change %+v; want found, no change", v.Status, v.Reason, v.Evidence.HistoryChanged)
	}
}

// A walk down through an archive asks the archive for each page straight
// away once it has seen the archive hold the blocks above: the ledger names
// an archive only for the blocks a query asked about, so asking it first
// would put a serial round trip before every archived page.
func TestWalkThroughArchiveAsksTheArchiveDirectly(t *testing.T) {
	w := newWorldArchiving(t, 4_000, 3_000, 30_000)
	first := w.transfer(alice, icrc3.Account{Owner: carol}, 5_000, nil)
	if err := w.l.Inner().GenerateHistory(40_000, 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := w.l.Sync(); err != nil {
		t.Fatal(err)
	}
	arch := w.l.Archives()
	if len(arch) < 2 {
		t.Fatalf("want at least two archives, got %+v", arch)
	}
	before := w.client.Stats()
	w.wantFound(w.engine(), first, icrc3.BlockTransfer)
	after := w.client.Stats()
	ledgerQ := after.Queries["ledger:query_encoded_blocks"] - before.Queries["ledger:query_encoded_blocks"]
	archiveQ := after.Queries["archive:get_encoded_blocks"] - before.Queries["archive:get_encoded_blocks"]
	pages := (w.l.Len() + icphistory.Page - 1) / icphistory.Page
	// The tip and family probe, the first batch (2 pages in flight), and
	// at most one ledger query where the walk crosses into each archive.
	if limit := uint64(2 + 2 + len(arch)); ledgerQ > limit {
		t.Fatalf("%d ledger and %d archive page queries for %d pages through %d archives; want at most %d of the ledger", ledgerQ, archiveQ, pages, len(arch), limit)
	}
}

// The family probe's reply, a verified query_encoded_blocks(0, 0), serves
// as the first tip: a ledger's first decision saves a round trip. A tip
// asked for later reads afresh.
func TestFamilyProbeServesTheFirstTip(t *testing.T) {
	w := newWorld(t)
	w.transfer(alice, icrc3.Account{Owner: carol}, 5_000, []byte("inv-1"))
	queries := func() uint64 { return w.srv.Stats().Queries(w.l.ID(), "query_encoded_blocks") }
	f := family.Choose(w.client)
	before := queries()
	tip, err := f.Tip(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := queries() - before; n != 1 {
		t.Fatalf("a cold tip cost %d query_encoded_blocks queries, want 1 (the family probe's)", n)
	}
	if want := w.l.Len() - 1; tip.Index != want {
		t.Fatalf("tip %d, want %d", tip.Index, want)
	}
	before = queries()
	if _, err := f.Tip(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := queries() - before; n != 1 {
		t.Fatalf("a second tip cost %d queries, want 1 (read afresh)", n)
	}
}

// TestICPMintAfterNonReplicatedMintingReject: one node answers the
// icrc1_minting_account call (and query) of the ICP ledger saying the
// method does not exist. No certificate backs it: the mint intent is not
// final while the minting account is unknown, and is found once the
// subnet answers.
func TestICPMintAfterNonReplicatedMintingReject(t *testing.T) {
	w := newWorld(t)
	minting := w.l.MintingAccount()
	mint := w.transfer(minting.Owner, icrc3.Account{Owner: carol}, 77_000, nil)
	e := w.engine()
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{RejectMethod: "icrc1_minting_account"})
	if v := decide(t, e, mint.intent); v.Final {
		t.Fatalf("minting account only denied by one node: final %s %+v", v.Status, v.Reason)
	}
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{})
	w.wantFound(e, mint, icrc3.BlockMint)
}

// TestICPLedgerStoppedAtFirstProbeIsReadLater: the ledger rejects
// query_encoded_blocks once (stopped for an upgrade) when its family is
// first asked. The reject settles nothing: the intent is unreadable, not
// final, and is found once the ledger serves the method again.
func TestICPLedgerStoppedAtFirstProbeIsReadLater(t *testing.T) {
	w := newWorld(t)
	s := w.transfer(alice, icrc3.Account{Owner: carol}, 5_000, nil)
	e := w.engine()
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{RejectMethod: "query_encoded_blocks", RejectAs: "stopped"})
	if v := decide(t, e, s.intent); v.Final || v.Status != reconciled.StatusUnreadable {
		t.Fatalf("ledger stopped: %s final=%v %+v, want unreadable, not final", v.Status, v.Final, v.Reason)
	}
	w.srv.SetFaults(w.l.ID(), ledgertest.Faults{})
	w.srv.Advance(5 * time.Minute)
	w.wantFound(e, s, icrc3.BlockTransfer)
}
