package daemon

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/family"
	"github.com/reconciled/reconciled/icagent"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// Config is everything an instance is told by its operator.
type Config struct {
	NATSURL, NATSListen          string
	NATSUser, NATSPassword       string
	NATSToken, NATSCreds, NATSNK string
	NATSTokenFile                string // read at every connection attempt
	NATSTLSCA, NATSTLSCert       string
	NATSTLSKey                   string
	SubjectPrefix                string
	StreamReplicas               int

	ICURL        string
	FetchRootKey bool
	RootKey      []byte // from --root-key-file

	// Ledgers are the configured ledgers by canister id.
	Ledgers       map[string]reconcile.LedgerConfig
	StrictLedgers bool
	// MaxStrangers bounds the unconfigured canisters followed at once and
	// MaxStrangerOpen the open intents of each (strangers.go; defaults
	// DefaultMaxStrangers and DefaultMaxStrangerOpen). Unused under
	// StrictLedgers, which reads no unconfigured canister.
	MaxStrangers, MaxStrangerOpen int

	DataDir string
	// StoreRecover moves a corrupt store aside (with its -wal and -shm)
	// and starts an empty one, instead of failing the start.
	StoreRecover bool
	// HTTPAddr is the listen address of the probes, /metrics and the
	// support API; empty serves nothing (Handler still builds the surface).
	HTTPAddr     string
	SupportToken string
	// SupportTokenFile, when set, replaces SupportToken: the file is read
	// again when it changes (support.TokenFile, one minute of overlap).
	SupportTokenFile string
	// ExplorerBlockURL and ExplorerAccountURL are the support page's
	// block-explorer link templates (support.Config); "" for none.
	ExplorerBlockURL, ExplorerAccountURL string

	PollInterval time.Duration
	// MaxInflight is the number of intents handled at once
	// (DefaultMaxInflight in a release's configuration).
	MaxInflight     int
	QueryTimeout    time.Duration
	AckWait         time.Duration
	MaxMessageBytes int
	Grace           time.Duration
	// LeaseTTL is how long a ledger's follow-up lease outlives its holder
	// (default 15 s): the longest an open intent waits when the instance
	// following it up vanishes without a SIGTERM.
	LeaseTTL time.Duration
	Instance string

	// PurgeEvery is the shortest time between two purges of acknowledged
	// intents from the intent stream (queue.IntakeConfig.PurgeEvery).
	PurgeEvery time.Duration
	// StuckAfter is the number of deliveries after which an intent given
	// back for a failure is reported (queue.IntakeConfig.StuckAfter).
	StuckAfter int

	// OpenAgeAlert is the age past which a ledger's oldest open intent is
	// logged as a warning (default 25 h: a day's window and an hour).
	OpenAgeAlert time.Duration

	// Retention is how long a final intent stays in the store after its
	// final verdict (default DefaultRetention); a new verdict follower
	// imports only that much of the stream. It may not be below
	// RepublishHorizon (default DefaultRepublishHorizon), see
	// CheckRetention.
	Retention        time.Duration
	RepublishHorizon time.Duration
	// BlockCacheMargin is the ledger time of blocks the block cache keeps
	// below what intents may still need: the oldest open intent's window
	// and RepublishHorizon below each ledger's newest cached block
	// (default DefaultBlockCacheMargin). Older blocks are trimmed; a window
	// that needs them again reads them from the ledger.
	BlockCacheMargin time.Duration
}

