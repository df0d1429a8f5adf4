package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

// Secrets the daemon is given in the tests below; none may appear in its
// output, its HTTP answers or its errors.
const (
	secretSupportToken = "supp0rt-T0KEN-3b1f9c-5e0d7a21c4f86b93"
	secretNATSPassword = "nats-PA55W0RD-77d2ae"
	secretNATSToken    = "nats-T0KEN-c4e081"
	secretWrongToken   = "wr0ng-T0KEN-90aa1d"
)

// authNATS runs a JetStream server on loopback that demands the given
// credentials.
func authNATS(t *testing.T, user, password, token string) string {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Username: user, Password: password, Authorization: token}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

// proc is one run of the daemon binary with its combined output.
type proc struct {
	*child
	t   *testing.T
	out *daemontest.LogBuffer
}

// runBinary starts the daemon binary with args and extra environment;
// RECONCILED_* variables of the test's own environment are not passed on.
func runBinary(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	out := &daemontest.LogBuffer{}
	return &proc{child: startChild(t, daemonBinary(t), args, env, out, nil), t: t, out: out}
}

// exit waits for the process to end on its own and returns its exit code.
func (p *proc) exit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("daemon still running after %s:\n%s", timeout, p.out.String())
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ExitCode()
	}
	if p.waitErr != nil {
		p.t.Fatal(p.waitErr)
	}
	return 0
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	if code := p.exit(30 * time.Second); code != 0 {
		p.t.Fatalf("exit code %d after SIGTERM:\n%s", code, p.out.String())
	}
}

