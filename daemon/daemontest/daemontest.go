package daemontest

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// Options configure a Rig and each daemon it starts. Zero values select
// what a test usually wants: follow-up rounds only when the test asks for
// them, short timeouts, everything on loopback.
type Options struct {
	// Seed of the test replica's keys (New only).
	Seed int64
	// Timeout bounds the whole rig (New only; default 4 min).
	Timeout time.Duration
	// NoDaemon makes New start the replica, NATS and the tool layer's
	// connection only; Start adds daemons.
	NoDaemon bool

	// Instance names the daemon (default "test").
	Instance string
	// DataDir is the daemon's data dir (default a new temp dir).
	DataDir string
	// Poll is the follow-up period (default one hour: rounds run when the
	// test calls FollowUpNow).
	Poll time.Duration
	// QueryTimeout bounds each HTTP request of the daemon's agent
	// (default 3 s).
	QueryTimeout time.Duration
	// MaxInflight and MaxMsgBytes are the intake's limits (defaults 4 and
	// 32 KiB, as serve).
	MaxInflight, MaxMsgBytes int
	// LeaseTTL is the follow-up lease's TTL (daemon default when zero).
	LeaseTTL time.Duration
	// Tune adjusts the daemon's configuration and options last (ledgers,
	// hooks, backoff).
	Tune func(*daemon.Config, *daemon.Options)
}

// Rig is a test replica, an embedded NATS server with JetStream, the tool
// layer's NATS connection, and the daemons started on them.
type Rig struct {
	T       testing.TB
	Ctx     context.Context
	Replica *ledgertest.Server
	NATS    *queue.Embedded
	Tool    *queue.Conn
	// Daemon is the daemon New started (nil with NoDaemon).
	Daemon *daemon.Daemon
	// Logs holds every daemon's log lines (JSON, debug level); they are
	// written to the test log when the test fails.
	Logs *LogBuffer
}

// New starts a rig; everything stops when the test ends.
func New(t testing.TB, o Options) *Rig {
	t.Helper()
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 4 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(o.Seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	emb, err := queue.StartEmbedded(queue.EmbeddedConfig{DataDir: filepath.Join(t.TempDir(), "nats")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	tool, err := queue.Connect(ctx, queue.ConnConfig{Embedded: emb, Name: "tool-layer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tool.Close)
	if err := tool.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	r := &Rig{T: t, Ctx: ctx, Replica: srv, NATS: emb, Tool: tool, Logs: &LogBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", r.Logs.String())
		}
	})
	if !o.NoDaemon {
		r.Daemon = r.Start(o)
	}
	return r
}

// Start starts a daemon on the rig's replica and NATS server. It is shut
// down when the test ends unless the test has stopped it.
func (r *Rig) Start(o Options) *daemon.Daemon {
	r.T.Helper()
	if o.Instance == "" {
		o.Instance = "test"
	}
	if o.DataDir == "" {
		o.DataDir = r.T.TempDir()
	}
	if o.Poll == 0 {
		o.Poll = time.Hour
	}
	if o.QueryTimeout == 0 {
		o.QueryTimeout = 3 * time.Second
	}
	if o.MaxInflight == 0 {
		o.MaxInflight = 4
	}
	if o.MaxMsgBytes == 0 {
		o.MaxMsgBytes = 32 << 10
	}
	hc := &http.Client{Timeout: o.QueryTimeout, Transport: &http.Transport{Proxy: nil,
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext, MaxIdleConnsPerHost: 16}}
	ag, err := r.Replica.NewAgentWithConfig(agent.Config{ClientConfig: []agent.ClientOption{agent.WithHttpClient(hc)}})
	if err != nil {
		r.T.Fatal(err)
	}
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.AddSync(r.Logs), zap.DebugLevel)).Named(o.Instance)
	cfg := daemon.Config{DataDir: o.DataDir, Instance: o.Instance, SubjectPrefix: queue.DefaultPrefix,
		PollInterval: o.Poll, MaxInflight: o.MaxInflight, MaxMessageBytes: o.MaxMsgBytes, Grace: 5 * time.Second,
		LeaseTTL: o.LeaseTTL, Ledgers: map[string]reconcile.LedgerConfig{}}
	opts := daemon.Options{Log: log, Agent: ag, Embedded: r.NATS}
	if o.Tune != nil {
		o.Tune(&cfg, &opts)
	}
	d, err := daemon.New(r.Ctx, cfg, opts)
	if err != nil {
		r.T.Fatal(err)
	}
	r.T.Cleanup(func() { Stop(d, 5*time.Second) })
	return d
}

// Stop shuts d down, giving in-flight intents grace to finish.
func Stop(d *daemon.Daemon, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	d.Shutdown(ctx)
}

// Publish puts an intent body on the intents subject of canister with the
// given message id, as a tool layer does.
func (r *Rig) Publish(canister, msgID string, body []byte) {
	r.T.Helper()
	if _, err := r.Tool.JetStream().Publish(r.Ctx, queue.DefaultPrefix+".intents."+canister, body,
		jetstream.WithMsgID(msgID)); err != nil {
		r.T.Fatalf("publish %s: %v", msgID, err)
	}
}

// Wait returns the first verdict of id that satisfies until, reading the
// verdict stream from the intent's latest verdict on; it fails the test
// after 45 s.
func (r *Rig) Wait(id string, until func(reconciled.Verdict) bool) reconciled.Verdict {
	r.T.Helper()
	ctx, cancel := context.WithTimeout(r.Ctx, 45*time.Second)
	defer cancel()
	var got reconciled.Verdict
	err := r.Tool.WatchIntent(ctx, id, func(v reconciled.Verdict) error {
		if until(v) {
			got = v
			return queue.ErrStop
		}
		return nil
	})
	if err != nil {
		r.T.Fatalf("waiting for a verdict of %s: %v", id, err)
	}
	return got
}

// LogBuffer is a log sink safe for concurrent writers.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *LogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *LogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
