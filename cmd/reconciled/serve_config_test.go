package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/ledgertest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestServeFlagsAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-support-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ledgers := filepath.Join(dir, "ledgers.json")
	if err := os.WriteFile(ledgers, []byte(`[{"canister_id":"ss2fx-dyaaa-aaaar-qacoq-cai","tw":"48h","verify":"queries"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseServeConfig([]string{
		"--ledger", "mxzaz-hqaaa-aaaar-qaada-cai,tw=25h,drift=90s,minting=2vxsx-fae",
		"--ledgers-file", ledgers, "--poll-interval", "2s", "--http", "127.0.0.1:0",
	}, env(map[string]string{
		"RECONCILED_POLL_INTERVAL":      "9s", // the flag wins
		"RECONCILED_DATA":               dir,
		"RECONCILED_SUPPORT_TOKEN_FILE": tokenFile,
		"RECONCILED_INSTANCE":           "pod/7",
		"RECONCILED_MAX_INFLIGHT":       "8",
		"RECONCILED_STRICT_LEDGERS":     "true",
		"RECONCILED_PURGE_EVERY":        "3s",
		"RECONCILED_RETENTION":          "168h",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.PollInterval != 2*time.Second || c.DataDir != dir || c.SupportToken != "s3cret-support-token-0123456789abcdef" || c.MaxInflight != 8 || !c.StrictLedgers || c.PurgeEvery != 3*time.Second ||
		c.Retention != 7*24*time.Hour || c.RepublishHorizon != daemon.DefaultRepublishHorizon || c.BlockCacheMargin != daemon.DefaultBlockCacheMargin {
		t.Fatalf("config %+v", c)
	}
	if c.Instance != "pod_7" {
		t.Fatalf("instance %q: want a NATS-safe token", c.Instance)
	}
	ck, ok := c.Ledgers["mxzaz-hqaaa-aaaar-qaada-cai"]
	if !ok || ck.TW != 25*time.Hour || ck.Drift != 90*time.Second || ck.MintingOverride == nil || ck.Verify != icrc3.VerifyChain {
		t.Fatalf("--ledger: %+v", ck)
	}
	if eth := c.Ledgers["ss2fx-dyaaa-aaaar-qacoq-cai"]; eth.TW != 48*time.Hour || eth.Verify != icrc3.VerifyQueries {
		t.Fatalf("--ledgers-file: %+v", eth)
	}

	// Repeatable --ledger from the environment, ';'-separated.
	c, err = parseServeConfig(nil, env(map[string]string{
		"RECONCILED_LEDGER": "mxzaz-hqaaa-aaaar-qaada-cai; ss2fx-dyaaa-aaaar-qacoq-cai,drift=3m", "RECONCILED_INSTANCE": "x"}), io.Discard)
	if err != nil || len(c.Ledgers) != 2 || c.Ledgers["ss2fx-dyaaa-aaaar-qacoq-cai"].Drift != 3*time.Minute {
		t.Fatalf("ledgers from env: %+v, %v", c, err)
	}
}

func TestServeRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--fetch-root-key"}, nil, "refused for the mainnet host icp-api.io"},
		{[]string{"--fetch-root-key", "--ic-url", "https://boundary.ic0.app"}, nil, "mainnet host boundary.ic0.app"},
		{[]string{"--ic-url", "https://icp0.io"}, map[string]string{"RECONCILED_FETCH_ROOT_KEY": "true"}, "mainnet host icp0.io"},
		{[]string{"--ledger", "not-a-principal"}, nil, "--ledger"},
		{[]string{"--ledger", "mxzaz-hqaaa-aaaar-qaada-cai,tw=-1h"}, nil, "positive duration"},
		{[]string{"--ledger", "mxzaz-hqaaa-aaaar-qaada-cai,verify=trust"}, nil, "want chain or queries"},
		{[]string{"--ledger", "mxzaz-hqaaa-aaaar-qaada-cai,colour=red"}, nil, "unknown option"},
		{[]string{"--strict-ledgers"}, nil, "would refuse every intent"},
		{[]string{"--poll-interval", "1ms"}, nil, "too short"},
		{[]string{"--query-timeout", "0s"}, nil, "--query-timeout must be"},
		{nil, map[string]string{"RECONCILED_QUERY_TIMEOUT": "10m"}, "--query-timeout must be"},
		{[]string{"--max-message-bytes", "1000000"}, nil, "--max-message-bytes"},
		{[]string{"--max-message-bytes", "32769"}, nil, "--max-message-bytes must be 1024..32768"},
		{[]string{"--stuck-after", "0"}, nil, "--stuck-after must be 1..1000"},
		{[]string{"--purge-every", "10ms"}, nil, "--purge-every must be 100ms..1m"},
		{[]string{"--retention", "24h"}, nil, "--retention 24h0m0s is below --republish-horizon 25h0m0s"},
		{[]string{"--retention", "2h", "--republish-horizon", "3h"}, nil, "is below --republish-horizon"},
		{[]string{"--republish-horizon", "0s"}, nil, "--republish-horizon must be positive"},
		{[]string{"--block-cache-margin", "1s"}, nil, "--block-cache-margin must be at least 1m"},
		{[]string{"--nats-listen", "0.0.0.0:4222"}, nil, "not a loopback address"},
		{[]string{"--nats-url", "nats://127.0.0.1:4222", "--nats-listen", "127.0.0.1:0"}, nil, "embedded server only"},
		{[]string{"--log-level", "loud"}, nil, "--log-level"},
		{nil, map[string]string{"RECONCILED_GRACE": "soon"}, "RECONCILED_GRACE"},
		// The error names the form wanted, not only that parsing failed.
		{nil, map[string]string{"RECONCILED_GRACE": "abc"}, `RECONCILED_GRACE="abc": want a duration such as 25s or 1m30s`},
		{nil, map[string]string{"RECONCILED_MAX_INFLIGHT": "many"}, `RECONCILED_MAX_INFLIGHT="many": want an integer`},
		{nil, map[string]string{"RECONCILED_STRICT_LEDGERS": "yes please"}, `RECONCILED_STRICT_LEDGERS="yes please": want true or false`},
		{[]string{"extra"}, nil, "unexpected arguments"},
	} {
		_, err := parseServeConfig(tc.args, env(tc.env), io.Discard)
		if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %v: got %v, want a usage error mentioning %q", tc.args, tc.env, err, tc.want)
		}
	}
	// A local replica may fetch its key.
	if _, err := parseServeConfig([]string{"--fetch-root-key", "--ic-url", "http://127.0.0.1:4943", "--instance", "i"}, env(nil), io.Discard); err != nil {
		t.Fatal(err)
	}
	// The exit code of a refusal is 2.
	if code := run([]string{"serve", "--fetch-root-key"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
}

// serve end to end: flags, an embedded NATS under --data, a test replica's
// fetched root key, HTTP probes, and a clean stop when the signal context
// ends.
func TestServeRunsAndStops(t *testing.T) {
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &daemontest.LogBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--data", dir, "--http", "127.0.0.1:0", "--ic-url", srv.URL(),
			"--fetch-root-key", "--instance", "t1", "--grace", "2s", "--poll-interval", "1s"}, io.Discard, logs)
	}()
	var addr string
	testutil.Eventually(t, 30*time.Second, "serve logs its HTTP address", func() (bool, string) {
		for _, line := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "reconciled serving" {
				addr, _ = m["http"].(string)
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve returned early: %v\n%s", err, logs.String())
		default:
		}
		return addr != "", logs.String()
	})
	client := ledgertest.LoopbackHTTPClient()
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := client.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, body)
		}
		if p == "/metrics" && !strings.Contains(string(body), "reconciled_watch_list_size 0") {
			t.Fatalf("/metrics:\n%s", body)
		}
	}
	for _, f := range []string{dir, filepath.Join(dir, "reconciled.db")} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]os.FileMode{true: 0o700, false: 0o600}[fi.IsDir()]; fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", f, fi.Mode().Perm(), want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within its grace")
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Fatalf("no stop log:\n%s", logs.String())
	}
}

func TestServeReadsSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw, tok, empty := write("pw", "s3cret\n"), write("tok", " t0ken "), write("empty", "\n")
	c, err := parseServeConfig([]string{"--nats-password-file", pw}, env(map[string]string{"RECONCILED_NATS_TOKEN_FILE": tok}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// The token file is read again at every connection attempt.
	if c.NATSPassword != "s3cret" || c.NATSToken != "" || c.NATSTokenFile != tok {
		t.Fatalf("password %q token %q token file %q", c.NATSPassword, c.NATSToken, c.NATSTokenFile)
	}
	for _, args := range [][]string{
		{"--nats-password", "x", "--nats-password-file", pw},
		{"--nats-token-file", empty},
		{"--nats-token", "x", "--nats-token-file", tok},
		{"--support-token-file", filepath.Join(dir, "missing")},
	} {
		if _, err := parseServeConfig(args, env(nil), io.Discard); err == nil || !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}
