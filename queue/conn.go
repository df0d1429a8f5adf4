package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// ConnConfig says where and how to connect. Exactly one of URL and Embedded
// is set.
type ConnConfig struct {
	// URL is a comma-separated list of nats:// or tls:// server URLs.
	URL string
	// Embedded connects in-process to a server started by StartEmbedded,
	// without a socket.
	Embedded *Embedded
	// Name identifies the connection in server monitoring.
	Name string

	// Authentication; at most one method besides TLS client certificates.
	User, Password string
	Token          string
	CredsFile      string // JWT + seed (.creds)
	NKeySeedFile   string
	TLS            TLSConfig

	// Prefix is the first subject token(s); "" means DefaultPrefix.
	Prefix string
	// Streams tunes EnsureStreams.
	Streams StreamsConfig

	// ReconnectMin and ReconnectMax bound the exponential reconnect backoff
	// (defaults 250 ms and 10 s). Reconnection never gives up: a sidecar
	// without NATS is useless, and giving up would need a restart to heal.
	ReconnectMin, ReconnectMax time.Duration
	// Logger receives connection events; nil discards them.
	Logger *zap.Logger
}

// TLSConfig names PEM files. CAFile alone verifies the server; CertFile and
// KeyFile add a client certificate.
type TLSConfig struct {
	CAFile, CertFile, KeyFile string
}

func (t TLSConfig) enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// Conn is a NATS connection with its JetStream context and subjects.
type Conn struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subj    Subjects
	streams StreamsConfig
	log     *zap.Logger
	closed  chan struct{}

	mu       sync.Mutex
	verdicts jetstream.Stream // cached for direct gets

	batches verdictBatches // first verdicts published together

	health connHealth // health.go
}

