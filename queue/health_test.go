package queue

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestSuperviseRestartsFailedJetStream: the server shuts its JetStream
// down (what nats-server does after some storage failures); Status and
// CheckJetStream say so, Supervise restarts the server on the same store,
// and a client connected through the Embedded reconnects to it and finds
// what was stored before.
func TestSuperviseRestartsFailedJetStream(t *testing.T) {
	e := startServer(t, t.TempDir())
	c := connect(t, e, func(cfg *ConnConfig) {
		cfg.ReconnectMin, cfg.ReconnectMax = 20*time.Millisecond, 100*time.Millisecond
	})
	ctx := testCtx(t)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishVerdict(ctx, verdict("sv-1", 1, "not_yet")); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(); st.Err != nil || !st.Since.IsZero() {
		t.Fatalf("status of a healthy server: %+v", st)
	}
	if err := c.CheckJetStream(ctx); err != nil {
		t.Fatalf("JetStream of a healthy server: %v", err)
	}

	reconnected := make(chan struct{}, 1)
	c.NATS().SetReconnectHandler(func(*nats.Conn) {
		select {
		case reconnected <- struct{}{}:
		default:
		}
	})
	if err := e.Server().ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	st := e.Status()
	if st.Err == nil || st.Since.IsZero() {
		t.Fatalf("status with JetStream shut down: %+v", st)
	}
	// The server keeps the API subject but does not answer: the check
	// ends at its deadline.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := c.CheckJetStream(cctx); err == nil {
		t.Fatal("CheckJetStream = nil with JetStream shut down")
	}

	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Supervise(sctx, SuperviseConfig{Every: 10 * time.Millisecond}) }()
	recv(t, reconnected, "reconnect to the restarted server")
	if st := e.Status(); st.Err != nil || st.Restarts != 1 {
		t.Fatalf("status after the restart: %+v", st)
	}
	if err := c.PublishVerdict(ctx, verdict("sv-1", 2, "absent")); err != nil {
		t.Fatalf("publish after the restart: %v", err)
	}
	if v, err := c.LastVerdict(ctx, "sv-1"); err != nil || v.Seq != 2 {
		t.Fatalf("last verdict after the restart: %+v %v", v, err)
	}
	stop()
	if err := recv(t, done, "Supervise to return"); err != nil {
		t.Fatalf("Supervise: %v", err)
	}
}

// TestDisconnectedSince: a connection whose server is gone is reported
// down since it went down, and up again once reconnected.
func TestDisconnectedSince(t *testing.T) {
	dir := t.TempDir()
	e, err := StartEmbedded(EmbeddedConfig{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	url := e.ClientURL()
	c := connect(t, nil, func(cfg *ConnConfig) {
		cfg.Embedded, cfg.URL = nil, url
		cfg.ReconnectMin, cfg.ReconnectMax = 20*time.Millisecond, 100*time.Millisecond
	})
	if _, down := c.Disconnected(); down {
		t.Fatal("a fresh connection reported down")
	}
	reconnected := make(chan struct{}, 1)
	c.NATS().SetReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} })
	disconnected := make(chan struct{}, 1)
	c.NATS().SetDisconnectErrHandler(func(*nats.Conn, error) {
		select {
		case disconnected <- struct{}{}:
		default:
		}
	})
	before := time.Now()
	e.Shutdown()
	recv(t, disconnected, "the client to see the server gone")
	since, down := c.Disconnected()
	if !down || since.Before(before) {
		t.Fatalf("after the server stopped: down %t since %s (stopped at %s)", down, since, before)
	}
	if again, _ := c.Disconnected(); !again.Equal(since) {
		t.Fatalf("down since moved from %s to %s", since, again)
	}
	startServer2(t, dir, url[len("nats://"):])
	recv(t, reconnected, "reconnect")
	if _, down := c.Disconnected(); down {
		t.Fatal("reported down after reconnecting")
	}
}

// TestSuperviseGivesUpWhenTheServerCannotComeBack: a restart that cannot
// bring a server with JetStream back (here its store path has become a
// file) is returned, naming why, for the process to exit.
func TestSuperviseGivesUpWhenTheServerCannotComeBack(t *testing.T) {
	dir := t.TempDir()
	e, err := StartEmbedded(EmbeddedConfig{DataDir: dir, ReadyTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	if err := e.Server().ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "jetstream")
	if err := os.Rename(store, store+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(store, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Supervise(context.Background(), SuperviseConfig{Every: 10 * time.Millisecond}) }()
	err = recv(t, done, "Supervise to give up")
	// The server does not start (JetStream cannot open its store).
	if err == nil || !strings.Contains(err.Error(), "restart after queue: embedded JetStream disabled") ||
		!strings.Contains(err.Error(), "not ready") {
		t.Fatalf("Supervise: %v, want it to name the failure and the failed restart", err)
	}
	if st := e.Status(); st.Err == nil {
		t.Fatalf("status after a failed restart: %+v", st)
	}
}
