// Package js_test runs the TypeScript client's own tests (type check, then
// Node's test runner against the real daemon and the test replica) as part
// of `go test ./...`, and keeps the client's cross-language vectors equal to
// what the Go code computes.
package js_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/internal/testtool"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

var update = flag.Bool("update", false, "rewrite test/vectors.json from the Go code")

const vectorsFile = "test/vectors.json"

type principalVector struct {
	Hex  string `json:"hex"`
	Text string `json:"text"`
}

type accountVector struct {
	Owner      string  `json:"owner"`
	Subaccount *string `json:"subaccount"`
	Text       string  `json:"text"`
}

type intentVector struct {
	Name string `json:"name"`
	Body string `json:"body"`
	// Hash is the daemon's intent_hash of Body when it parses, else "".
	Hash     string `json:"hash"`
	BodyHash string `json:"body_hash"`
	Error    string `json:"error,omitempty"`
}

type vectors struct {
	Principals []principalVector `json:"principals"`
	Accounts   []accountVector   `json:"accounts"`
	Intents    []intentVector    `json:"intents"`
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// generate computes every vector with the daemon's own code.
func generate(t *testing.T) vectors {
	t.Helper()
	r := rand.New(rand.NewPCG(18, 2026))
	var v vectors
	raws := [][]byte{{}, {0x04}, {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x01}}
	for n := 1; n <= 29; n++ {
		raws = append(raws, randBytes(r, n))
	}
	for _, raw := range raws {
		p := principal.Principal{Raw: raw}
		v.Principals = append(v.Principals, principalVector{Hex: hex.EncodeToString(raw), Text: p.Encode()})
	}
	owners := [][]byte{randBytes(r, 29), randBytes(r, 10), {0x04}}
	subs := [][]byte{nil, make([]byte, 32), randBytes(r, 32)}
	lead := make([]byte, 32)
	lead[31] = 1
	subs = append(subs, lead)
	lead2 := randBytes(r, 32)
	lead2[0], lead2[1] = 0, 0x0f
	subs = append(subs, lead2)
	for _, o := range owners {
		for _, s := range subs {
			a := icrc3.Account{Owner: principal.Principal{Raw: o}, Subaccount: s}
			av := accountVector{Owner: principal.Principal{Raw: o}.Encode(), Text: a.String()}
			if s != nil {
				h := hex.EncodeToString(s)
				av.Subaccount = &h
			}
			v.Accounts = append(v.Accounts, av)
		}
	}

	caller := principal.Principal{Raw: owners[0]}.Encode()
	ledger := principal.Principal{Raw: []byte{0, 0, 0, 0, 2, 0x30, 0, 6, 1, 1}}.Encode()
	to := v.Accounts[2].Text // an account with a random subaccount
	sub := hex.EncodeToString(subs[2])
	stamp := uint64(1_791_547_201_000_000_000)
	toAcct, err := icrc3.ParseAccount(to)
	if err != nil {
		t.Fatal(err)
	}
	memo := []byte("lunch")
	argHex, err := candid.Marshal([]any{icrc1.TransferArg{To: toAcct.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(150_000_000)), Memo: &memo, CreatedAtTime: &stamp}})
	if err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf(`"canister_id":%q,"caller":%q`, ledger, caller)
	bodies := []struct{ name, body string }{
		{"transfer, README form", `{"intent_id":"p1-3f2a",` + head + `,"method":"icrc1_transfer","args":{"from_subaccount":null,"to":"` + to + `","amount":"150000000","fee":null,"memo":"6c756e6368","created_at_time":"1791547201000000000"},"after":"Err.TooOld"}`},
		{"transfer, optional keys left out, other order", `{"args":{"created_at_time":"1791547201000000000","amount":"150000000","to":"` + to + `","memo":"6c756e6368"},"method":"icrc1_transfer",` + head + `,"intent_id":"p1-3f2a"}`},
		{"transfer, after differs (not hashed)", `{"intent_id":"p1-3f2a",` + head + `,"method":"icrc1_transfer","args":{"to":"` + to + `","amount":"150000000","memo":"6c756e6368","created_at_time":"1791547201000000000"},"after":"unknown"}`},
		{"transfer with arg_hex", `{"intent_id":"x",` + head + `,"method":"icrc1_transfer","args":{"to":"` + to + `","amount":"150000000","memo":"6c756e6368","created_at_time":"1791547201000000000"},"arg_hex":"` + hex.EncodeToString(argHex) + `"}`},
		{"transfer, empty memo, fee, subaccount, expiry, huge amount", `{"intent_id":"A_b-9",` + head + `,"method":"icrc1_transfer","args":{"from_subaccount":"` + sub + `","to":"` + caller + `","amount":"340282366920938463463374607431768211455","fee":"10000","memo":"","created_at_time":"1"},"ingress_expiry":"1791547501000000000"}`},
		{"transfer_from", `{"intent_id":"tf-1",` + head + `,"method":"icrc2_transfer_from","args":{"spender_subaccount":"` + hex.EncodeToString(make([]byte, 32)) + `","from":"` + v.Accounts[3].Text + `","to":"` + to + `","amount":"0","fee":null,"memo":null,"created_at_time":"` + fmt.Sprint(matcher.MaxStamp) + `"}}`},
		{"approve", `{"intent_id":"ap-1",` + head + `,"method":"icrc2_approve","args":{"from_subaccount":null,"spender":"` + v.Accounts[4].Text + `","amount":"5","expected_allowance":"0","expires_at":"1791547201000000001","fee":"10","memo":"00","created_at_time":"1791547201000000000"},"after":"Err.TemporarilyUnavailable"}`},
		{"stamp past the latest", `{"intent_id":"late",` + head + `,"method":"icrc1_transfer","args":{"to":"` + to + `","amount":"1","created_at_time":"18446744073709551615"}}`},
		{"memo over the bound", `{"intent_id":"long",` + head + `,"method":"icrc1_transfer","args":{"to":"` + to + `","amount":"1","memo":"` + strings.Repeat("ab", matcher.MaxMemoBytes+1) + `","created_at_time":"5"}}`},
		{"ingress_expiry 0", `{"intent_id":"exp0",` + head + `,"method":"icrc1_transfer","args":{"to":"` + to + `","amount":"1","created_at_time":"5"},"ingress_expiry":"0"}`},
		{"no stamp", `{"intent_id":"ns",` + head + `,"method":"icrc1_transfer","args":{"to":"` + to + `","amount":"1"}}`},
		{"arg_hex disagrees", `{"intent_id":"x",` + head + `,"method":"icrc1_transfer","args":{"to":"` + to + `","amount":"150000001","memo":"6c756e6368","created_at_time":"1791547201000000000"},"arg_hex":"` + hex.EncodeToString(argHex) + `"}`},
		{"not JSON", `{"intent_id":"broken",`},
	}
	for _, b := range bodies {
		iv := intentVector{Name: b.name, Body: b.body}
		sum := sha256.Sum256([]byte(b.body))
		iv.BodyHash = hex.EncodeToString(sum[:])
		in, err := matcher.ParseIntent([]byte(b.body))
		if err != nil {
			iv.Error = err.Error()
		} else {
			h := in.Hash()
			iv.Hash = hex.EncodeToString(h[:])
		}
		v.Intents = append(v.Intents, iv)
	}
	return v
}