// Connect dials NATS and returns once the connection is up. While the
// server is unreachable it keeps retrying until ctx ends, so a sidecar may
// start before NATS does; a CLI passes a context with a deadline.
func Connect(ctx context.Context, cfg ConnConfig) (*Conn, error) {
	subj, err := NewSubjects(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	streams, err := cfg.Streams.withDefaults()
	if err != nil {
		return nil, err
	}
	if (cfg.URL == "") == (cfg.Embedded == nil) {
		return nil, errors.New("queue: connect: set exactly one of URL and Embedded")
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("nats")
	opts, err := cfg.options()
	if err != nil {
		return nil, err
	}

	up := make(chan struct{}, 1)
	signal := func() {
		select {
		case up <- struct{}{}:
		default:
		}
	}
	c := &Conn{subj: subj, streams: streams, log: log, closed: make(chan struct{})}
	c.batches.q.Max = maxVerdictBatch
	var lastErr struct {
		sync.Mutex
		err error
	}
	opts = append(opts,
		nats.ConnectHandler(func(nc *nats.Conn) {
			log.Info("nats connected", zap.String("url", where(nc)))
			signal()
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err == nil {
				// Our own Close or Drain.
				log.Debug("nats disconnected")
				return
			}
			lastErr.Lock()
			lastErr.err = err
			lastErr.Unlock()
			log.Warn("nats disconnected", zap.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", zap.String("url", where(nc)))
			signal()
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			log.Info("nats connection closed")
			close(c.closed)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			lastErr.Lock()
			lastErr.err = err
			lastErr.Unlock()
			fields := []zap.Field{zap.Error(err)}
			if sub != nil {
				fields = append(fields, zap.String("subject", sub.Subject))
			}
			log.Warn("nats async error", fields...)
		}),
	)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("queue: connect: %w", err)
	}
	// With RetryOnFailedConnect the handlers above report the first
	// successful connection; without a server it keeps reconnecting.
	if !nc.IsConnected() {
		select {
		case <-up:
		case <-c.closed:
			// The client gave up for good, e.g. on repeated authorization
			// violations: waiting longer would hang silently.
			lastErr.Lock()
			le := lastErr.err
			lastErr.Unlock()
			if le == nil {
				le = nc.LastError()
			}
			return nil, fmt.Errorf("queue: connect: connection closed: %v", le)
		case <-ctx.Done():
			nc.Close()
			lastErr.Lock()
			le := lastErr.err
			lastErr.Unlock()
			if le == nil {
				le = nc.LastError()
			}
			if le != nil {
				return nil, fmt.Errorf("queue: connect: %w (last error: %v)", ctx.Err(), le)
			}
			return nil, fmt.Errorf("queue: connect: %w", ctx.Err())
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("queue: jetstream: %w", err)
	}
	c.nc, c.js = nc, js
	c.watchStatus()
	return c, nil
}

// where names the server for logs; the redacted URL never shows a password.
func where(nc *nats.Conn) string {
	if nc.Opts.InProcessServer != nil {
		return "in-process"
	}
	return nc.ConnectedUrlRedacted()
}

func (cfg ConnConfig) options() ([]nats.Option, error) {
	minWait, maxWait := cfg.ReconnectMin, cfg.ReconnectMax
	if minWait <= 0 {
		minWait = 250 * time.Millisecond
	}
	if maxWait < minWait {
		maxWait = max(10*time.Second, minWait)
	}
	opts := []nats.Option{
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.CustomReconnectDelay(reconnectDelay(minWait, maxWait)),
	}
	if cfg.Name != "" {
		opts = append(opts, nats.Name(cfg.Name))
	}
	if cfg.Embedded != nil {
		// The Embedded, not its server: a restarted server is reached
		// by the client's reconnect.
		opts = append(opts, nats.InProcessServer(cfg.Embedded))
	}
	auth := 0
	if cfg.User != "" || cfg.Password != "" {
		auth++
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		auth++
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.CredsFile != "" {
		auth++
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.NKeySeedFile != "" {
		auth++
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			// The error names the file, never the seed.
			return nil, fmt.Errorf("queue: nkey seed file: %w", err)
		}
		opts = append(opts, o)
	}
	if auth > 1 {
		return nil, errors.New("queue: connect: choose one of user/password, token, creds file and nkey seed file")
	}
	if cfg.TLS.enabled() {
		if (cfg.TLS.CertFile == "") != (cfg.TLS.KeyFile == "") {
			return nil, errors.New("queue: connect: TLS client certificate needs both cert and key files")
		}
		if cfg.TLS.CAFile != "" {
			opts = append(opts, nats.RootCAs(cfg.TLS.CAFile))
		}
		if cfg.TLS.CertFile != "" {
			opts = append(opts, nats.ClientCert(cfg.TLS.CertFile, cfg.TLS.KeyFile))
		}
		opts = append(opts, nats.Secure())
	}
	return opts, nil
}

// reconnectDelay doubles from minWait to maxWait with ±20% jitter, so a fleet
// of sidecars does not reconnect in lockstep after a server restart.
func reconnectDelay(minWait, maxWait time.Duration) nats.ReconnectDelayHandler {
	return func(attempts int) time.Duration {
		d := minWait
		for i := 1; i < attempts && d < maxWait; i++ {
			d *= 2
		}
		d = min(d, maxWait)
		jitter := time.Duration(rand.Int64N(int64(d)/5+1)) - d/10
		return d + jitter
	}
}

// NATS returns the underlying connection (health checks, metrics).
func (c *Conn) NATS() *nats.Conn { return c.nc }

// JetStream returns the JetStream context.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }

// Subjects returns the subject builder of this connection's prefix.
func (c *Conn) Subjects() Subjects { return c.subj }

// Close closes the connection at once; unacknowledged deliveries are
// redelivered by the server after their ack wait.
func (c *Conn) Close() {
	c.nc.Close()
	<-c.closed
}

// Drain unsubscribes, lets pending callbacks and publishes finish, then
// closes. It returns when the connection is closed or ctx ends (then the
// connection is closed at once).
func (c *Conn) Drain(ctx context.Context) error {
	if err := c.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		// Drain refuses while reconnecting and closes instead.
		<-c.closed
		return fmt.Errorf("queue: drain: %w", err)
	}
	select {
	case <-c.closed:
		return nil
	case <-ctx.Done():
		c.nc.Close()
		<-c.closed
		return fmt.Errorf("queue: drain: %w", ctx.Err())
	}
}
