// Package conformance_test drives the test replica with DFINITY's own
// clients — @dfinity/agent (JavaScript) and the icp CLI (Rust ic-agent),
// installed from npm at the versions pinned in package-lock.json — and with
// agent-go, through the same steps: verified queries, updates, Duplicate
// with the original index, approve/transfer_from by a second identity,
// archived blocks through the callback, the tip certificate, TooOld after
// an advance of the clock and the same agents working afterwards.
//
// Without node and npm the tests skip, except under CI=true, where they fail.
package conformance_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/identity"
	"github.com/aviate-labs/agent-go/leb128"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/fxamacker/cbor/v2"

	"github.com/reconciled/reconciled/icagent"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/internal/testtool"
	"github.com/reconciled/reconciled/ledgertest"
)

// project is the npm project, installed once per test binary.
var project struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if project.dir != "" {
		os.RemoveAll(project.dir)
	}
	os.Exit(code)
}

// requireTools fails under CI=true and skips elsewhere when a tool is missing.
func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	testtool.Require(t, "the peer conformance suite", tools...)
}

// npmProject copies package.json, the lockfile and the tests into a
// temporary directory and installs exactly the locked packages there.
func npmProject(t *testing.T) string {
	t.Helper()
	requireTools(t, "node", "npm")
	project.once.Do(func() {
		dir, err := os.MkdirTemp("", "ledgertest-conformance-")
		if err != nil {
			project.err = err
			return
		}
		project.dir = dir
		files, _ := filepath.Glob("*.mjs")
		if project.err = testtool.CopyFiles(dir, ".", append([]string{"package.json", "package-lock.json"}, files...)...); project.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		project.err = testtool.NPMCI(ctx, dir)
	})
	if project.err != nil {
		t.Fatal(project.err)
	}
	return project.dir
}

// TestLockfile: every dependency is pinned exactly, the lockfile records
// integrity hashes, and no registry location is committed.
func TestLockfile(t *testing.T) {
	testtool.CheckLockfile(t, ".")
}

// replica is a replica with one ledger whose oldest blocks are archived.
func replica(t *testing.T, seed int64) (*ledgertest.Server, *ledgertest.Ledger) {
	t.Helper()
	s, err := ledgertest.NewServer(ledgertest.WithAdmin(), ledgertest.WithSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	l, err := s.NewLedger(ledgertest.LedgerConfig{ArchiveThreshold: 20, ArchiveBatch: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.GenerateHistory(30, seed, time.Hour); err != nil {
		t.Fatal(err)
	}
	if len(l.Archives()) == 0 {
		t.Fatal("no archive")
	}
	return s, l
}

// pastWindow is an advance past the default transaction window plus drift.
const pastWindow = 24*time.Hour + 2*time.Minute + time.Hour

func TestAgentJS(t *testing.T) {
	dir := npmProject(t)
	s, l := replica(t, 21)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "agent-js.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REPLICA_URL="+s.URL(), "LEDGER_ID="+l.ID().Encode(), "NO_PROXY=127.0.0.1")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test agent-js.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("agent-js conformance: %v", err)
	}
}

// icpCLI runs DFINITY's icp CLI from the npm project with a scratch HOME,
// telemetry and update checks off, and every proxy variable pointing at a
// closed loopback port so that nothing it might send leaves the machine.
type icpCLI struct {
	t    *testing.T
	bin  string
	home string
	net  []string // -n URL -k ROOT_KEY
}

func newICPCLI(t *testing.T, s *ledgertest.Server) *icpCLI {
	dir := npmProject(t)
	c := &icpCLI{t: t, bin: filepath.Join(dir, "node_modules", "@icp-sdk", "icp-cli-linux-x64", "bin", "icp"), home: t.TempDir(),
		net: []string{"-n", s.URL(), "-k", hex.EncodeToString(s.RootKey())}}
	c.run("settings", "telemetry", "false")
	c.run("settings", "update-check", "false")
	return c
}

func (c *icpCLI) env() []string {
	sink := "http://127.0.0.1:9"
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + c.home,
		"DO_NOT_TRACK=1", "ICP_TELEMETRY_DISABLED=1",
		"HTTP_PROXY=" + sink, "HTTPS_PROXY=" + sink, "ALL_PROXY=" + sink,
		"http_proxy=" + sink, "https_proxy=" + sink, "all_proxy=" + sink,
		"NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1",
	}
}

