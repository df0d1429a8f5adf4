package ledgertest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/identity"
	"github.com/aviate-labs/agent-go/principal"
)

type serverConfig struct {
	rootSubnet bool
	admin      bool
	listenAddr string
	seed       int64
	seeded     bool
	// syncCallTimeout is how long a synchronous call waits for its
	// execution before answering 202.
	syncCallTimeout time.Duration
}

// Option configures a Server.
type Option func(*serverConfig)

// WithRootSubnet makes the replica the root (NNS) subnet: certificates are
// signed by the root key without a delegation and node keys live under
// agent-go's hard-coded root subnet id, as for the ICP ledger on mainnet.
func WithRootSubnet() Option { return func(c *serverConfig) { c.rootSubnet = true } }

// WithAdmin enables the /admin/* endpoints (time and faults over HTTP).
func WithAdmin() Option { return func(c *serverConfig) { c.admin = true } }

// WithListenAddr sets the listen address (default "127.0.0.1:0"). Only
// loopback hosts are accepted.
func WithListenAddr(addr string) Option { return func(c *serverConfig) { c.listenAddr = addr } }

// WithSyncCallTimeout sets how long the synchronous call endpoints (v3, v4)
// wait for an update to finish before they answer 202 and leave the client
// to poll (default 10 s).
func WithSyncCallTimeout(d time.Duration) Option {
	return func(c *serverConfig) { c.syncCallTimeout = d }
}

// WithSeed makes keys and canister ids deterministic.
func WithSeed(seed int64) Option {
	return func(c *serverConfig) { c.seed, c.seeded = seed, true }
}

// Server is a replica listening on loopback.
type Server struct {
	cfg   serverConfig
	keys  *keys
	clock *clock
	ln    net.Listener
	http  *http.Server
	url   string
	done  chan struct{}

	mu        sync.RWMutex
	canisters map[string]*hosted
	// empty are canisters created without code: their controllers are in
	// the certified state, their module_hash is not.
	empty  map[string]bool
	faults map[string]Faults

	statusMu sync.Mutex
	statuses map[[32]byte]*requestStatus
	// statusInserts counts insertions into statuses, to pace pruning.
	statusInserts uint64

	work inflight // handlers and asynchronous update executions

	nextCanister atomic.Uint64
	stats        statsTable

	garbageMu sync.Mutex
	garbage   *mrand.Rand
}

// hosted is an installed canister. Updates hold mu: a canister executes one
// message at a time.
type hosted struct {
	c  Canister
	mu sync.Mutex
}

// NewServer starts a replica; it is listening when NewServer returns.
func NewServer(opts ...Option) (*Server, error) {
	cfg := serverConfig{listenAddr: "127.0.0.1:0", syncCallTimeout: 10 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	if !cfg.seeded {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("ledgertest: seed: %w", err)
		}
		cfg.seed = int64(binary.LittleEndian.Uint64(b[:]))
	}
	if err := checkLoopback(cfg.listenAddr); err != nil {
		return nil, err
	}
	clk := newClock()
	k, err := newKeys(cfg.seed, !cfg.rootSubnet, clk.now())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.listenAddr)
	if err != nil {
		return nil, fmt.Errorf("ledgertest: listen %s: %w", cfg.listenAddr, err)
	}
	s := &Server{
		cfg:       cfg,
		keys:      k,
		clock:     clk,
		ln:        ln,
		url:       "http://" + ln.Addr().String(),
		done:      make(chan struct{}),
		canisters: map[string]*hosted{},
		empty:     map[string]bool{},
		faults:    map[string]Faults{},
		statuses:  map[[32]byte]*requestStatus{},
		garbage:   mrand.New(mrand.NewPCG(uint64(cfg.seed), 0x9e3779b97f4a7c15)),
	}
	s.nextCanister.Store(k.rangeLo)
	s.http = &http.Server{
		Handler:           s.track(s.routes()),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(ln)
	}()
	return s, nil
}

// checkLoopback refuses listen addresses that would expose the replica
// beyond this machine.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ledgertest: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("ledgertest: listen address %q is not a loopback address", addr)
	}
	return nil
}

// URL is the base URL of the replica, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return s.url }

// RootKey is the DER-encoded BLS root public key (133 bytes).
func (s *Server) RootKey() []byte { return append([]byte(nil), s.keys.rootDER...) }

// SubnetID is the id of the subnet hosting the canisters (agent-go's root
// subnet id in root-subnet mode).
func (s *Server) SubnetID() principal.Principal { return s.keys.subnetID }

