package queue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"
)

// EmbeddedConfig configures an in-process nats-server with JetStream.
// Fields are added, never repurposed, so cluster settings (routes, cluster
// name) can join later without breaking callers.
type EmbeddedConfig struct {
	// DataDir holds the JetStream store (created 0700 if missing).
	DataDir string
	// Listen is "" for in-process connections only (no socket), or a
	// loopback host:port ("127.0.0.1:0" picks a free port). Other hosts are
	// refused: the embedded server has no authentication.
	Listen string
	// ServerName names the server in logs and, later, in a cluster; empty
	// lets the server use its generated id.
	ServerName string
	// ReadyTimeout bounds the wait for the server to accept clients
	// (default 10 s).
	ReadyTimeout time.Duration
	// Logger receives the server's log lines; nil discards them.
	Logger *zap.Logger
}

// Embedded is a running in-process nats-server. Its JetStream store is
// watched by Supervise, which restarts the server on the same store when
// the store failed; clients connected with ConnConfig.Embedded reconnect
// to the new server.
type Embedded struct {
	cfg    EmbeddedConfig
	opts   *server.Options // each start runs on a clone
	listen bool

	// life is held by a restart and by Shutdown: a Shutdown returns only
	// once no server of this Embedded runs.
	life   sync.Mutex
	closed bool

	mu       sync.Mutex
	srv      *server.Server
	since    time.Time // JetStream seen failing since (zero: healthy)
	restarts uint64
}

// StartEmbedded starts a JetStream-enabled server that fsyncs every write, so
// an acknowledged intent or verdict survives a crash of the process or host.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("queue: embedded server: DataDir is required")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("queue: embedded server: create data dir: %w", err)
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		JetStream:  true,
		StoreDir:   cfg.DataDir,
		// The default flushes every 2 minutes: an acknowledged publish could
		// be lost on power failure, and a lost intent is an unknown outcome
		// nobody settles.
		SyncAlways: true,
		// The daemon owns signal handling (SIGTERM drains it).
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
		DontListen: cfg.Listen == "",
	}
	if cfg.Listen != "" {
		host, port, err := loopbackHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("queue: embedded server: %w", err)
		}
		opts.Host, opts.Port = host, port
		if port != server.RANDOM_PORT {
			// The server would only log the failed bind and never become
			// ready: find out now and say so.
			ln, err := net.Listen("tcp", cfg.Listen)
			if err != nil {
				return nil, fmt.Errorf("queue: embedded server: listen %s: address in use or not available: %w", cfg.Listen, err)
			}
			_ = ln.Close()
		}
	}
	e := &Embedded{cfg: cfg, opts: opts, listen: cfg.Listen != ""}
	srv, err := e.start()
	if err != nil {
		return nil, err
	}
	if e.listen && opts.Port == server.RANDOM_PORT {
		// A restarted server listens where clients already connect.
		opts.Port = srv.Addr().(*net.TCPAddr).Port
	}
	e.srv = srv
	return e, nil
}

// start starts a server on the options and waits until it takes clients
// with JetStream enabled.
func (e *Embedded) start() (*server.Server, error) {
	srv, err := server.NewServer(e.opts.Clone())
	if err != nil {
		return nil, fmt.Errorf("queue: embedded server: %w", err)
	}
	if e.cfg.Logger != nil {
		srv.SetLoggerV2(zapServerLogger{e.cfg.Logger.Named("nats-server").Sugar()}, false, false, false)
	}
	go srv.Start()
	wait := e.cfg.ReadyTimeout
	if wait <= 0 {
		wait = 10 * time.Second
	}
	if !srv.ReadyForConnections(wait) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("queue: embedded server not ready after %s (data dir %s)", wait, e.cfg.DataDir)
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("queue: embedded server started without JetStream (data dir %s)", e.cfg.DataDir)
	}
	return srv, nil
}

