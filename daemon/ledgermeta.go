package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/principal"
	"go.uber.org/zap"

	"github.com/reconciled/reconciled/icrc1"
)

// ledgerDisplay is how a ledger's amounts are shown to people.
type ledgerDisplay struct {
	decimals uint8
	symbol   string
}

// ledgerMeta learns each ledger's icrc1_decimals and icrc1_symbol the
// first time the support API shows one of its amounts, and keeps them.
// Display only: nothing that decides a verdict reads it. A ledger that
// cannot be asked shows raw units until a later lookup, after retry, asks
// again.
type ledgerMeta struct {
	// resolve says which canister a ledger text names, and whether the
	// daemon would query it at all.
	resolve func(canister string) (principal.Principal, bool)
	// query asks a ledger for its display units.
	query func(ctx context.Context, ledger principal.Principal) (ledgerDisplay, error)
	// wait bounds how long lookups wait for a fetch, counted from its
	// start: the first page shows units when the ledger answers quickly,
	// and a page listing many intents of a slow ledger waits once, not
	// once per intent.
	wait time.Duration
	// timeout bounds one fetch; retry is how long a failure is remembered.
	timeout, retry time.Duration
	// limit bounds the cache: intents from the verdict stream may name any
	// canister, and each would otherwise stay here for good.
	limit int
	now   func() time.Time
	log   *zap.Logger

	mu      sync.Mutex
	entries map[string]*metaEntry
}

type metaEntry struct {
	id       principal.Principal
	val      ledgerDisplay
	ok       bool
	fetching chan struct{} // closed when the fetch in flight ends; nil when none is
	started  time.Time     // of the fetch in flight
	retryAt  time.Time
}

func newLedgerMeta(resolve func(string) (principal.Principal, bool),
	query func(context.Context, principal.Principal) (ledgerDisplay, error), log *zap.Logger) *ledgerMeta {
	if log == nil {
		log = zap.NewNop()
	}
	return &ledgerMeta{resolve: resolve, query: query, wait: 2 * time.Second, timeout: 20 * time.Second,
		retry: time.Minute, limit: 1024, now: time.Now, log: log, entries: map[string]*metaEntry{}}
}

// lookup has support.Config.Ledgers' signature.
func (m *ledgerMeta) lookup(canister string) (decimals uint8, symbol string, ok bool) {
	m.mu.Lock()
	e := m.entries[canister]
	if e == nil {
		id, known := m.resolve(canister)
		if !known || len(m.entries) >= m.limit {
			m.mu.Unlock()
			return 0, "", false
		}
		e = &metaEntry{id: id}
		m.entries[canister] = e
	}
	if e.ok {
		m.mu.Unlock()
		return e.val.decimals, e.val.symbol, true
	}
	now := m.now()
	if e.fetching == nil && !now.Before(e.retryAt) {
		e.fetching, e.started = make(chan struct{}), now
		go m.fetch(canister, e)
	}
	done := e.fetching
	left := e.started.Add(m.wait).Sub(now)
	m.mu.Unlock()
	if done == nil || left <= 0 {
		return 0, "", false // failed recently, or asking for longer than a page waits
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		return 0, "", false // still asking; a later lookup gets the answer
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return e.val.decimals, e.val.symbol, e.ok
}

// fetch runs on its own goroutine so that a request giving up on waiting
// does not cancel the answer the next request can use.
func (m *ledgerMeta) fetch(canister string, e *metaEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	val, err := m.query(ctx, e.id)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		e.retryAt = m.now().Add(m.retry)
		m.log.Warn("ledger display metadata unavailable; amounts shown in raw units",
			zap.String("canister_id", canister), zap.Duration("retry_in", m.retry), zap.Error(err))
	} else {
		e.val, e.ok = val, true
	}
	close(e.fetching)
	e.fetching = nil
}

// queryLedgerDisplay asks a ledger for icrc1_decimals and icrc1_symbol
// through ag, which verifies the replies' node signatures unless it was
// built not to (the daemon's agent is not).
func queryLedgerDisplay(ag *agent.Agent) func(context.Context, principal.Principal) (ledgerDisplay, error) {
	return func(ctx context.Context, ledger principal.Principal) (ledgerDisplay, error) {
		var d ledgerDisplay
		if err := agentQuery(ctx, ag, ledger, "icrc1_decimals", &d.decimals); err != nil {
			return d, err
		}
		if err := agentQuery(ctx, ag, ledger, "icrc1_symbol", &d.symbol); err != nil {
			return d, err
		}
		if err := checkSymbol(d.symbol); err != nil {
			return d, fmt.Errorf("ledger %s: icrc1_symbol: %w", ledger, err)
		}
		return d, nil
	}
}

// agentQuery makes a verified query and decodes its reply through the
// icrc3 screen: agent-go's own decoder can be crashed by a crafted reply
// from one node, and its panics on garbage bodies become errors here.
func agentQuery(ctx context.Context, ag *agent.Agent, ledger principal.Principal, method string, out any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("ledger %s: %s: unreadable reply: %v", ledger, method, p)
		}
	}()
	req, err := ag.CreateRawAPIRequest(agent.RequestTypeQuery, ledger, method, []byte("DIDL\x00\x00"))
	if err != nil {
		return fmt.Errorf("ledger %s: %s: %w", ledger, method, err)
	}
	var raw []byte
	if err := req.QueryWithContext(ctx, &raw, false); err != nil {
		return fmt.Errorf("ledger %s: %s: %w", ledger, method, err)
	}
	if err := icrc1.UnmarshalReply(raw, out); err != nil {
		return fmt.Errorf("ledger %s: %s: %w", ledger, method, err)
	}
	return nil
}

// checkSymbol refuses what a support page or a terminal should not print
// next to an amount: the symbol is a canister's free text.
func checkSymbol(s string) error {
	if s == "" || len(s) > 32 || !utf8.ValidString(s) {
		return fmt.Errorf("unusable symbol %q", s)
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return fmt.Errorf("unusable symbol %q", s)
		}
	}
	return nil
}

// newLedgerMeta returns the daemon's display metadata source: it asks the
// ledgers the daemon would read, through the daemon's agent.
func (d *Daemon) newLedgerMeta(log *zap.Logger) *ledgerMeta {
	resolve := func(canister string) (principal.Principal, bool) {
		if spec, ok := d.cfg.Ledgers[canister]; ok {
			return spec.ID, true
		}
		if d.cfg.StrictLedgers {
			return principal.Principal{}, false
		}
		id, err := principal.Decode(canister)
		return id, err == nil
	}
	return newLedgerMeta(resolve, queryLedgerDisplay(d.opts.Agent), log)
}