// CanisterRange is the inclusive range of canister ids the subnet's
// certificates delegate.
func (s *Server) CanisterRange() (lo, hi principal.Principal) { return s.keys.rangeBounds() }

// Close stops the server and waits for the serving goroutine; in-flight
// requests are cut off.
func (s *Server) Close() {
	_ = s.http.Close()
	<-s.done
	s.work.close()
}

// Shutdown stops accepting requests and waits for in-flight ones.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if err != nil {
		_ = s.http.Close()
	}
	<-s.done
	s.work.close()
	return err
}

// Install hosts c under c.ID(), replacing any canister with that id.
func (s *Server) Install(c Canister) {
	s.mu.Lock()
	s.canisters[string(c.ID().Raw)] = &hosted{c: c}
	s.mu.Unlock()
}

func (s *Server) canister(id principal.Principal) *hosted {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.canisters[string(id.Raw)]
}

// NewEmptyCanister creates a canister with no code installed: read_state
// certifies its controllers and proves its module_hash absent, and every
// query or call to it is rejected.
func (s *Server) NewEmptyCanister() principal.Principal {
	id := s.NewCanisterID()
	s.mu.Lock()
	s.empty[string(id.Raw)] = true
	s.mu.Unlock()
	return id
}

// NewCanisterID returns a fresh id inside the subnet's canister range.
func (s *Server) NewCanisterID() principal.Principal {
	n := s.nextCanister.Add(1) - 1
	if n >= s.keys.rangeLo+canisterRangeSize {
		panic("ledgertest: canister range exhausted")
	}
	return canisterIDFromCounter(n)
}

// Now is the virtual clock in ns since the epoch.
func (s *Server) Now() uint64 { return s.clock.now() }

// Advance moves the clock forward; d <= 0 does nothing.
func (s *Server) Advance(d time.Duration) {
	s.clock.advance(d)
	if err := s.keys.refreshDelegation(s.clock.now()); err != nil {
		// Signing only fails on a broken key, which newKeys rules out.
		panic(fmt.Sprintf("ledgertest: refresh delegation: %v", err))
	}
}

// SetFaults replaces the faults of canister id.
func (s *Server) SetFaults(id principal.Principal, f Faults) {
	s.mu.Lock()
	if f == (Faults{}) {
		delete(s.faults, string(id.Raw))
	} else {
		s.faults[string(id.Raw)] = f
	}
	s.mu.Unlock()
}

// Faults returns the faults of canister id.
func (s *Server) Faults(id principal.Principal) Faults {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.faults[string(id.Raw)]
}

// NewAgent returns an agent-go agent for this replica as id: root key
// fetched from /api/v2/status, signed-query verification on, 10 ms polls
// and an HTTP client that never uses a proxy.
func (s *Server) NewAgent(id identity.Identity) (*agent.Agent, error) {
	return s.NewAgentWithConfig(agent.Config{Identity: id})
}

// NewAgentWithConfig is NewAgent with the caller's config; host, HTTP
// client, FetchRootKey and an unset PollDelay are filled in.
func (s *Server) NewAgentWithConfig(cfg agent.Config) (*agent.Agent, error) {
	u, err := url.Parse(s.url)
	if err != nil {
		return nil, fmt.Errorf("ledgertest: agent: %w", err)
	}
	cfg.FetchRootKey = true
	if cfg.PollDelay == 0 {
		cfg.PollDelay = 10 * time.Millisecond
	}
	cfg.ClientConfig = append([]agent.ClientOption{
		agent.WithHostURL(u),
		agent.WithHttpClient(LoopbackHTTPClient()),
	}, cfg.ClientConfig...)
	a, err := agent.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("ledgertest: agent: %w", err)
	}
	return a, nil
}

// LoopbackHTTPClient is an HTTP client that ignores proxy settings, so test
// traffic stays on loopback.
func LoopbackHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// inflight counts work that Close must wait for; once closed it admits no
// more, so nothing outlives the server.
type inflight struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (f *inflight) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.wg.Add(1)
	return true
}

func (f *inflight) leave() { f.wg.Done() }

func (f *inflight) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.wg.Wait()
}

func (s *Server) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.work.enter() {
			textError(w, http.StatusServiceUnavailable, "replica is shutting down")
			return
		}
		defer s.work.leave()
		h.ServeHTTP(w, r)
	})
}
