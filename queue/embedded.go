package queue

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
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

// Embedded is a running in-process nats-server.
type Embedded struct {
	srv    *server.Server
	listen bool
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
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("queue: embedded server: %w", err)
	}
	if cfg.Logger != nil {
		srv.SetLoggerV2(zapServerLogger{cfg.Logger.Named("nats-server").Sugar()}, false, false, false)
	}
	go srv.Start()
	wait := cfg.ReadyTimeout
	if wait <= 0 {
		wait = 10 * time.Second
	}
	if !srv.ReadyForConnections(wait) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("queue: embedded server not ready after %s (data dir %s)", wait, cfg.DataDir)
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("queue: embedded server started without JetStream (data dir %s)", cfg.DataDir)
	}
	return &Embedded{srv: srv, listen: cfg.Listen != ""}, nil
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
	return e.srv.ClientURL()
}

// Server exposes the underlying server for in-process connections and
// health checks.
func (e *Embedded) Server() *server.Server { return e.srv }

// Shutdown stops the server and waits until it has stopped, so the store
// is closed before the caller reuses or removes DataDir.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
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