// Options are what a caller wires in besides the operator's configuration:
// the IC agent, a logger, and hooks for tests and benchmarks.
type Options struct {
	Log   *zap.Logger
	Agent *agent.Agent
	// Embedded is an in-process NATS server shared with the caller (not
	// shut down by the daemon); nil with Config.NATSURL empty starts one
	// under <data>/nats.
	Embedded *queue.Embedded
	// ClientConfig adjusts each ledger client's configuration.
	ClientConfig func(*icrc3history.ClientConfig)
	// History wraps each ledger's history as the engine reads it (e.g. to
	// count or slow reads).
	History func(ledger string, h reconcile.History) reconcile.History
	// Sink wraps the verdict sink (e.g. to fail at a chosen point).
	Sink func(reconcile.Sink) reconcile.Sink
	// ServiceStore wraps the service's store port (e.g. to fail its writes
	// for a while): intake, follow-up, outbox and the follower's imports go
	// through it; the engine's block cache and the probes do not.
	ServiceStore func(reconcile.Store) reconcile.Store
	// Intake wraps the handling of each intent delivery.
	Intake func(next queue.Handler) queue.Handler
	// BackoffBase and BackoffMax bound the follow-up backoff of unreadable
	// intents (reconcile defaults when zero).
	BackoffBase, BackoffMax time.Duration
	// IntakeRetryMax caps the delay before an intent whose handling failed
	// is delivered again (queue.IntakeConfig.RetryMax; default 10 s).
	IntakeRetryMax time.Duration
	// Store tunes the store's opening (store.Options; the zero value is
	// the production setting).
	Store store.Options
}

// Daemon is one running instance: store, NATS, engine, service, the
// background loops (follow-up, verdict follower, leases, progress) and the
// HTTP surface.
type Daemon struct {
	cfg     Config
	opts    Options
	log     *zap.Logger
	store   *store.Store
	ownEmb  *queue.Embedded
	conn    *queue.Conn
	engine  *reconcile.Engine
	svc     *reconcile.Service
	metrics *reconcile.Metrics
	intake  *queue.Intake
	leases  *queue.Leases
	// origin names this opening of the store on the verdicts its service
	// publishes, so that its own follower skips them (queue.HeaderOrigin).
	origin string
	// storeID is the store's identity (store.ImportPosition), named in the
	// verdict follower's metadata; imports is the follower's progress.
	storeID string
	imports *importHealth
	trigger chan struct{}
	wake    chan struct{} // to the lease loop, which then triggers a round

	clientsMu sync.Mutex
	clients   map[string]*icrc3history.Client
	// strangers bounds what unconfigured canisters cost; retired sums the
	// counters of their evicted clients.
	strangers *strangers
	retired   retiredStats

	http   *http.Server
	httpLn net.Listener
	gauges storeGauges // the store's figures /metrics serves (http.go)

	stopBG   context.CancelFunc
	bg       sync.WaitGroup
	shutOnce sync.Once

	// closing is set once the daemon closes its resources itself; failed
	// is closed, with failErr set, once the daemon gives up (Failed).
	closing   atomic.Bool
	stopWatch context.CancelFunc // ends watchStore
	failed    chan struct{}
	failErr   error
	failOnce  sync.Once
}

