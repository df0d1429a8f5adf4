package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/ledgertest"
)

// jetStreamTokenServer runs a loopback nats-server with JetStream under
// dir that takes one token, on port (0: a free one).
func jetStreamTokenServer(t *testing.T, dir string, port int, token string) (*server.Server, int) {
	t.Helper()
	if port == 0 {
		port = server.RANDOM_PORT
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true, Authorization: token})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s, s.Addr().(*net.TCPAddr).Port
}

// The token is rotated on the server (restarted on its port with another
// one), then in the daemon's token file: the daemon keeps reconnecting
// through the authorization violations, reads the file again, and is ready
// again; it never stops.
func TestServeReconnectsWithRotatedToken(t *testing.T) {
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(4))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	natsDir := t.TempDir()
	ns, port := jetStreamTokenServer(t, natsDir, 0, "first")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &daemontest.LogBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--data", filepath.Join(t.TempDir(), "data"), "--http", "127.0.0.1:0",
			"--nats-url", ns.ClientURL(), "--nats-token-file", tokenFile, "--ic-url", srv.URL(),
			"--fetch-root-key", "--instance", "t1", "--grace", "2s"}, io.Discard, logs)
	}()
	running := func() {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("serve returned: %v\n%s", err, logs.String())
		default:
		}
	}
	var addr string
	testutil.Eventually(t, 30*time.Second, "serve logs its HTTP address", func() (bool, string) {
		for _, line := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "reconciled serving" {
				addr, _ = m["http"].(string)
			}
		}
		running()
		return addr != "", logs.String()
	})
	client := ledgertest.LoopbackHTTPClient()
	ready := func(want int) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("/readyz %d", want), func() (bool, string) {
			running()
			resp, err := client.Get("http://" + addr + "/readyz")
			if err != nil {
				return false, err.Error()
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode == want, fmt.Sprintf("%d %s", resp.StatusCode, body)
		})
	}
	ready(http.StatusOK)

	ns.Shutdown()
	ns.WaitForShutdown()
	jetStreamTokenServer(t, natsDir, port, "second")
	ready(http.StatusServiceUnavailable)
	testutil.Eventually(t, 30*time.Second, "three authorization violations", func() (bool, string) {
		running()
		n := strings.Count(strings.ToLower(logs.String()), "authorization violation")
		return n >= 3, fmt.Sprintf("%d seen", n)
	})
	if err := os.WriteFile(tokenFile, []byte("second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ready(http.StatusOK)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within its grace")
	}
}