// loopbackHostPort maps a listen address to server options; port 0 becomes
// the server's "random port" (-1), since 0 means the default 4222 to it.
func loopbackHostPort(listen string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("listen address %q: %w", listen, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return "", 0, fmt.Errorf("listen address %q: only loopback IP addresses are allowed", listen)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("listen address %q: bad port", listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// ClientURL returns the nats:// URL of the loopback listener, or "" when the
// server accepts in-process connections only.
func (e *Embedded) ClientURL() string {
	if !e.listen {
		return ""
	}
	return e.Server().ClientURL()
}

// Server exposes the running server for health checks (a restart replaces
// it).
func (e *Embedded) Server() *server.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srv
}

// InProcessConn connects to the running server without a socket
// (nats.InProcessConnProvider): a client's reconnect after a restart
// reaches the new server.
func (e *Embedded) InProcessConn() (net.Conn, error) {
	srv := e.Server()
	if srv == nil {
		return nil, errors.New("queue: embedded server not running")
	}
	return srv.InProcessConn()
}

// Shutdown stops the server and waits until it has stopped, so the store
// is closed before the caller reuses or removes DataDir. A Supervise
// running restarts it no more.
func (e *Embedded) Shutdown() {
	e.life.Lock()
	defer e.life.Unlock()
	e.closed = true
	if srv := e.Server(); srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// EmbeddedStatus is the health of the embedded server's JetStream.
type EmbeddedStatus struct {
	// Err says why JetStream cannot store now (nil: it can).
	Err error
	// Since is when it was first seen failing.
	Since time.Time
	// Restarts counts the restarts that reopened its store.
	Restarts uint64
}

// Status checks the server's JetStream now: it fails when the server has
// disabled JetStream (nats-server does after some storage failures) or a
// stream holds a write error. A file store that failed a write (e.g.
// ENOSPC) refuses every later write until it is reopened, even once space
// is back, so a write error is a failure until the server restarts.
func (e *Embedded) Status() EmbeddedStatus {
	err := checkJetStream(e.Server())
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case err == nil:
		e.since = time.Time{}
	case e.since.IsZero():
		e.since = now
	}
	return EmbeddedStatus{Err: err, Since: e.since, Restarts: e.restarts}
}

// Restarts counts the restarts that reopened the store (cheap: no check).
func (e *Embedded) Restarts() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.restarts
}

func checkJetStream(srv *server.Server) error {
	if srv == nil {
		return errors.New("queue: embedded server not running")
	}
	if !srv.JetStreamEnabled() {
		return errors.New("queue: embedded JetStream disabled by the server (after a storage failure)")
	}
	hs := srv.Healthz(&server.HealthzOptions{Details: true})
	if len(hs.Errors) == 0 && hs.Error == "" {
		return nil
	}
	var errs []error
	if hs.Error != "" {
		errs = append(errs, errors.New(hs.Error))
	}
	for _, he := range hs.Errors {
		errs = append(errs, errors.New(he.Error))
	}
	return fmt.Errorf("queue: embedded JetStream: %w", errors.Join(errs...))
}

// SuperviseConfig tunes Supervise.
type SuperviseConfig struct {
	// Every is the period of the health check (default 1 s).
	Every time.Duration
	// MaxBackoff bounds the wait between two restarts while the store
	// keeps failing after each (default 30 s).
	MaxBackoff time.Duration
	// SpaceProbe is the size of the file written (fsynced, removed) into
	// the store dir before a restart: restarting onto a disk still full
	// would fail again at once (default 1 MiB).
	SpaceProbe int
	// Log receives what Supervise finds and does; nil discards it.
	Log *zap.Logger
}

// Supervise checks the server's JetStream every cfg.Every until ctx ends.
// When it has failed and the store dir takes a write again, it restarts
// the server on the same store dir and port (the file store reopens, and
// its write error is gone), backing off while the store keeps failing. It
// returns nil when ctx ends or Shutdown was called, and an error when a
// restart could not bring a server back: the process cannot store
// intents then and should exit for its supervisor.
func (e *Embedded) Supervise(ctx context.Context, cfg SuperviseConfig) error {
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.SpaceProbe <= 0 {
		cfg.SpaceProbe = 1 << 20
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	backoff := cfg.Every
	var notBefore time.Time
	var spaceErr string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		st := e.Status()
		if st.Err == nil {
			backoff = cfg.Every
			continue
		}
		if time.Now().Before(notBefore) {
			continue
		}
		if err := probeSpace(e.cfg.DataDir, cfg.SpaceProbe); err != nil {
			if err.Error() != spaceErr {
				log.Error("embedded JetStream cannot store; its store dir does not take a write yet",
					zap.Time("since", st.Since), zap.NamedError("jetstream", st.Err), zap.Error(err))
				spaceErr = err.Error()
			}
			continue
		}
		spaceErr = ""
		log.Warn("embedded JetStream cannot store; restarting the server on the same store",
			zap.Time("since", st.Since), zap.Error(st.Err))
		restarted, err := e.restart()
		if err != nil {
			return fmt.Errorf("queue: embedded server: restart after %v: %w", st.Err, err)
		}
		if !restarted {
			return nil
		}
		notBefore = time.Now().Add(backoff)
		backoff = min(2*backoff, cfg.MaxBackoff)
	}
}

// restart replaces the server with a new one on the same options; false
// when Shutdown has been called.
func (e *Embedded) restart() (bool, error) {
	e.life.Lock()
	defer e.life.Unlock()
	if e.closed {
		return false, nil
	}
	if old := e.Server(); old != nil {
		old.Shutdown()
		old.WaitForShutdown()
	}
	srv, err := e.start()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.srv = nil
		return false, err
	}
	e.srv = srv
	e.restarts++
	return true, nil
}

// probeSpace writes n bytes to a file in dir, syncs and removes it.
func probeSpace(dir string, n int) (err error) {
	f, err := os.CreateTemp(dir, ".space-probe-*")
	if err != nil {
		return fmt.Errorf("queue: probe store dir: %w", err)
	}
	defer func() {
		f.Close()
		if rerr := os.Remove(f.Name()); rerr != nil && err == nil {
			err = fmt.Errorf("queue: probe store dir: %w", rerr)
		}
	}()
	if _, err := f.Write(make([]byte, n)); err != nil {
		return fmt.Errorf("queue: probe store dir: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("queue: probe store dir: %w", err)
	}
	return nil
}

// zapServerLogger adapts the server's printf-style logger to zap.
type zapServerLogger struct{ l *zap.SugaredLogger }

func (z zapServerLogger) Noticef(format string, v ...any) { z.l.Infof(format, v...) }
func (z zapServerLogger) Warnf(format string, v ...any)   { z.l.Warnf(format, v...) }

// Fatalf is logged as an error: the server calls it for conditions it then
// handles itself, and exiting the daemon from inside a library is not ours
// to decide.
func (z zapServerLogger) Fatalf(format string, v ...any) { z.l.Errorf(format, v...) }
func (z zapServerLogger) Errorf(format string, v ...any) { z.l.Errorf(format, v...) }
func (z zapServerLogger) Debugf(format string, v ...any) { z.l.Debugf(format, v...) }
func (z zapServerLogger) Tracef(format string, v ...any) { z.l.Debugf(format, v...) }
