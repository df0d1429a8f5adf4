package icagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc3"
)

// Config configures a Conn to one ledger.
type Config struct {
	Agent  *agent.Agent
	Ledger principal.Principal
	// RootKey is the DER BLS root key certificates are checked against;
	// nil takes the agent's own.
	RootKey []byte
	// MaxCertAge bounds the age of a certificate's /time (default 5 min).
	MaxCertAge time.Duration
	// Now is the clock certificates' ages are measured against (default
	// time.Now).
	Now func() time.Time
	// IngressExpiry is how far ahead the envelopes of replicated calls and
	// read_state requests expire (default 4 min; the IC accepts at most
	// 5). A call is polled until then: it cannot execute later.
	IngressExpiry time.Duration
	// ClockSkew is how far the IC's clock may lag the local one (default
	// 1 min, the IC's own permitted drift): a call whose status the
	// certified state never showed is given up that long after its
	// expiry by the local clock, when no certificate has shown the expiry
	// passed in the IC's time.
	ClockSkew time.Duration
}

// Conn sends one ledger's queries and calls (and those to the archives it
// names) and verifies what comes back against the subnet's certificates.
// Every error it returns wraps an *icrc3.Error. It is safe for concurrent
// use.
type Conn struct {
	agent   *agent.Agent
	ledger  principal.Principal
	rootKey []byte
	maxAge  time.Duration
	now     func() time.Time
	expiry  time.Duration
	skew    time.Duration

	statMu   sync.Mutex
	stats    Stats
	inflight int
}

// New checks cfg and applies defaults. It makes no request.
func New(cfg Config) (*Conn, error) {
	if cfg.Agent == nil {
		return nil, fmt.Errorf("icagent: new conn: no agent")
	}
	if len(cfg.Ledger.Raw) == 0 {
		return nil, fmt.Errorf("icagent: new conn: no ledger id")
	}
	c := &Conn{agent: cfg.Agent, ledger: cfg.Ledger, rootKey: cfg.RootKey, maxAge: cfg.MaxCertAge, now: cfg.Now,
		expiry: cfg.IngressExpiry, skew: cfg.ClockSkew}
	if c.expiry <= 0 {
		c.expiry = defaultIngressExpiry
	}
	if c.skew <= 0 {
		c.skew = time.Minute
	}
	if c.rootKey == nil {
		c.rootKey = cfg.Agent.GetRootKey()
	}
	if c.maxAge <= 0 {
		c.maxAge = 5 * time.Minute
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.stats.Queries = map[string]uint64{}
	return c, nil
}

// Ledger is the ledger's canister id.
func (c *Conn) Ledger() principal.Principal { return c.ledger }

// RootKey is the DER root key certificates are checked against.
func (c *Conn) RootKey() []byte { return c.rootKey }

// MaxCertAge bounds the age of a certificate's /time.
func (c *Conn) MaxCertAge() time.Duration { return c.maxAge }

// Now is the clock certificates' ages are measured against.
func (c *Conn) Now() time.Time { return c.now() }

// NetworkKey names the IC network the conn reads, by its root key (the
// first 8 bytes of the key's SHA-256, in hex): one canister id on two
// networks is two ledgers.
func (c *Conn) NetworkKey() string {
	h := sha256.Sum256(c.rootKey)
	return hex.EncodeToString(h[:8])
}

// Stats counts the queries, for benchmarks and metrics.
type Stats struct {
	// Queries by "ledger:<method>" or "archive:<method>".
	Queries map[string]uint64
	Total   uint64 // all queries
	Blocks  uint64 // blocks received in block pages (duplicates included)
	// MaxInFlight is the most queries that were outstanding at once.
	MaxInFlight int
}

// Stats returns a snapshot of the counters.
func (c *Conn) Stats() Stats {
	c.statMu.Lock()
	defer c.statMu.Unlock()
	s := c.stats
	s.Queries = make(map[string]uint64, len(c.stats.Queries))
	for k, v := range c.stats.Queries {
		s.Queries[k] = v
	}
	return s
}

func (c *Conn) enter(canister principal.Principal, method string) {
	role := "archive:"
	if canister.Equal(c.ledger) {
		role = "ledger:"
	}
	c.statMu.Lock()
	c.stats.Queries[role+method]++
	c.stats.Total++
	c.inflight++
	c.stats.MaxInFlight = max(c.stats.MaxInFlight, c.inflight)
	c.statMu.Unlock()
}

func (c *Conn) leave() {
	c.statMu.Lock()
	c.inflight--
	c.statMu.Unlock()
}

// CountBlocks adds n to the blocks received in block pages.
func (c *Conn) CountBlocks(n int) {
	c.statMu.Lock()
	c.stats.Blocks += uint64(n)
	c.statMu.Unlock()
}

// Query sends one raw query to canister. verify turns agent-go's signed-query
// verification on (an extra read_state and BLS check per signature). The
// query and its read_states end by the envelope's ingress expiry: agent-go
// bounds them by the agent's IngressExpiry, the expiry it writes into the
// envelope, and the daemon's HTTP client bounds each request further.
func (c *Conn) Query(ctx context.Context, canister principal.Principal, method string, arg []byte, verify bool) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, Classify(err, canister, method)
	}
	c.enter(canister, method)
	defer c.leave()
	req, err := c.agent.CreateRawAPIRequest(agent.RequestTypeQuery, canister, method, arg)
	if err != nil {
		return nil, &icrc3.Error{Kind: icrc3.KindTransport, Canister: canister, Method: method, Msg: "build request", Err: err}
	}
	var out []byte
	if err := rawQuery(ctx, req, &out, !verify); err != nil {
		return nil, Classify(err, canister, method)
	}
	return out, nil
}

// rawQuery runs agent-go's query. agent-go panics on a reply whose status
// is neither "replied" nor "rejected" (a garbage body from one node), so
// the panic is turned into a decode error here.
func rawQuery(ctx context.Context, req *agent.RawAPIRequest, out *[]byte, skip bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &icrc3.Error{Kind: icrc3.KindDecode, Msg: fmt.Sprintf("unreadable query response: %v", p)}
		}
	}()
	return req.QueryWithContext(ctx, out, skip)
}
