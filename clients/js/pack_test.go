package js_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled/internal/testtool"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

const consumerDir = "testdata/consumer"

// TestConsumerLockfileExact holds the packaging test's project to the same
// rule as the package: exact, integrity-pinned versions, no registry named.
func TestConsumerLockfileExact(t *testing.T) {
	testtool.CheckLockfile(t, consumerDir)
}

var tsBlockRE = regexp.MustCompile("(?s)```ts\n(.*?)```")

// output runs a command in dir and returns its standard output; a failure
// stops the test with everything it printed.
func output(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s (%s)", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestPackedClientInAFreshProject packs the client as a user does from a
// checkout (npm ci, npm pack), installs the tarball into a project of its
// own that depends on the newest @nats-io packages of the client's tested
// peer range, type-checks that project and the README's examples with
// --strict against it, and runs it with this machine's Node (20 in CI);
// then it runs the README's example against a test ledger and a daemon, as
// the README's "Try it" does, and expects its absent answer.
// Every install is from a committed lockfile; the tarball's own install is
// --offline (it has no dependencies of its own, only peers).
func TestPackedClientInAFreshProject(t *testing.T) {
	node := lookTool(t, "node")
	npm := lookTool(t, "npm")
	if v, err := exec.Command(node, "--version").Output(); err != nil || !nodeAtLeast20(strings.TrimSpace(string(v))) {
		testtool.Unavailable(t, fmt.Sprintf("the TypeScript client needs Node 20 or later; %s --version: %q %v", node, v, err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	npmEnv := []string{"npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false"}

	// The package as a checkout has it: no node_modules, no dist.
	pkg := t.TempDir()
	copyPackage(t, pkg)
	run(t, ctx, pkg, npmEnv, npm, "ci", "--prefer-offline")
	packs := t.TempDir()
	run(t, ctx, pkg, npmEnv, npm, "pack", "--pack-destination", packs)
	tarballs, err := filepath.Glob(filepath.Join(packs, "*.tgz"))
	if err != nil || len(tarballs) != 1 {
		t.Fatalf("npm pack made %v (%v), want one tarball", tarballs, err)
	}
	listing := output(t, ctx, packs, nil, "tar", "-tzf", tarballs[0])
	for _, want := range []string{"package/package.json", "package/README.md", "package/dist/index.js", "package/dist/index.d.ts"} {
		if !strings.Contains("\n"+listing, "\n"+want+"\n") {
			t.Errorf("the tarball lacks %s; it holds:\n%s", want, listing)
		}
	}

	// A project of the user's own, with its own NATS packages.
	proj := t.TempDir()
	if err := testtool.CopyFiles(proj, consumerDir, "package.json", "package-lock.json", "tsconfig.json", "index.ts"); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := tsBlockRE.FindAllSubmatch(readme, -1)
	if len(blocks) == 0 {
		t.Fatal("README.md: no ```ts example")
	}
	for i, b := range blocks {
		if err := os.WriteFile(filepath.Join(proj, fmt.Sprintf("readme%d.ts", i+1)), b[1], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, ctx, proj, npmEnv, npm, "ci", "--prefer-offline")
	run(t, ctx, proj, npmEnv, npm, "install", "--prefer-offline", "--no-save", tarballs[0])
	run(t, ctx, proj, nil, filepath.Join(proj, "node_modules", ".bin", "tsc"), "-p", "tsconfig.json", "--strict")
	out := output(t, ctx, proj, nil, node, filepath.Join("dist", "index.js"))
	checkPackedIntent(t, out)

	// The README's example, run as its "Try it" says: against a test
	// ledger and a daemon (on free ports instead of the documented ones).
	natsURL, ledger := startTestDaemon(t, ctx)
	example := filepath.Join(proj, "dist", "readme1.js")
	js, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	const documented = "nats://127.0.0.1:4222"
	if !strings.Contains(string(js), documented) {
		t.Fatalf("the README's example does not connect to %s", documented)
	}
	if err := os.WriteFile(example, []byte(strings.ReplaceAll(string(js), documented, natsURL)), 0o644); err != nil {
		t.Fatal(err)
	}
	got := output(t, ctx, proj, []string{"TESTLEDGER_LEDGER=" + ledger}, node, example)
	if !strings.HasPrefix(got, "it can no longer execute") {
		t.Errorf("the README's example printed %q, want its absent line", got)
	}
}

// startTestDaemon starts `reconciled-dev testledger` and `reconciled serve`
// reading it, with its embedded NATS server on a free loopback port, as
// the README's "Try it" does; it returns the NATS URL and the ledger id.
func startTestDaemon(t *testing.T, ctx context.Context) (natsURL, ledger string) {
	t.Helper()
	dir := t.TempDir()
	bin, dev := filepath.Join(dir, "reconciled"), filepath.Join(dir, "reconciled-dev")
	run(t, ctx, ".", nil, "go", "build", "-o", bin, "github.com/reconciled/reconciled/cmd/reconciled")
	run(t, ctx, ".", nil, "go", "build", "-o", dev, "github.com/reconciled/reconciled/cmd/reconciled-dev")
	start := func(lines func(*bufio.Scanner) error, stderr bool, prog string, args ...string) {
		t.Helper()
		cmd := exec.Command(prog, args...)
		var pipe io.ReadCloser
		var err error
		if stderr {
			pipe, err = cmd.StderrPipe()
		} else {
			pipe, err = cmd.StdoutPipe()
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		sc := bufio.NewScanner(pipe)
		if err := lines(sc); err != nil {
			t.Fatalf("%s %s: %v", filepath.Base(prog), args[0], err)
		}
		go io.Copy(io.Discard, pipe) // keep it writing
	}
	var icURL string
	start(func(sc *bufio.Scanner) error {
		if !sc.Scan() {
			return fmt.Errorf("no ready line: %v", sc.Err())
		}
		var ready struct {
			URL     string `json:"url"`
			Ledgers []struct {
				CanisterID string `json:"canister_id"`
			} `json:"ledgers"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ready); err != nil || len(ready.Ledgers) == 0 {
			return fmt.Errorf("ready line %s: %v", sc.Bytes(), err)
		}
		icURL, ledger = ready.URL, ready.Ledgers[0].CanisterID
		return nil
	}, false, dev, "testledger", "--listen", "127.0.0.1:0")
	start(func(sc *bufio.Scanner) error {
		for sc.Scan() {
			var line struct {
				Msg        string `json:"msg"`
				NATSListen string `json:"nats_listen"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "reconciled serving" {
				natsURL = line.NATSListen
				return nil
			}
		}
		return fmt.Errorf("ended before serving: %v", sc.Err())
	}, true, bin, "serve", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0",
		"--ic-url", icURL, "--fetch-root-key")
	return natsURL, ledger
}

// checkPackedIntent checks what the packaging project printed: the packed
// client's intent, intent_hash and Nats-Msg-Id, as the daemon sees them.
func checkPackedIntent(t *testing.T, out string) {
	t.Helper()

	var got struct {
		Intent     json.RawMessage `json:"intent"`
		IntentHash string          `json:"intent_hash"`
		MsgID      string          `json:"msg_id"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("the project printed %q: %v", out, err)
	}
	in, err := matcher.ParseIntent(got.Intent)
	if err != nil {
		t.Fatalf("the packed client's intent %s does not parse: %v", got.Intent, err)
	}
	if got.IntentHash != in.HashHex() || got.MsgID != queue.IntentMsgID(in.ID, matcher.IntentHash(got.Intent)) {
		t.Errorf("the packed client says intent_hash %s, Nats-Msg-Id %s; the daemon %s, %s",
			got.IntentHash, got.MsgID, in.HashHex(), queue.IntentMsgID(in.ID, matcher.IntentHash(got.Intent)))
	}
}

// TestNATSPeerRangeIsTested: the NATS libraries are peers of the client,
// never its own dependencies, and both ends of their range are what the
// tests install: the lower bound is the client's own dev install (its suite
// runs on it), and the packaging project's version lies inside the range.
func TestNATSPeerRangeIsTested(t *testing.T) {
	type pkgJSON struct {
		Dependencies     map[string]string `json:"dependencies"`
		DevDependencies  map[string]string `json:"devDependencies"`
		PeerDependencies map[string]string `json:"peerDependencies"`
	}
	read := func(path string) pkgJSON {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var p pkgJSON
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return p
	}
	client, consumer := read("package.json"), read(filepath.Join(consumerDir, "package.json"))
	if len(client.Dependencies) != 0 {
		t.Errorf("package.json: dependencies %v: the client needs none of its own", client.Dependencies)
	}
	rangeRE := regexp.MustCompile(`^>=(\d+\.\d+\.\d+) <(\d+\.\d+\.\d+)$`)
	for _, name := range []string{"@nats-io/jetstream", "@nats-io/nats-core"} {
		m := rangeRE.FindStringSubmatch(client.PeerDependencies[name])
		if m == nil {
			t.Errorf("peerDependencies %s is %q, want >=LOW <HIGH", name, client.PeerDependencies[name])
			continue
		}
		if dev := client.DevDependencies[name]; dev != m[1] {
			t.Errorf("%s: the client's suite runs on %q, not the range's lower bound %s", name, dev, m[1])
		}
		v := consumer.Dependencies[name]
		if !exactVersion(v) || semverLess(v, m[1]) || !semverLess(v, m[2]) {
			t.Errorf("%s: the packaging project installs %q, outside %s", name, v, client.PeerDependencies[name])
		}
	}
}

func exactVersion(v string) bool { return regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) }

// semverLess compares two exact x.y.z versions.
func semverLess(a, b string) bool {
	var x, y [3]int
	fmt.Sscanf(a, "%d.%d.%d", &x[0], &x[1], &x[2])
	fmt.Sscanf(b, "%d.%d.%d", &y[0], &y[1], &y[2])
	for i := range x {
		if x[i] != y[i] {
			return x[i] < y[i]
		}
	}
	return false
}
