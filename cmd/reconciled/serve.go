package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/aviate-labs/agent-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/store"
)

func init() {
	register(command{
		Name:    "serve",
		Summary: "run the daemon: take intents from NATS, publish verdicts, follow up",
		Run:     runServe,
	})
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseServeConfig(args, os.Getenv, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg.LogLevel, stderr)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	ag, err := newServeAgent(cfg)
	if err != nil {
		return err
	}
	d, err := daemon.New(ctx, cfg.Config, daemon.Options{Log: log, Agent: ag})
	if err != nil {
		if ctx.Err() != nil {
			// SIGTERM while starting is a stop like any other.
			log.Info("stopped while starting", zap.Error(err))
			return nil
		}
		return storeExit(err)
	}
	// The embedded server's address is logged so that a client of a daemon
	// started with --nats-listen 127.0.0.1:0 learns which port it got.
	var embeddedURL string
	if e := d.Embedded(); e != nil {
		embeddedURL = e.ClientURL()
	}
	log.Info("reconciled serving", zap.String("http", d.HTTPAddr()), zap.String("instance", cfg.Instance),
		zap.String("ic_url", cfg.ICURL), zap.Int("configured_ledgers", len(cfg.Ledgers)), zap.String("nats_listen", embeddedURL))

	// A daemon that gave up (its NATS connection closed for good, its
	// embedded NATS server could not be restarted) ends the process
	// non-zero: its supervisor restarts it, where a process left running
	// would take nothing and say nothing.
	select {
	case <-ctx.Done():
		log.Info("stopping: draining in-flight intents", zap.Duration("grace", cfg.Grace))
	case <-d.Failed():
		log.Error("stopping: the daemon cannot go on", zap.Error(d.FailedErr()))
	}
	graceCtx, cancel := context.WithTimeout(context.Background(), cfg.Grace)
	defer cancel()
	d.Shutdown(graceCtx)
	if err := d.FailedErr(); err != nil {
		return storeExit(err)
	}
	log.Info("stopped")
	return nil
}

// exitCorrupt is serve's exit status for a corrupt store (sysexits'
// EX_DATAERR): restarting does not help until the file is moved away, so a
// supervisor or an alert can tell it from other failures (status 1).
const exitCorrupt = 65

// storeExit gives a corrupt store's error its own exit status.
func storeExit(err error) error {
	if errors.Is(err, store.ErrCorrupt) {
		return withExitCode(exitCorrupt, err)
	}
	return err
}

func newLogger(level zapcore.Level, w io.Writer) (*zap.Logger, error) {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	// Intents and ledgers supply some of the logged texts: safeLogEncoder
	// escapes what the JSON encoder leaves raw.
	core := zapcore.NewCore(safeLogEncoder{zapcore.NewJSONEncoder(enc)}, zapcore.AddSync(w), level)
	return zap.New(core), nil
}

// newServeAgent makes the agent every ledger client shares. Mainnet keeps
// agent-go's built-in root key; a test replica's key is fetched, and pinned
// when --root-key-file is given.
func newServeAgent(cfg *serveConfig) (*agent.Agent, error) {
	u, err := url.Parse(cfg.ICURL)
	if err != nil {
		return nil, fmt.Errorf("%w: --ic-url: %v", errUsage, err)
	}
	// agent-go's default client waits up to the ingress expiry (5 min) for
	// one reply; a hung replica would hold an intent that long per query.
	hc := &http.Client{Timeout: cfg.QueryTimeout}
	if hc.Timeout == 0 {
		hc.Timeout = 30 * time.Second
	}
	ag, err := agent.New(agent.Config{
		ClientConfig: []agent.ClientOption{agent.WithHostURL(u), agent.WithHttpClient(hc)},
		FetchRootKey: cfg.FetchRootKey || cfg.RootKey != nil,
	})
	if err != nil {
		return nil, fmt.Errorf("agent for %s: %w", cfg.ICURL, err)
	}
	if cfg.RootKey != nil && string(ag.GetRootKey()) != string(cfg.RootKey) {
		return nil, fmt.Errorf("the root key served by %s differs from --root-key-file", cfg.ICURL)
	}
	return ag, nil
}
