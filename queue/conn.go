package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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
	// TokenFile holds the token, read again at every connection attempt, so
	// a token rotated in the file is taken up on the next reconnect.
	TokenFile    string
	CredsFile    string // JWT + seed (.creds)
	NKeySeedFile string
	TLS          TLSConfig

	// Prefix is the first subject token(s); "" means DefaultPrefix.
	Prefix string
	// Streams tunes EnsureStreams.
	Streams StreamsConfig

	// ReconnectMin and ReconnectMax bound the exponential reconnect backoff
	// (defaults 250 ms and 10 s). Reconnection never gives up: a sidecar
	// without NATS is useless, and giving up would need a restart to heal.
	ReconnectMin, ReconnectMax time.Duration
	// RetryAuthErrors keeps connecting through authorization errors, which
	// nats.go otherwise takes as final after the second in a row: a
	// server's credentials may change before the client's (a rotated
	// token), and a daemon must be there when they agree again. A command
	// line tool leaves it false and fails at once on bad credentials.
	RetryAuthErrors bool
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
	// closing is set by Close and Drain: a close that follows is ours.
	closing atomic.Bool
	// closeErr says why the connection closed when it was not ours (set
	// before closed is closed).
	closeErr error

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
		nats.ClosedHandler(func(nc *nats.Conn) {
			if c.closing.Load() {
				log.Info("nats connection closed")
			} else {
				lastErr.Lock()
				le := lastErr.err
				lastErr.Unlock()
				if le == nil {
					le = nc.LastError()
				}
				if le == nil {
					le = errors.New("no error reported")
				}
				c.closeErr = fmt.Errorf("queue: nats connection closed for good: %w", le)
				log.Error("nats connection closed for good: it will not reconnect", zap.Error(le))
			}
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
	// Until then, each connectWarnEvery says why not: the first attempts'
	// errors (an authorization violation included) reach no handler.
	//
	// Credentials the server refuses before the first connection are final,
	// even with RetryAuthErrors (which nats.go applies to every attempt, the
	// first ones included): a process started with them fails its start,
	// naming the refusal, and its supervisor restarts it (re-reading a token
	// file). Only a connection that was up keeps trying through them. The
	// refusal is read from the client's last error, checked every
	// authCheckEvery, and final once it has lasted authRefusedFor.
	warn := time.NewTicker(connectWarnEvery)
	defer warn.Stop()
	authCheck := time.NewTicker(authCheckEvery)
	defer authCheck.Stop()
	var refusedSince time.Time
	for !nc.IsConnected() {
		select {
		case <-up:
		case <-warn.C:
			log.Warn("nats not connected yet; still trying", zap.Error(nc.LastError()))
			continue
		case now := <-authCheck.C:
			le := nc.LastError()
			switch {
			case !cfg.RetryAuthErrors || !isAuthError(le):
				refusedSince = time.Time{}
			case refusedSince.IsZero():
				refusedSince = now
			case now.Sub(refusedSince) >= authRefusedFor:
				c.closing.Store(true)
				nc.Close()
				return nil, fmt.Errorf("queue: connect: the server refuses the credentials: %w", le)
			}
			continue
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
			c.closing.Store(true)
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
		break
	}
	js, err := jetstream.New(nc)
	if err != nil {
		c.closing.Store(true)
		nc.Close()
		return nil, fmt.Errorf("queue: jetstream: %w", err)
	}
	c.nc, c.js = nc, js
	c.watchStatus()
	return c, nil
}

// connectWarnEvery is how often Connect logs that it is still waiting.
var connectWarnEvery = 5 * time.Second

// Before the first connection, an authorization refusal lasting
// authRefusedFor (checked every authCheckEvery) fails Connect: a few
// attempts, as nats.go's own rule of the same error twice.
const (
	authCheckEvery = 100 * time.Millisecond
	authRefusedFor = time.Second
)

// isAuthError reports whether err is the server refusing the client's
// credentials. nats.go's errors for them are not all its sentinels (the
// server's text is kept), so the text is matched too.
func isAuthError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) {
		return true
	}
	e := strings.ToLower(err.Error())
	return strings.Contains(e, "authorization violation") || strings.Contains(e, "authentication expired") ||
		strings.Contains(e, "authentication revoked")
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
	if cfg.RetryAuthErrors {
		opts = append(opts, nats.IgnoreAuthErrorAbort())
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
	if cfg.TokenFile != "" {
		auth++
		// Read once now so that a missing file fails the start, then at
		// every connection attempt.
		if _, err := readToken(cfg.TokenFile); err != nil {
			return nil, err
		}
		file, log := cfg.TokenFile, cfg.Logger
		opts = append(opts, nats.TokenHandler(func() string {
			tok, err := readToken(file)
			if err != nil && log != nil {
				// The server refuses the empty token; the next attempt
				// reads the file again.
				log.Warn("nats token file unreadable", zap.Error(err))
			}
			return tok
		}))
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
		return nil, errors.New("queue: connect: choose one of user/password, token, token file, creds file and nkey seed file")
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

// readToken reads a token file; the error names the file, never its
// content.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("queue: nats token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("queue: nats token file %s is empty", path)
	}
	return tok, nil
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

// Closed is closed once the connection is closed for good: by Close or
// Drain, or by the client giving up (Err says why).
func (c *Conn) Closed() <-chan struct{} { return c.closed }

// Err is nil while the connection is open or after Close or Drain; once it
// closed for any other reason, it says why. Nothing reconnects it then:
// whoever depends on it must stop.
func (c *Conn) Err() error {
	select {
	case <-c.closed:
		return c.closeErr
	default:
		return nil
	}
}

// Close closes the connection at once; unacknowledged deliveries are
// redelivered by the server after their ack wait.
func (c *Conn) Close() {
	c.closing.Store(true)
	c.nc.Close()
	<-c.closed
}

// Drain unsubscribes, lets pending callbacks and publishes finish, then
// closes. It returns when the connection is closed or ctx ends (then the
// connection is closed at once).
func (c *Conn) Drain(ctx context.Context) error {
	c.closing.Store(true)
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