// TestVectors keeps test/vectors.json, which the TypeScript tests check
// their principal, account and intent-hash code against, equal to the Go
// code's results. Run with -update after a deliberate change.
func TestVectors(t *testing.T) {
	v := generate(t)
	want, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile(vectorsFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what the Go code computes; rerun with -update if the change is deliberate", vectorsFile)
	}
	for _, iv := range v.Intents[:7] {
		if iv.Hash == "" {
			t.Fatalf("vector %q should parse: %s", iv.Name, iv.Error)
		}
	}
	if v.Intents[0].Hash != v.Intents[1].Hash || v.Intents[0].Hash != v.Intents[2].Hash {
		t.Fatal("the same intent spelt three ways must hash the same")
	}
}

// TestLockfileExact checks that npm ci installs exact, integrity-pinned
// versions and that no committed package file names a registry: every
// tarball is fetched from whichever registry the installing machine uses.
func TestLockfileExact(t *testing.T) {
	testtool.CheckLockfile(t, ".")
}

// lookTool finds a tool the client's tests need. In CI a missing one is a
// failure; elsewhere the test is skipped with the reason.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	return testtool.Require(t, "the TypeScript client's tests (Node 20+ and npm)", name)[0]
}

func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s (%s)", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	if testing.Verbose() && out.Len() > 0 {
		t.Log(out.String())
	}
}