// New opens the store, connects to NATS (or starts the embedded server),
// ensures the streams, resumes the outbox, and starts the background loops,
// the intake and, with Config.HTTPAddr, the HTTP server. ctx bounds the
// start only.
func New(ctx context.Context, cfg Config, o Options) (d *Daemon, err error) {
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.Instance == "" || cfg.DataDir == "" {
		// The instance names its verdict follower and its leases.
		return nil, errors.New("daemon: Config.Instance and Config.DataDir are required")
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 5 * time.Second
	}
	if cfg.OpenAgeAlert <= 0 {
		cfg.OpenAgeAlert = defaultOpenAgeAlert
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.RepublishHorizon <= 0 {
		cfg.RepublishHorizon = DefaultRepublishHorizon
	}
	if cfg.BlockCacheMargin <= 0 {
		cfg.BlockCacheMargin = DefaultBlockCacheMargin
	}
	if err := CheckRetention(cfg.Retention, cfg.RepublishHorizon); err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	dm := &Daemon{cfg: cfg, opts: o, log: log, failed: make(chan struct{}),
		clients: map[string]*icrc3history.Client{}, strangers: newStrangers(cfg.MaxStrangers, cfg.MaxStrangerOpen), trigger: make(chan struct{}, 1), wake: make(chan struct{}, 1), metrics: reconcile.NewMetrics()}
	d = dm
	dm.imports = newImportHealth(time.Now)
	defer func() {
		if err != nil {
			// A start that met a damaged store says so, whichever step
			// met it.
			if dm.store != nil && dm.store.Corrupt() != nil {
				err = dm.store.Corrupt()
			}
			dm.closeResources()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	if d.store, err = d.openStore(ctx, filepath.Join(cfg.DataDir, "reconciled.db")); err != nil {
		return nil, err
	}
	var storeWatch context.Context
	storeWatch, d.stopWatch = context.WithCancel(context.Background())
	go d.watchStore(storeWatch)
	d.origin = cfg.Instance + ":" + rand.Text()
	cc := queue.ConnConfig{
		URL: cfg.NATSURL, Name: "reconciled-" + cfg.Instance,
		User: cfg.NATSUser, Password: cfg.NATSPassword, Token: cfg.NATSToken, TokenFile: cfg.NATSTokenFile,
		CredsFile: cfg.NATSCreds, NKeySeedFile: cfg.NATSNK,
		TLS:    queue.TLSConfig{CAFile: cfg.NATSTLSCA, CertFile: cfg.NATSTLSCert, KeyFile: cfg.NATSTLSKey},
		Prefix: cfg.SubjectPrefix, Logger: log,
		Streams: queue.StreamsConfig{Replicas: cfg.StreamReplicas},
	}
	// Credentials rotated on the server before this instance's are waited
	// out, not taken as final.
	cc.RetryAuthErrors = true
	if cfg.NATSURL == "" {
		cc.Embedded = o.Embedded
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
	go d.watchConn()
	if err := d.conn.EnsureStreams(ctx); err != nil {
		return nil, err
	}
	// A store that lacks verdicts its follower has read (a new file under
	// a name that followed before, an older copy) imports them again.
	stream, startAfter, err := d.planImport(ctx)
	if err != nil {
		return nil, err
	}
	if d.leases, err = d.conn.Leases(ctx, queue.LeaseConfig{Holder: cfg.Instance, TTL: cfg.LeaseTTL}); err != nil {
		return nil, err
	}
	d.engine = reconcile.NewEngine(d.sources, d.store, log.Named("engine"))
	d.metrics.LabelLedgers(d.ledgerLabel)
	// A burst of intents of one ledger shares a certified tip for a quarter
	// second: one read_state and BLS check instead of one per intent. The
	// follow-up asks for fresh tips (reconcile.FreshTip).
	d.engine.ReuseTips(250 * time.Millisecond)
	// Intents arriving while a walk of their ledger runs (a cold walk of a
	// day's window takes about a second) join it rather than wait for it
	// to end, while its tip is under two seconds old: a payment made in
	// those seconds is seen at the next follow-up.
	d.engine.JoinRunning(2 * time.Second)
	var sink reconcile.Sink = queue.Sink{C: d.conn, Origin: d.origin}
	if o.Sink != nil {
		sink = o.Sink(sink)
	}
	var port reconcile.Store = d.store
	if o.ServiceStore != nil {
		port = o.ServiceStore(port)
	}
	d.svc, err = reconcile.NewService(reconcile.ServiceConfig{
		Decider: d.engine, Store: port, Sink: sink,
		Log: log.Named("service"), Metrics: d.metrics,
		BackoffBase: o.BackoffBase, BackoffMax: o.BackoffMax,
		Owns: d.leases.Holds, Serves: d.serves(), Hold: d.holdStranger,
	})
	if err != nil {
		return nil, err
	}
	if err := d.svc.Resume(ctx); err != nil {
		return nil, err
	}
	if n, err := d.store.WatchOpenIntents(ctx); err != nil {
		return nil, err
	} else if n > 0 {
		log.Info("open intents of the fleet put on the watch list", zap.Int("intents", n))
	}

	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.stopBG = stop
	d.bg.Add(4)
	go func() {
		defer d.bg.Done()
		d.svc.RunFollowUp(bg, cfg.PollInterval, d.trigger)
	}()
	followed := make(chan struct{})
	go func() {
		defer d.bg.Done()
		defer close(followed)
		d.followVerdicts(bg, startAfter)
	}()
	d.bg.Go(func() { d.recordImports(bg, stream, startAfter, time.Second, followed) })
	d.bg.Go(func() { d.pollImportLag(bg, 5*time.Second) })
	// A daemon New returns knows how far behind its store is (one JetStream
	// round trip): readiness then answers at once.
	select {
	case <-d.imports.setUpTried():
	case <-ctx.Done():
	}
	go func() {
		defer d.bg.Done()
		d.holdLeases(bg)
	}()
	go func() {
		defer d.bg.Done()
		d.reportProgress(bg, 10_000)
	}()
	d.bg.Go(func() { d.watchOpenAges(bg, time.Minute) })
	d.bg.Go(func() { d.pruneFinals(bg, pruneEvery) })
	if d.ownEmb != nil {
		d.bg.Go(func() { d.superviseEmbedded(bg) })
	}

	handler := d.handle
	if o.Intake != nil {
		handler = o.Intake(handler)
	}
	d.intake, err = d.conn.ConsumeIntents(ctx, queue.IntakeConfig{
		MaxInFlight: cfg.MaxInflight, MaxMsgBytes: cfg.MaxMessageBytes, AckWait: cfg.AckWait,
		PurgeEvery: cfg.PurgeEvery, StuckAfter: cfg.StuckAfter, RetryMax: o.IntakeRetryMax, Metrics: d.metrics.Registry(),
	}, handler)
	if err != nil {
		d.stopLoops()
		return nil, err
	}
	if cfg.HTTPAddr != "" {
		if d.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			d.intake.Stop()
			_ = d.intake.Wait(context.Background())
			d.stopLoops()
			return nil, fmt.Errorf("http listen %s: %w", cfg.HTTPAddr, err)
		}
		h, err := d.handlerErr()
		if err != nil {
			d.intake.Stop()
			_ = d.intake.Wait(context.Background())
			d.stopLoops()
			d.httpLn.Close()
			return nil, err
		}
		d.http = newHTTPServer(h)
		go func() {
			if err := d.http.Serve(d.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server stopped", zap.Error(err))
			}
		}()
	}
	return d, nil
}

// watchConn gives the daemon up when its NATS connection closed for good:
// a daemon without NATS takes no intent and publishes no verdict, and no
// probe of its own would say so for ever; its supervisor restarts it.
func (d *Daemon) watchConn() {
	<-d.conn.Closed()
	if d.closing.Load() {
		return
	}
	err := d.conn.Err()
	if err == nil {
		err = errors.New("nats connection closed")
	}
	d.fail(fmt.Errorf("daemon: cannot go on: its NATS connection is closed for good: %w", err))
}

// openStore opens the store. A damaged one is moved aside first when
// Config.StoreRecover says so, and the new store then imports the fleet's
// verdicts from the stream.
func (d *Daemon) openStore(ctx context.Context, path string) (*store.Store, error) {
	s, err := store.OpenWith(ctx, path, d.opts.Store)
	if errors.Is(err, store.ErrCorrupt) && d.cfg.StoreRecover {
		to, merr := store.MoveAside(path, time.Now())
		if merr != nil {
			return nil, errors.Join(err, merr)
		}
		d.log.Warn("corrupt store moved aside; starting an empty one", zap.String("moved_to", to), zap.Error(err))
		s, err = store.OpenWith(ctx, path, d.opts.Store)
	}
	if err != nil {
		return nil, err
	}
	if !s.Checked() {
		d.log.Warn("store opened without a complete quick_check (it ran past its bound): damage is found only when a read meets it",
			zap.String("path", s.Path()))
	}
	return s, nil
}

// watchStore ends the daemon when its store is found damaged: every later
// answer from it may be wrong, and only a new file mends it.
func (d *Daemon) watchStore(ctx context.Context) {
	select {
	case <-d.store.Corrupted():
	case <-ctx.Done():
		return
	}
	if d.closing.Load() {
		return
	}
	err := d.store.Corrupt()
	d.log.Error("daemon cannot go on: its store is corrupt", zap.Error(err))
	d.fail(err)
}

// followVerdicts imports the fleet's verdicts into the local store. The
// store must not silently stop learning them: a follower that cannot be
// set up is retried.
func (d *Daemon) followVerdicts(ctx context.Context, startAfter uint64) {
	delay := time.Second
	for {
		// A consumer created now (it vanished meanwhile) starts after what
		// the store holds.
		fc := queue.FollowConfig{Durable: d.followerName(), SkipOrigin: d.origin, StoreID: d.storeID,
			StartAfter: max(startAfter, d.imports.imported()), StartTime: d.followStart(time.Now()), Progress: d.imports.progress}
		err := d.conn.FollowVerdictMsgs(ctx, fc,
			func(v reconciled.Verdict, h nats.Header) error {
				hdr, err := queue.DecodeIntentHeaders(h)
				if err != nil {
					d.log.Warn("verdict with unreadable intent headers", zap.String("intent_id", v.IntentID), zap.Error(err))
				}
				return d.svc.ImportVerdict(ctx, v, hdr)
			})
		if ctx.Err() != nil {
			return
		}
		d.imports.failed(err)
		d.log.Error("verdict follower stopped; restarting", zap.Duration("delay", delay), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Minute)
	}
}

// handle settles one intake delivery as the service says.
func (d *Daemon) handle(ctx context.Context, dl *queue.Delivery) {
	start := time.Now()
	defer func() { d.metrics.Decided(time.Since(start)) }()
	if dl.NumDelivered > 1 {
		d.metrics.Redelivered()
	}
	o := d.svc.HandleIntentOn(ctx, dl.CanisterID(), dl.Data)
	if err := dl.Settle(ctx, o); err != nil {
		d.log.Warn("settle intent delivery", zap.String("msg_id", dl.MsgID), zap.String("outcome", o.Kind.String()), zap.Error(err))
	}
	d.strangerDone(ctx, dl.CanisterID(), dl.IntentID())
}

// serves is the service's Serves: under strict ledgers only the configured
// ledgers are read; otherwise any canister may be one (nil).
func (d *Daemon) serves() func(string) bool {
	if !d.cfg.StrictLedgers {
		return nil
	}
	return func(ledger string) bool {
		_, ok := d.cfg.Ledgers[ledger]
		return ok
	}
}

// sources gives the engine one client per ledger, created on first use.
func (d *Daemon) sources(ledger string) (reconcile.History, reconcile.LedgerConfig, error) {
	spec, ok := d.cfg.Ledgers[ledger]
	if !ok && d.cfg.StrictLedgers {
		return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
	}
	if !ok {
		id, err := principal.Decode(ledger)
		if err != nil {
			return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
		}
		spec = reconcile.LedgerConfig{ID: id, Verify: icrc3.VerifyChain}
	}
	d.clientsMu.Lock()
	defer d.clientsMu.Unlock()
	c := d.clients[ledger]
	if c == nil {
		cc := icrc3history.ClientConfig{Agent: d.opts.Agent, Ledger: spec.ID, RootKey: d.cfg.RootKey, Verify: spec.Verify}
		if d.opts.ClientConfig != nil {
			d.opts.ClientConfig(&cc)
		}
		var err error
		if c, err = icrc3history.NewClient(cc); err != nil {
			return nil, reconcile.LedgerConfig{}, fmt.Errorf("ledger %s: %w", ledger, err)
		}
		d.clients[ledger] = c
	}
	// The ledger's history family (ICRC-3 or the ICP ledger's) is told by
	// its endpoints on first use.
	var h reconcile.History = family.Choose(c)
	if d.opts.History != nil {
		h = d.opts.History(ledger, c)
	}
	if !ok {
		h = &strangerHistory{History: h, ledger: ledger, conn: c}
	}
	return h, spec, nil
}

// ClientStats returns each ledger client's counters.
func (d *Daemon) ClientStats() map[string]icagent.Stats {
	d.clientsMu.Lock()
	defer d.clientsMu.Unlock()
	out := make(map[string]icagent.Stats, len(d.clients))
	for l, c := range d.clients {
		out[l] = c.Stats()
	}
	return out
}

// Client returns the ledger's client once the engine has used it.
func (d *Daemon) Client(ledger string) *icrc3history.Client {
	d.clientsMu.Lock()
	defer d.clientsMu.Unlock()
	return d.clients[ledger]
}

// reportProgress logs, per ledger, each time another `every` blocks have
// been read: long scans show progress without a hook in the engine.
func (d *Daemon) reportProgress(ctx context.Context, every uint64) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	logged := map[string]uint64{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for l, s := range d.ClientStats() {
			if s.Blocks/every > logged[l]/every {
				d.log.Info("scan progress", zap.String("canister_id", l), zap.Uint64("blocks_read", s.Blocks),
					zap.Uint64("queries", s.Total))
				logged[l] = s.Blocks
			}
		}
	}
}

// FollowUpNow asks for a follow-up round at once, after the leases of the
// ledgers with open intents have been renewed or taken.
func (d *Daemon) FollowUpNow() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Config returns the configuration the daemon runs with (defaults applied).
func (d *Daemon) Config() Config { return d.cfg }

// Store is the daemon's local store.
func (d *Daemon) Store() *store.Store { return d.store }

// Metrics is the service's metrics.
func (d *Daemon) Metrics() *reconcile.Metrics { return d.metrics }

// Conn is the daemon's NATS connection.
func (d *Daemon) Conn() *queue.Conn { return d.conn }

// Embedded is the NATS server the daemon started itself, nil when it
// connects to a URL or to a server the caller shares.
func (d *Daemon) Embedded() *queue.Embedded { return d.ownEmb }

// HTTPAddr is the bound HTTP address ("" without Config.HTTPAddr).
func (d *Daemon) HTTPAddr() string {
	if d.httpLn == nil {
		return ""
	}
	return d.httpLn.Addr().String()
}

// Leases is the daemon's view of the fleet's follow-up leases.
func (d *Daemon) Leases() *queue.Leases { return d.leases }

// Shutdown stops taking intents, lets in-flight ones finish until ctx ends
// (then they are given back at once), releases the leases it holds so
// another instance follows up their ledgers now, stops the background
// loops, and closes HTTP, NATS and the store. It may be called once or
// more; later calls return at once.
func (d *Daemon) Shutdown(ctx context.Context) {
	d.shutOnce.Do(func() {
		if d.intake != nil {
			d.intake.Stop()
			if err := d.intake.Wait(ctx); err != nil {
				d.log.Warn("in-flight intents given back at the grace deadline", zap.Error(err))
			}
		}
		d.stopLoops()
		if d.leases != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			d.leases.ReleaseAll(rctx)
			cancel()
		}
		if d.http != nil {
			hctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = d.http.Shutdown(hctx)
			cancel()
		}
		d.closeResources()
	})
}

func (d *Daemon) stopLoops() {
	if d.stopBG != nil {
		d.stopBG()
		d.bg.Wait()
	}
}

func (d *Daemon) closeResources() {
	d.closing.Store(true)
	if d.stopWatch != nil {
		d.stopWatch()
	}
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

// The store is the service's persistence and the engine's block cache as
// it is, and queue.Sink the service's verdict sink: both speak the
// vocabulary, and no adapter stands between them and the service.
var (
	_ reconcile.Store         = (*store.Store)(nil)
	_ reconcile.CheckRecorder = (*store.Store)(nil)
	_ reconcile.BlockCache    = (*store.Store)(nil)
	_ reconcile.Sink          = queue.Sink{}
)
