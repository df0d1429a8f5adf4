package conformance_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freeAddr is a loopback address nothing listens on right now, below the
// ephemeral port range: listeners on port 0 (every other test) never get
// it, so it stays free for the script that binds it a moment later.
func freeAddr(t *testing.T, taken map[string]bool) string {
	t.Helper()
	start := 20000 + os.Getpid()%10000
	for i := range 10000 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+(start-20000+i)%10000)
		if taken[addr] {
			continue
		}
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			taken[addr] = true
			return addr
		}
	}
	t.Fatal("no free loopback port in 20000-29999")
	return ""
}

// TestReadmeICPWalkthrough runs the walkthrough of docs/walkthrough.md —
// icp CLI from npm, testledger, a real icrc1_transfer, the daemon, the
// intent and its verdict — as written, on free ports instead of the
// documented ones.
func TestReadmeICPWalkthrough(t *testing.T) {
	requireTools(t, "node", "npm", "bash", "curl")
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "walkthrough.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## A real transfer against the local test ledger, with DFINITY's `icp` CLI\n")
	if !ok {
		t.Fatal("docs/walkthrough.md: no walkthrough section")
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("docs/walkthrough.md: no sh block in the walkthrough")
	}
	script, _, _ := strings.Cut(block, "\n```\n")
	taken := map[string]bool{}
	for _, documented := range []string{"127.0.0.1:8080", "127.0.0.1:4222"} {
		if !strings.Contains(script, documented) {
			t.Fatalf("docs/walkthrough.md: the walkthrough no longer uses %s", documented)
		}
		script = strings.ReplaceAll(script, documented, freeAddr(t, taken))
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	// The walkthrough's test ledger is reconciled-dev's; the daemon is reconciled.
	for _, name := range []string{"reconciled", "reconciled-dev"} {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, name), "../../cmd/"+name)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	// Whatever the script leaves running when it fails is stopped on exit.
	wrapped := "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script + "\n"
	if err := os.WriteFile(filepath.Join(dir, "walkthrough.sh"), []byte(wrapped), 0o600); err != nil {
		t.Fatal(err)
	}

	// Every proxy variable points at a closed loopback port, so the icp CLI
	// can reach nothing but the replica; npm bypasses it for its registry.
	registry, err := exec.Command("npm", "config", "get", "registry").Output()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := url.Parse(strings.TrimSpace(string(registry)))
	if err != nil || reg.Hostname() == "" {
		t.Fatalf("npm registry %q: %v", registry, err)
	}
	sink, noProxy := "http://127.0.0.1:9", "127.0.0.1,localhost,"+reg.Hostname()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(dir, "walkthrough.sh"))
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HTTP_PROXY="+sink, "HTTPS_PROXY="+sink, "ALL_PROXY="+sink, "http_proxy="+sink, "https_proxy="+sink, "all_proxy="+sink,
		"NO_PROXY="+noProxy, "no_proxy="+noProxy, "NPM_CONFIG_UPDATE_NOTIFIER=false")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil {
		serveLog, _ := os.ReadFile(filepath.Join(work, "serve.log"))
		t.Fatalf("walkthrough: %v\n%s\nserve.log:\n%s", err, out.String(), serveLog)
	}
	t.Logf("walkthrough output:\n%s", out.String())

	m := regexp.MustCompile(`variant \{ Ok = (\d+) : nat \}`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatal("the icp CLI printed no block index")
	}
	verdicts, err := os.ReadFile(filepath.Join(work, "verdicts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// ask prints one line per verdict: seq=… status=… final=… block=… reason=…
	got := regexp.MustCompile(`(?m)^seq=\d+ status=(\w+) final=(\w+) block=(\S+) `).FindAllStringSubmatch(string(verdicts), -1)
	if len(got) == 0 {
		t.Fatalf("no verdict in %q", verdicts)
	}
	if v := got[len(got)-1]; v[1] != "found" || v[2] != "true" || v[3] != m[1] {
		t.Fatalf("last verdict %q, want found, final, at block %s", v[0], m[1])
	}
}