func nodeAtLeast20(version string) bool {
	var major int
	_, err := fmt.Sscanf(version, "v%d.", &major)
	return err == nil && major >= 20
}

// copyPackage copies the package's sources and README (not node_modules or
// build output) into dir, so the test installs and builds outside the source tree.
func copyPackage(t *testing.T, dir string) {
	t.Helper()
	keep := map[string]bool{"package.json": true, "package-lock.json": true, "tsconfig.json": true, "tsconfig.test.json": true, "README.md": true}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		top := strings.Split(filepath.ToSlash(p), "/")[0]
		if d.IsDir() {
			if p == "." || top == "src" || top == "test" {
				return nil
			}
			return filepath.SkipDir
		}
		if !keep[p] && top != "src" && top != "test" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestClient installs the client from its lockfile, type-checks and builds
// it, and runs its tests with Node's test runner: the end-to-end ones start
// `reconciled-dev testledger` and `reconciled serve` (built here) on loopback.
func TestClient(t *testing.T) {
	node := lookTool(t, "node")
	npm := lookTool(t, "npm")
	if v, err := exec.Command(node, "--version").Output(); err != nil || !nodeAtLeast20(strings.TrimSpace(string(v))) {
		testtool.Unavailable(t, fmt.Sprintf("the TypeScript client needs Node 20 or later; %s --version: %q %v", node, v, err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	bin := t.TempDir()
	reconciled := filepath.Join(bin, "reconciled")
	dev := filepath.Join(bin, "reconciled-dev")
	payer := filepath.Join(bin, "payer")
	run(t, ctx, ".", nil, "go", "build", "-o", reconciled, "github.com/reconciled/reconciled/cmd/reconciled")
	run(t, ctx, ".", nil, "go", "build", "-o", dev, "github.com/reconciled/reconciled/cmd/reconciled-dev")
	run(t, ctx, ".", nil, "go", "build", "-o", payer, "./testdata/payer")

	pkg := t.TempDir()
	copyPackage(t, pkg)
	npmEnv := []string{"npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false"}
	run(t, ctx, pkg, npmEnv, npm, "ci", "--prefer-offline")
	tsc := filepath.Join(pkg, "node_modules", ".bin", "tsc")
	run(t, ctx, pkg, nil, tsc, "-p", "tsconfig.json")
	run(t, ctx, pkg, nil, tsc, "-p", "tsconfig.test.json")

	files, err := filepath.Glob(filepath.Join(pkg, "build", "test", "*.test.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no compiled tests under build/test (%v)", err)
	}
	env := []string{"CLIENT_TEST_DAEMON_BIN=" + reconciled, "CLIENT_TEST_DEV_BIN=" + dev, "CLIENT_TEST_PAYER_BIN=" + payer}
	run(t, ctx, pkg, env, node, append([]string{"--test", "--test-reporter=spec"}, files...)...)
}

// tsConst reads `const NAME = <expr>;` from a source file of the client,
// where expr is a decimal number or `a << b`.
func tsConst(t *testing.T, file, name string) int {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^(?:export )?const ` + name + ` = (\d+)(?: << (\d+))?;`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s: no `const %s = <number>;`", file, name)
	}
	n, _ := strconv.Atoi(string(m[1]))
	if len(m[2]) > 0 {
		shift, _ := strconv.Atoi(string(m[2]))
		n <<= shift
	}
	return n
}

// The client refuses what the fleet refuses, with the very limit of the Go
// code, and hashes a body as the daemon's parser would.
func TestIntentSizeLimits(t *testing.T) {
	if got := tsConst(t, "src/intent.ts", "MAX_INTENT_BYTES"); got != queue.MaxIntentBytes {
		t.Errorf("src/intent.ts MAX_INTENT_BYTES = %d, the fleet's limit (queue.MaxIntentBytes) is %d", got, queue.MaxIntentBytes)
	}
	if got := tsConst(t, "src/intent.ts", "MAX_PARSED_BYTES"); got != matcher.MaxIntentBytes {
		t.Errorf("src/intent.ts MAX_PARSED_BYTES = %d, the daemon's parser reads up to %d (matcher.MaxIntentBytes)", got, matcher.MaxIntentBytes)
	}
}
