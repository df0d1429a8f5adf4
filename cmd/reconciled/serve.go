package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/reconciled/reconciled/icphistory"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

func init() {
	register(command{
		name:    "serve",
		summary: "run the daemon: take intents from NATS, publish verdicts, follow up",
		run:     runServe,
	})
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseServeConfig(args, os.Getenv, stderr)
	if err != nil {
		return err
	}
	if cfg.Demo {
		return runDemo(ctx, nil, stdout, stderr)
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
	d, err := startDaemon(ctx, daemonOpts{cfg: cfg, log: log, agent: ag})
	if err != nil {
		if ctx.Err() != nil {
			// SIGTERM while starting is a stop like any other.
			log.Info("stopped while starting", zap.Error(err))
			return nil
		}
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		d.shutdown(context.Background())
		return fmt.Errorf("http listen %s: %w", cfg.HTTPAddr, err)
	}
	hs := &http.Server{Handler: d.httpHandler(cfg.SupportToken, log),
		ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", zap.Error(err))
		}
	}()
	log.Info("reconciled serving", zap.String("http", ln.Addr().String()), zap.String("instance", cfg.Instance),
		zap.String("ic_url", cfg.ICURL), zap.Int("configured_ledgers", len(cfg.Ledgers)))

	<-ctx.Done()
	log.Info("stopping: draining in-flight intents", zap.Duration("grace", cfg.Grace))
	graceCtx, cancel := context.WithTimeout(context.Background(), cfg.Grace)
	defer cancel()
	d.shutdown(graceCtx)
	hctx, hcancel := context.WithTimeout(context.Background(), time.Second)
	defer hcancel()
	_ = hs.Shutdown(hctx)
	log.Info("stopped")
	return nil
}

func newLogger(level zapcore.Level, w io.Writer) (*zap.Logger, error) {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), level)
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

// daemonOpts wires a daemon; tests and the demo set the overrides.
type daemonOpts struct {
	cfg   *serveConfig
	log   *zap.Logger
	agent *agent.Agent
	// embedded is an in-process NATS server shared with the caller (not
	// shut down by the daemon); nil with cfg.NATSURL empty starts one
	// under <data>/nats.
	embedded *queue.Embedded
	// clientConfig adjusts each ledger client's configuration (tests).
	clientConfig func(*icrc3.ClientConfig)
}

// daemon is one running instance: store, NATS, engine and service.
type daemon struct {
	cfg     *serveConfig
	log     *zap.Logger
	store   *store.Store
	ownEmb  *queue.Embedded
	conn    *queue.Conn
	engine  *reconcile.Engine
	svc     *reconcile.Service
	metrics *reconcile.Metrics
	intake  *queue.Intake
	trigger chan struct{}

	agent        *agent.Agent
	clientConfig func(*icrc3.ClientConfig)
	clientsMu    sync.Mutex
	clients      map[string]*icrc3.Client

	stopBG context.CancelFunc
	bg     sync.WaitGroup
}