func (c *icpCLI) run(args ...string) string {
	c.t.Helper()
	out, err := c.try(args...)
	if err != nil {
		c.t.Fatalf("icp %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *icpCLI) try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = c.env()
	cmd.Dir = c.home
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return strings.TrimSpace(stdout.String()), nil
}

// call is `icp canister call` against the replica; the CLI reads the
// method's types from the canister's candid:service metadata.
func (c *icpCLI) call(id principal.Principal, identity, method, arg string, query bool) string {
	c.t.Helper()
	args := append([]string{"canister", "call", id.Encode(), method, arg, "--identity", identity}, c.net...)
	if query {
		args = append(args, "--query")
	}
	return strings.ReplaceAll(c.run(args...), "_", "")
}

var (
	okRE        = regexp.MustCompile(`variant \{ Ok = (\d+) : nat \}`)
	natRE       = regexp.MustCompile(`^\((\d+) : nat\)$`)
	callbackRE  = regexp.MustCompile(`callback = func "([a-z0-9-]+)"\.icrc3getblocks`)
	blockIDRE   = regexp.MustCompile(`id = (\d+) : nat`)
	duplicateRE = regexp.MustCompile(`Duplicate = record \{ duplicateof = (\d+) : nat \}`)
)

func match(t *testing.T, re *regexp.Regexp, out, what string) string {
	t.Helper()
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: %q does not match %s", what, out, re)
	}
	return m[1]
}

func TestICPCLI(t *testing.T) {
	s, l := replica(t, 22)
	icp := newICPCLI(t, s)
	// icp's default identities are secp256k1 keys.
	icp.run("identity", "new", "alice", "--storage", "plaintext", "--quiet")
	icp.run("identity", "new", "bob", "--storage", "plaintext", "--quiet")
	alice := principal.MustDecode(icp.run("identity", "principal", "--identity", "alice"))
	bob := principal.MustDecode(icp.run("identity", "principal", "--identity", "bob"))
	if _, err := l.Mint(icrc3.Account{Owner: alice}, icrc3.NatFromUint64(10_000_000)); err != nil {
		t.Fatal(err)
	}
	balanceOf := func(p principal.Principal) string {
		return match(t, natRE, icp.call(l.ID(), "bob", "icrc1_balance_of", fmt.Sprintf(`(record { owner = principal "%s" })`, p), true), "balance")
	}

	t.Run("verified query on v3", func(t *testing.T) {
		before := s.Stats().ReadStates(l.ID())
		if got := balanceOf(alice); got != "10000000" {
			t.Fatalf("balance %s", got)
		}
		// ic-agent verifies query signatures with the subnet's node keys,
		// which it reads through read_state.
		if s.Stats().ReadStates(l.ID()) == before {
			t.Fatal("no read_state: the query signature was not verified")
		}
	})
	stamp := s.Now()
	transfer := fmt.Sprintf(`(record { to = record { owner = principal "%s" }; amount = 150000 : nat; memo = opt blob "conformance"; created_at_time = opt (%d : nat64) })`, bob, stamp)
	var first string
	t.Run("update and Duplicate", func(t *testing.T) {
		first = match(t, okRE, icp.call(l.ID(), "alice", "icrc1_transfer", transfer, false), "transfer")
		dup := match(t, duplicateRE, icp.call(l.ID(), "alice", "icrc1_transfer", transfer, false), "duplicate")
		if dup != first {
			t.Fatalf("duplicate_of %s, want %s", dup, first)
		}
		out := icp.run(append([]string{"token", l.ID().Encode(), "transfer", "0.001", bob.Encode(), "--identity", "alice"}, icp.net...)...)
		if !strings.Contains(out, "Transferred 0.00100000 TST") {
			t.Fatalf("icp token transfer: %s", out)
		}
	})
	t.Run("approve and transfer_from by a second identity", func(t *testing.T) {
		match(t, okRE, icp.call(l.ID(), "alice", "icrc2_approve", fmt.Sprintf(`(record { spender = record { owner = principal "%s" }; amount = 500000 : nat })`, bob), false), "approve")
		carol := principal.NewSelfAuthenticating([]byte("carol"))
		match(t, okRE, icp.call(l.ID(), "bob", "icrc2_transfer_from", fmt.Sprintf(`(record { from = record { owner = principal "%s" }; to = record { owner = principal "%s" }; amount = 200000 : nat })`, alice, carol), false), "transfer_from")
		if got := balanceOf(carol); got != "200000" {
			t.Fatalf("carol's balance %s", got)
		}
	})
	t.Run("archived blocks through the callback", func(t *testing.T) {
		out := icp.call(l.ID(), "alice", "icrc3_get_blocks", `(vec { record { start = 0 : nat; length = 5 : nat } })`, true)
		archive := principal.MustDecode(match(t, callbackRE, out, "archived_blocks callback"))
		got := icp.call(archive, "alice", "icrc3_get_blocks", `(vec { record { start = 0 : nat; length = 5 : nat } })`, true)
		ids := blockIDRE.FindAllStringSubmatch(got, -1)
		if len(ids) != 5 || ids[0][1] != "0" || ids[4][1] != "4" {
			t.Fatalf("archive blocks: %s", got)
		}
	})
	t.Run("tip certificate", func(t *testing.T) {
		// The CLI fetches the tip through a query whose node signature
		// ic-agent verifies; it has no command that verifies a data
		// certificate, so the certificate it received is verified here.
		out := icp.run(append([]string{"canister", "call", l.ID().Encode(), "icrc3_get_tip_certificate", "()", "--query", "--output", "hex", "--identity", "alice"}, icp.net...)...)
		raw, err := hex.DecodeString(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("hex reply %q: %v", out, err)
		}
		var tip *struct {
			Certificate []byte `ic:"certificate"`
			HashTree    []byte `ic:"hash_tree"`
		}
		if err := candid.Unmarshal(raw, []any{&tip}); err != nil || tip == nil {
			t.Fatalf("tip reply: %v", err)
		}
		got, err := icagent.VerifyTipCertificate(l.ID(), s.RootKey(), tip.Certificate, tip.HashTree, 5*time.Minute, time.Unix(0, int64(s.Now())))
		if err != nil || got.Index != l.Len()-1 || got.Hash != l.TipHash() {
			t.Fatalf("tip %+v, %v; want index %d", got, err, l.Len()-1)
		}
	})
	t.Run("TooOld after an advance, and the same identities keep working", func(t *testing.T) {
		s.Advance(pastWindow)
		if out := icp.call(l.ID(), "alice", "icrc1_transfer", transfer, false); !strings.Contains(out, "TooOld") {
			t.Fatalf("transfer with the old stamp: %s", out)
		}
		match(t, okRE, icp.call(l.ID(), "alice", "icrc1_transfer", fmt.Sprintf(`(record { to = record { owner = principal "%s" }; amount = 10 : nat; created_at_time = opt (%d : nat64) })`, bob, s.Now()), false), "transfer after the advance")
		match(t, okRE, icp.call(l.ID(), "bob", "icrc2_transfer_from", fmt.Sprintf(`(record { from = record { owner = principal "%s" }; to = record { owner = principal "%s" }; amount = 1000 : nat })`, alice, bob), false), "transfer_from after the advance")
		s.Advance(pastWindow)
		balanceOf(bob)
		match(t, okRE, icp.call(l.ID(), "alice", "icrc1_transfer", fmt.Sprintf(`(record { to = record { owner = principal "%s" }; amount = 10 : nat })`, bob), false), "transfer after a second advance")
	})
}

type getBlocksArg struct {
	Start  idl.Nat `ic:"start"`
	Length idl.Nat `ic:"length"`
}

// getBlocks is icrc3_get_blocks through a verified agent-go query.
func getBlocks(t *testing.T, a *agent.Agent, id principal.Principal, start, length uint64) *icrc3.GetBlocksResult {
	t.Helper()
	arg, err := candid.Marshal([]any{[]getBlocksArg{{idl.NewNat(start), idl.NewNat(length)}}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := a.QueryRaw(id, "icrc3_get_blocks", arg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := icrc3.DecodeGetBlocksResult(raw)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestAgentGo(t *testing.T) {
	s, l := replica(t, 23)
	secp, err := identity.NewRandomSecp256k1Identity()
	if err != nil {
		t.Fatal(err)
	}
	p256, err := identity.NewRandomPrime256v1Identity()
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	ed, err := identity.NewEd25519Identity(edKey.Public().(ed25519.PublicKey), edKey)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]identity.Identity{"alice": ed, "bob": secp, "carol": p256}
	agents := map[string]*agent.Agent{}
	for name, id := range ids {
		if agents[name], err = s.NewAgent(id); err != nil {
			t.Fatal(err)
		}
	}
	alice, bob, carol := ed.Sender(), secp.Sender(), p256.Sender()
	for _, p := range []principal.Principal{alice, carol} {
		if _, err := l.Mint(icrc3.Account{Owner: p}, icrc3.NatFromUint64(10_000_000)); err != nil {
			t.Fatal(err)
		}
	}
	balanceOf := func(who string, p principal.Principal) uint64 {
		t.Helper()
		var n idl.Nat
		if err := agents[who].Query(l.ID(), "icrc1_balance_of", []any{icrc3.CandidAccount{Owner: p}}, []any{&n}); err != nil {
			t.Fatal(err)
		}
		return n.BigInt().Uint64()
	}
	transfer := func(who string, arg icrc1.TransferArg) icrc1.TransferResult {
		t.Helper()
		var r icrc1.TransferResult
		if err := agents[who].Call(l.ID(), "icrc1_transfer", []any{arg}, []any{&r}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	stamp := s.Now()
	memo := []byte("conformance")
	first := icrc1.TransferArg{To: icrc3.CandidAccount{Owner: bob}, Amount: idl.NewNat(uint64(150_000)), Memo: &memo, CreatedAtTime: &stamp}

	t.Run("verified query", func(t *testing.T) {
		before := s.Stats().ReadStates(l.ID())
		if got := balanceOf("bob", alice); got != 10_000_000 {
			t.Fatalf("balance %d", got)
		}
		if s.Stats().ReadStates(l.ID()) == before {
			t.Fatal("no read_state: the query signature was not verified")
		}
	})
	var firstIndex uint64
	t.Run("update and Duplicate", func(t *testing.T) {
		r := transfer("alice", first)
		if r.Ok == nil {
			t.Fatalf("transfer: %+v", r.Err)
		}
		firstIndex = r.Ok.BigInt().Uint64()
		dup := transfer("alice", first)
		if dup.Err == nil || dup.Err.Duplicate == nil || dup.Err.Duplicate.DuplicateOf.BigInt().Uint64() != firstIndex {
			t.Fatalf("repeat: %+v, want Duplicate of %d", dup, firstIndex)
		}
	})
	t.Run("approve and transfer_from by a second identity", func(t *testing.T) {
		var ar icrc1.ApproveResult
		if err := agents["alice"].Call(l.ID(), "icrc2_approve", []any{icrc1.ApproveArgs{Spender: icrc3.CandidAccount{Owner: bob}, Amount: idl.NewNat(uint64(500_000))}}, []any{&ar}); err != nil || ar.Ok == nil {
			t.Fatalf("approve: %v %+v", err, ar.Err)
		}
		var fr icrc1.TransferFromResult
		tf := icrc1.TransferFromArgs{From: icrc3.CandidAccount{Owner: alice}, To: icrc3.CandidAccount{Owner: carol}, Amount: idl.NewNat(uint64(200_000))}
		if err := agents["bob"].Call(l.ID(), "icrc2_transfer_from", []any{tf}, []any{&fr}); err != nil || fr.Ok == nil {
			t.Fatalf("transfer_from: %v %+v", err, fr.Err)
		}
		if got := balanceOf("carol", carol); got != 10_200_000 {
			t.Fatalf("carol's balance %d", got)
		}
	})
	t.Run("archived blocks through the callback", func(t *testing.T) {
		res := getBlocks(t, agents["alice"], l.ID(), 0, 5)
		if len(res.Archived) == 0 || res.Archived[0].Callback.Method != "icrc3_get_blocks" {
			t.Fatalf("archived_blocks %+v", res.Archived)
		}
		cb := res.Archived[0]
		got := getBlocks(t, agents["carol"], cb.Callback.Canister, cb.Args[0].Start, cb.Args[0].Length)
		if len(got.Blocks) != 5 || got.Blocks[0].Index != 0 || got.Blocks[4].Index != 4 {
			t.Fatalf("archive blocks %+v", got.Blocks)
		}
		did, err := agents["carol"].GetCanisterMetadata(cb.Callback.Canister, "candid:service")
		if err != nil || !strings.Contains(string(did), "icrc3_get_blocks") {
			t.Fatalf("archive candid:service: %v", err)
		}
	})
	tipVerified := func(t *testing.T, who string) {
		t.Helper()
		var tip *struct {
			Certificate []byte `ic:"certificate"`
			HashTree    []byte `ic:"hash_tree"`
		}
		if err := agents[who].Query(l.ID(), "icrc3_get_tip_certificate", []any{}, []any{&tip}); err != nil || tip == nil {
			t.Fatalf("tip: %v", err)
		}
		var cert certification.Certificate
		if err := cbor.Unmarshal(tip.Certificate, &cert); err != nil {
			t.Fatal(err)
		}
		tree, err := hashtree.Deserialize(tip.HashTree)
		if err != nil {
			t.Fatal(err)
		}
		root := tree.Reconstruct()
		if err := certification.VerifyCertifiedData(cert, l.ID(), agents[who].GetRootKey(), root[:]); err != nil {
			t.Fatalf("tip certificate: %v", err)
		}
		ht := hashtree.NewHashTree(tree)
		idxRaw, err := ht.Lookup(hashtree.Label("last_block_index"))
		if err != nil {
			t.Fatal(err)
		}
		hash, err := ht.Lookup(hashtree.Label("last_block_hash"))
		if err != nil {
			t.Fatal(err)
		}
		idx, err := leb128.DecodeUnsigned(bytes.NewReader(idxRaw))
		if err != nil {
			t.Fatal(err)
		}
		last := getBlocks(t, agents[who], l.ID(), idx.Uint64(), 1)
		if last.LogLength.Big().Uint64() != idx.Uint64()+1 || len(last.Blocks) != 1 || !bytes.Equal(last.Blocks[0].Hash[:], hash) {
			t.Fatalf("certified tip %d %x does not match the last block", idx, hash)
		}
	}
	t.Run("tip certificate verified by the peer", func(t *testing.T) { tipVerified(t, "alice") })
	t.Run("TooOld after an advance, and the same agents keep working", func(t *testing.T) {
		s.Advance(pastWindow)
		if r := transfer("alice", first); r.Err == nil || r.Err.TooOld == nil {
			t.Fatalf("transfer with the old stamp: %+v", r)
		}
		for round := range 2 {
			for _, who := range []string{"alice", "bob", "carol"} {
				now := s.Now()
				if r := transfer(who, icrc1.TransferArg{To: icrc3.CandidAccount{Owner: carol}, Amount: idl.NewNat(uint64(1)), CreatedAtTime: &now}); r.Ok == nil {
					t.Fatalf("round %d, %s: %+v", round, who, r.Err)
				}
				balanceOf(who, alice)
				tipVerified(t, who)
			}
			s.Advance(pastWindow)
		}
	})
}