// httpAddr waits for the daemon's "serving" line and returns its HTTP
// address.
func (p *proc) httpAddr() string {
	p.t.Helper()
	var addr string
	testutil.Eventually(p.t, 30*time.Second, "daemon serving", func() (bool, string) {
		select {
		case <-p.done:
			p.t.Fatalf("daemon exited: %v\n%s", p.waitErr, p.out.String())
		default:
		}
		sc := bufio.NewScanner(strings.NewReader(p.out.String()))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				HTTP string `json:"http"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "reconciled serving" {
				addr = line.HTTP
				return true, ""
			}
		}
		return false, "no serving line yet"
	})
	return addr
}

// serveArgs are the flags of a daemon against the test replica.
func serveArgs(natsURL, icURL, dataDir string, extra ...string) []string {
	return append([]string{"serve", "--nats-url", natsURL, "--ic-url", icURL, "--fetch-root-key",
		"--data", dataDir, "--http", "127.0.0.1:0", "--instance", "sec", "--poll-interval", "100ms",
		"--grace", "5s", "--log-level", "debug"}, extra...)
}

func httpGet(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func noSecrets(t *testing.T, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s contains the secret %q", where, s)
		}
	}
}

// One daemon given a support token and NATS user/password through the
// environment: the support API refuses missing and wrong tokens, the data
// directory and SQLite files are private, and no secret shows in its log
// (at debug level), its HTTP answers or the errors it reports.
func TestSecurityDaemonSecretsAndFiles(t *testing.T) {
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(31))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	natsURL := authNATS(t, "reconciled", secretNATSPassword, "")
	dataDir := filepath.Join(t.TempDir(), "fresh", "data") // created by the daemon
	p := runBinary(t, []string{"RECONCILED_SUPPORT_TOKEN=" + secretSupportToken,
		"RECONCILED_NATS_USER=reconciled", "RECONCILED_NATS_PASSWORD=" + secretNATSPassword},
		serveArgs(natsURL, srv.URL(), dataDir)...)
	base := "http://" + p.httpAddr()

	// An intent, so the store and the API have something to say.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tool, err := queue.Connect(ctx, queue.ConnConfig{URL: natsURL, User: "reconciled", Password: secretNATSPassword, Name: "tool"})
	if err != nil {
		t.Fatal(err)
	}
	defer tool.Close()
	l, err := srv.NewLedger(ledgertest.LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p1 := payment{stamp: srv.Now(), amount: 5, memo: "sec"}
	if _, err := tool.PublishIntent(ctx, l.ID().Encode(), "sec-1", jsonOf(p1.intent("sec-1", l.ID())), matcher.IntentHash(jsonOf(p1.intent("sec-1", l.ID())))); err != nil {
		t.Fatal(err)
	}
	if err := tool.WatchIntent(ctx, "sec-1", func(reconciled.Verdict) error { return queue.ErrStop }); err != nil {
		t.Fatal(err)
	}

	// The support API.
	for _, c := range []struct {
		name, token string
		status      int
		code        string
	}{
		{"missing token", "", http.StatusUnauthorized, "E_TOKEN_MISSING"},
		{"wrong token", secretWrongToken, http.StatusUnauthorized, "E_TOKEN_WRONG"},
		{"token with a suffix", secretSupportToken + "x", http.StatusUnauthorized, "E_TOKEN_WRONG"},
		{"token prefix", secretSupportToken[:len(secretSupportToken)-1], http.StatusUnauthorized, "E_TOKEN_WRONG"},
		{"right token", secretSupportToken, http.StatusOK, ""},
	} {
		for _, path := range []string{"/api/v1/intents", "/api/v1/intents/sec-1", "/api/v1/counts"} {
			status, body := httpGet(t, base+path, c.token)
			if status != c.status || (c.code != "" && !strings.Contains(body, c.code)) {
				t.Errorf("%s %s: %d %s, want %d %s", c.name, path, status, body, c.status, c.code)
			}
			if c.code != "" && strings.Contains(body, "sec-1") {
				t.Errorf("%s %s: refused answer leaks data: %s", c.name, path, body)
			}
			noSecrets(t, "answer to "+path, body, secretSupportToken, secretNATSPassword)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/ui/"} {
		_, body := httpGet(t, base+path, secretWrongToken)
		noSecrets(t, "answer to "+path, body, secretSupportToken, secretNATSPassword, secretWrongToken)
	}

	// Files: the data dir is private, and so is every SQLite file in it,
	// the WAL and shared-memory files of the running daemon included.
	checkFiles := func(when string) {
		t.Helper()
		fi, err := os.Stat(dataDir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: data dir is %v, want 0700", when, fi.Mode().Perm())
		}
		entries, err := os.ReadDir(dataDir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, fmt.Sprintf("%s %v", e.Name(), fi.Mode()))
			if !strings.HasPrefix(e.Name(), "reconciled.db") {
				continue
			}
			want := fs.FileMode(0o600)
			if fi.Mode().Perm() != want {
				t.Errorf("%s: %s is %v, want %v", when, e.Name(), fi.Mode().Perm(), want)
			}
		}
		if !strings.Contains(strings.Join(names, " "), "reconciled.db ") {
			t.Errorf("%s: no reconciled.db in the data dir: %v", when, names)
		}
		t.Logf("%s: %v", when, names)
	}
	checkFiles("running")
	p.stop()
	checkFiles("stopped")

	out := p.out.String()
	if !strings.Contains(out, `"level":"debug"`) && !strings.Contains(out, `"level":"info"`) {
		t.Fatalf("no log captured:\n%s", out)
	}
	noSecrets(t, "the daemon's log", out, secretSupportToken, secretNATSPassword, secretWrongToken)
}

// Wrong NATS credentials: the daemon fails to start, and its error names
// the problem without repeating the password or token it was given.
func TestSecurityNATSCredentialsNotInErrors(t *testing.T) {
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(32))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	userURL := authNATS(t, "reconciled", "the-right-password-1e7", "")
	tokenURL := authNATS(t, "", "", "the-right-token-5a2")
	for _, c := range []struct {
		name string
		url  string
		env  []string
	}{
		{"wrong password", userURL, []string{"RECONCILED_NATS_USER=reconciled", "RECONCILED_NATS_PASSWORD=" + secretNATSPassword}},
		{"wrong token", tokenURL, []string{"RECONCILED_NATS_TOKEN=" + secretNATSToken}},
		{"flags", userURL, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := serveArgs(c.url, srv.URL(), t.TempDir())
			if c.env == nil {
				args = append(args, "--nats-user", "reconciled", "--nats-password", secretNATSPassword, "--support-token", secretSupportToken)
			}
			p := runBinary(t, c.env, args...)
			select {
			case <-p.done:
			case <-time.After(8 * time.Second):
				// A daemon that cannot authenticate must say so and exit
				// (or at least keep saying so); waiting silently leaves an
				// operator nothing to go on.
				t.Errorf("still running 8 s after NATS refused its credentials; output so far:\n%s", p.out.String())
				_ = p.cmd.Process.Signal(syscall.SIGTERM)
			}
			code := p.exit(30 * time.Second)
			out := p.out.String()
			if code == 0 {
				t.Fatalf("exit code 0 with wrong credentials:\n%s", out)
			}
			if !strings.Contains(strings.ToLower(out), "authorization") {
				t.Errorf("the output does not say authorization failed:\n%s", out)
			}
			noSecrets(t, "the daemon's output", out, secretNATSPassword, secretNATSToken, secretSupportToken)
		})
	}
	// The right token does connect (so the refusals above are about the
	// credentials).
	p := runBinary(t, []string{"RECONCILED_NATS_TOKEN=the-right-token-5a2"}, serveArgs(tokenURL, srv.URL(), t.TempDir())...)
	p.httpAddr()
	p.stop()
	noSecrets(t, "the daemon's log", p.out.String(), "the-right-token-5a2")
}

// --fetch-root-key (and a pinned root key) are refused for mainnet hosts
// before anything is created or contacted.
func TestSecurityFetchRootKeyRefusedForMainnet(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "root.der")
	if err := os.WriteFile(keyFile, bytes.Repeat([]byte{0x30}, 133), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		url  string
		flag []string
	}{
		{"https://icp-api.io", []string{"--fetch-root-key"}},
		{"https://ic0.app", []string{"--fetch-root-key"}},
		{"https://icp0.io", []string{"--fetch-root-key"}},
		{"https://boundary.ic0.app", []string{"--fetch-root-key"}},
		{"https://ICP-API.IO.", []string{"--fetch-root-key"}},
		{"https://icp-api.io:443", []string{"--fetch-root-key"}},
		{"https://icp-api.io", []string{"--root-key-file", keyFile}},
	} {
		dataDir := filepath.Join(t.TempDir(), "data")
		args := append([]string{"serve", "--ic-url", c.url, "--data", dataDir, "--http", "127.0.0.1:0",
			"--nats-url", "nats://127.0.0.1:1"}, c.flag...)
		p := runBinary(t, nil, args...)
		code := p.exit(30 * time.Second)
		out := p.out.String()
		if code != 2 || !strings.Contains(out, "refused for the mainnet host") {
			t.Errorf("%s %v: exit %d, output:\n%s", c.url, c.flag, code, out)
		}
		if _, err := os.Stat(dataDir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s %v: the data dir was created before the refusal", c.url, c.flag)
		}
	}
	// The environment variable is refused the same way.
	p := runBinary(t, []string{"RECONCILED_FETCH_ROOT_KEY=true", "RECONCILED_IC_URL=https://icp-api.io"},
		"serve", "--data", filepath.Join(t.TempDir(), "d"), "--nats-url", "nats://127.0.0.1:1")
	if code := p.exit(30 * time.Second); code != 2 || !strings.Contains(p.out.String(), "refused for the mainnet host") {
		t.Errorf("env: exit %d, output:\n%s", code, p.out.String())
	}
}

// An intent over --max-message-bytes is terminated and logged, and the
// next intent is decided as usual.
func TestSecurityMaxMessageBytes(t *testing.T) {
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(33))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	emb, err := queue.StartEmbedded(queue.EmbeddedConfig{DataDir: filepath.Join(t.TempDir(), "nats"), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tool, err := queue.Connect(ctx, queue.ConnConfig{URL: emb.ClientURL(), Name: "tool"})
	if err != nil {
		t.Fatal(err)
	}
	defer tool.Close()
	if err := tool.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	terms := watchTerminations(t, tool)

	p := runBinary(t, nil, serveArgs(emb.ClientURL(), srv.URL(), t.TempDir(), "--max-message-bytes", "2048")...)
	p.httpAddr()
	l, err := srv.NewLedger(ledgertest.LedgerConfig{InitialBalances: []ledgertest.Balance{{Account: icrc3.Account{Owner: payer}, Amount: icrc3.NatFromUint64(1_000_000_000)}}})
	if err != nil {
		t.Fatal(err)
	}
	ledger := l.ID().Encode()

	big := validIntent("too-big", ledger, func(m, _ map[string]any) { m["after"] = strings.Repeat("z", 2100) })
	ack, err := tool.JetStream().Publish(ctx, "reconcile.intents."+ledger, big, jetstream.WithMsgID("too-big"))
	if err != nil {
		t.Fatal(err)
	}
	reason := terms.wait(t, ack.Sequence)
	if !strings.Contains(reason, "exceeds 2048") {
		t.Errorf("termination reason %q", reason)
	}
	// Just under the limit is taken.
	p2 := payment{stamp: srv.Now(), amount: 31, memo: "fits"}
	idx, err := l.Transfer(payer, p2.arg())
	if err != nil {
		t.Fatal(err)
	}
	body := jsonOf(p2.intent("fits", l.ID()))
	if len(body) > 2048 {
		t.Fatalf("test intent is %d bytes", len(body))
	}
	if _, err := tool.PublishIntent(ctx, ledger, "fits", body, matcher.IntentHash(body)); err != nil {
		t.Fatal(err)
	}
	var got reconciled.Verdict
	if err := tool.WatchIntent(ctx, "fits", func(v reconciled.Verdict) error { got = v; return queue.ErrStop }); err != nil {
		t.Fatal(err)
	}
	if got.Status != reconciled.StatusFound || uint64(got.Block.Index) != idx {
		t.Fatalf("intent after the oversized one: %s %+v", got.Status, got.Block)
	}
	if v, err := tool.LastVerdict(ctx, "too-big"); err == nil && v != nil {
		t.Fatalf("the oversized intent got a verdict: %+v", v)
	}
	p.stop()
	if n := strings.Count(p.out.String(), "intake message too large, terminated"); n != 1 {
		t.Fatalf("%d log lines about the oversized intent, want 1:\n%s", n, p.out.String())
	}
}

// The engine serializes one ledger's scans: two intents on one slow ledger,
// handled at the same time, never read its history concurrently, and the
// client's bound on queries in flight holds.
func TestSecurityOneScanPerLedger(t *testing.T) {
	r := newRig(t, rigOpts{MaxInflight: 4})
	// ICRC-3 pages only (100 blocks each), so one scan has many pages to
	// fetch concurrently and the client's bound is exercised.
	l := r.archivedLedger(ledgertest.LedgerConfig{DisableLegacy: true})
	stamp := r.srv.Now()
	if err := l.GenerateHistory(1500, 9, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	r.srv.Advance(time.Hour)
	r.srv.SetFaults(l.ID(), ledgertest.Faults{Latency: 15 * time.Millisecond})
	for _, a := range l.Archives() {
		r.srv.SetFaults(a.ID, ledgertest.Faults{Latency: 15 * time.Millisecond})
	}
	ps := []payment{{stamp: stamp, amount: 1, memo: "slow-a"}, {stamp: stamp + 1, amount: 2, memo: "slow-b"}, {stamp: stamp + 2, amount: 3, memo: "slow-c"}}
	for i, p := range ps {
		id := fmt.Sprint("slow-", i)
		r.publish(l.ID().Encode(), id, jsonOf(p.intent(id, l.ID())))
	}
	for i := range ps {
		if v := r.wait(fmt.Sprint("slow-", i), verdictAny); v.Status != reconciled.StatusNotYet {
			t.Fatalf("slow-%d: %s", i, outcomeOf(v))
		}
	}
	overlap, reads := r.gaugeOf(l.ID()).snapshot()
	handlers, _ := r.handlers.snapshot()
	stats := r.client(l.ID()).Stats()
	t.Logf("handlers at once %d, history reads %d, overlapping reads %d, queries %d, queries in flight at most %d",
		handlers, reads, overlap, stats.Total, stats.MaxInFlight)
	if handlers < 2 {
		t.Fatalf("the intents were never handled at the same time (%d): the check below would prove nothing", handlers)
	}
	if overlap != 1 {
		t.Fatalf("%d reads of one ledger's history overlapped, want 1 at a time", overlap)
	}
	// At least two pages in flight shows the scan did fetch concurrently,
	// so the upper bound below is a real check.
	if stats.MaxInFlight < 2 || stats.MaxInFlight > icrc3history.ConcurrencyICRC3 {
		t.Fatalf("%d queries in flight at once, want 2..%d (concurrent pages, within the client's bound on icrc3 pages)", stats.MaxInFlight, icrc3history.ConcurrencyICRC3)
	}
}