func startDaemon(ctx context.Context, o daemonOpts) (d *daemon, err error) {
	cfg := o.cfg
	log := o.log
	if log == nil {
		log = zap.NewNop()
	}
	dm := &daemon{cfg: cfg, log: log, agent: o.agent, clientConfig: o.clientConfig,
		clients: map[string]*icrc3.Client{}, trigger: make(chan struct{}, 1), metrics: reconcile.NewMetrics()}
	d = dm
	defer func() {
		if err != nil {
			dm.closeResources()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	if d.store, err = store.Open(ctx, filepath.Join(cfg.DataDir, "reconciled.db")); err != nil {
		return nil, err
	}
	cc := queue.ConnConfig{
		URL: cfg.NATSURL, Name: "reconciled-" + cfg.Instance,
		User: cfg.NATSUser, Password: cfg.NATSPassword, Token: cfg.NATSToken,
		CredsFile: cfg.NATSCreds, NKeySeedFile: cfg.NATSNK,
		TLS:    queue.TLSConfig{CAFile: cfg.NATSTLSCA, CertFile: cfg.NATSTLSCert, KeyFile: cfg.NATSTLSKey},
		Prefix: cfg.SubjectPrefix, Logger: log,
		Streams: queue.StreamsConfig{Replicas: cfg.StreamReplicas},
	}
	if cfg.NATSURL == "" {
		cc.Embedded = o.embedded
		if cc.Embedded == nil {
			d.ownEmb, err = queue.StartEmbedded(queue.EmbeddedConfig{DataDir: filepath.Join(cfg.DataDir, "nats"),
				Listen: cfg.NATSListen, ServerName: cfg.Instance})
			if err != nil {
				return nil, err
			}
			cc.Embedded = d.ownEmb
		}
	}
	if d.conn, err = queue.Connect(ctx, cc); err != nil {
		return nil, err
	}
	if err := d.conn.EnsureStreams(ctx); err != nil {
		return nil, err
	}
	d.engine = reconcile.NewEngine(d.sources, d.store, log.Named("engine"))
	// A burst of intents of one ledger shares a certified tip for a quarter
	// second: one read_state and BLS check instead of one per intent. The
	// follow-up asks for fresh tips (reconcile.FreshTip).
	d.engine.ReuseTips(250 * time.Millisecond)
	d.svc, err = reconcile.NewService(reconcile.ServiceConfig{
		Decider: d.engine, Store: store.ServiceStore{S: d.store}, Sink: queue.Sink{C: d.conn},
		Log: log.Named("service"), Metrics: d.metrics,
	})
	if err != nil {
		return nil, err
	}
	if err := d.svc.Resume(ctx); err != nil {
		return nil, err
	}

	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.stopBG = stop
	d.bg.Add(3)
	go func() {
		defer d.bg.Done()
		d.svc.RunFollowUp(bg, cfg.PollInterval, d.trigger)
	}()
	go func() {
		defer d.bg.Done()
		// The local store must not silently stop learning the fleet's
		// verdicts: a follower that cannot be set up is retried.
		delay := time.Second
		for {
			err := d.conn.FollowVerdictMsgs(bg, queue.FollowConfig{Durable: "verdicts-" + cfg.Instance},
				func(v reconcile.Verdict, h nats.Header) error {
					hdr, err := queue.DecodeIntentHeaders(h)
					if err != nil {
						log.Warn("verdict with unreadable intent headers", zap.String("intent_id", v.IntentID), zap.Error(err))
					}
					return d.svc.ImportVerdict(bg, v, hdr)
				})
			if bg.Err() != nil {
				return
			}
			log.Error("verdict follower stopped; restarting", zap.Duration("delay", delay), zap.Error(err))
			select {
			case <-bg.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, time.Minute)
		}
	}()
	go func() {
		defer d.bg.Done()
		d.reportProgress(bg, 10_000)
	}()

	d.intake, err = d.conn.ConsumeIntents(ctx, queue.IntakeConfig{
		MaxInFlight: cfg.MaxInflight, MaxMsgBytes: cfg.MaxMessageBytes, AckWait: cfg.AckWait,
	}, d.handle)
	if err != nil {
		d.stopBG()
		d.bg.Wait()
		return nil, err
	}
	return d, nil
}

// handle settles one intake delivery as the service says.
func (d *daemon) handle(ctx context.Context, dl *queue.Delivery) {
	start := time.Now()
	defer func() { d.metrics.Decided(time.Since(start)) }()
	if dl.NumDelivered > 1 {
		d.metrics.Redelivered()
	}
	o := d.svc.HandleIntent(ctx, dl.Data)
	var err error
	switch o.Kind {
	case reconcile.Ack:
		err = dl.Ack(context.WithoutCancel(ctx))
	case reconcile.Term:
		err = dl.Term(o.Reason)
	default:
		if dl.LastAttempt() && ctx.Err() == nil {
			// The server will not deliver it again: say so loudly, the
			// tool layer must re-publish it.
			d.log.Error("intent given up after its last delivery", zap.String("msg_id", dl.MsgID),
				zap.Uint64("delivered", dl.NumDelivered), zap.String("reason", o.Reason))
		}
		err = dl.Nak(o.Delay)
	}
	if err != nil {
		d.log.Warn("settle intent delivery", zap.String("msg_id", dl.MsgID), zap.String("outcome", o.Kind.String()), zap.Error(err))
	}
}

// sources gives the engine one client per ledger, created on first use.
func (d *daemon) sources(ledger string) (reconcile.History, reconcile.LedgerConfig, error) {
	spec, ok := d.cfg.Ledgers[ledger]
	if !ok && d.cfg.StrictLedgers {
		return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
	}
	if !ok {
		id, err := principal.Decode(ledger)
		if err != nil {
			return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
		}
		spec = ledgerSpec{ID: id, Verify: icrc3.VerifyChain}
	}
	d.clientsMu.Lock()
	defer d.clientsMu.Unlock()
	if c := d.clients[ledger]; c != nil {
		return icphistory.Choose(c), spec.Rules, nil
	}
	cc := icrc3.ClientConfig{Agent: d.agent, Ledger: spec.ID, RootKey: d.cfg.RootKey, Verify: spec.Verify}
	if d.clientConfig != nil {
		d.clientConfig(&cc)
	}
	c, err := icrc3.NewClient(cc)
	if err != nil {
		return nil, reconcile.LedgerConfig{}, fmt.Errorf("ledger %s: %w", ledger, err)
	}
	d.clients[ledger] = c
	// The ledger's history family (ICRC-3 or the ICP ledger's) is told by
	// its endpoints on first use.
	return icphistory.Choose(c), spec.Rules, nil
}

func (d *daemon) clientStats() map[string]icrc3.Stats {
	d.clientsMu.Lock()
	defer d.clientsMu.Unlock()
	out := make(map[string]icrc3.Stats, len(d.clients))
	for l, c := range d.clients {
		out[l] = c.Stats()
	}
	return out
}

// reportProgress logs, per ledger, each time another `every` blocks have
// been read: long scans show progress without a hook in the engine.
func (d *daemon) reportProgress(ctx context.Context, every uint64) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	logged := map[string]uint64{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for l, s := range d.clientStats() {
			if s.Blocks/every > logged[l]/every {
				d.log.Info("scan progress", zap.String("canister_id", l), zap.Uint64("blocks_read", s.Blocks),
					zap.Uint64("queries", s.Total))
				logged[l] = s.Blocks
			}
		}
	}
}

// FollowUpNow asks for a follow-up round at once (tests, demo).
func (d *daemon) followUpNow() {
	select {
	case d.trigger <- struct{}{}:
	default:
	}
}

// ready: NATS connected and the store writable.
func (d *daemon) ready(ctx context.Context) error {
	if !d.conn.NATS().IsConnected() {
		return errors.New("nats not connected")
	}
	if err := d.store.Writable(ctx); err != nil {
		return fmt.Errorf("store not writable: %w", err)
	}
	return nil
}

// shutdown stops taking intents, lets in-flight ones finish until ctx ends
// (then they are given back), stops the background loops, and closes NATS
// and the store.
func (d *daemon) shutdown(ctx context.Context) {
	if d.intake != nil {
		d.intake.Stop()
		if err := d.intake.Wait(ctx); err != nil {
			d.log.Warn("in-flight intents given back at the grace deadline", zap.Error(err))
		}
	}
	if d.stopBG != nil {
		d.stopBG()
		d.bg.Wait()
	}
	d.closeResources()
}

func (d *daemon) closeResources() {
	if d.conn != nil {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := d.conn.Drain(dctx); err != nil {
			d.log.Warn("nats drain", zap.Error(err))
		}
		cancel()
	}
	if d.ownEmb != nil {
		d.ownEmb.Shutdown()
	}
	if d.store != nil {
		if err := d.store.Close(); err != nil {
			d.log.Warn("close store", zap.Error(err))
		}
	}
}
