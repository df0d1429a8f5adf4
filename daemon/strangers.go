package daemon

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icagent"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/reconcile"
)

// Canisters nobody configured ("strangers") are read only when
// --strict-ledgers is off. Anyone who may publish an intent chooses them,
// so what they cost is bounded here: at most MaxStrangers of them are
// followed at once (leases, clients, engine chains), and an intent is
// decided at intake only while its canister has fewer than
// MaxStrangerOpen open intents and a slot; an intent over either cap is
// stored unread with a waiting verdict (holdStranger) and decided by the
// follow-up once its canister is followed. Clients of strangers are
// evicted when their last open intent ends or they are no longer
// followed, and their metrics share the ledger label value StrangerLabel.

// StrangerLabel is the ledger label value of every unconfigured canister.
const StrangerLabel = "unconfigured"

// Defaults of the caps. What costs memory, IC queries and lease writes is
// a canister followed, not an intent: 64 canisters at once is more ledgers
// than a deployment that configures none uses, and costs at most 64 leases
// renewed per poll, 64 clients and chains, one tip read per canister and
// round. An open intent costs a watch row on disk and a share of its
// canister's round: 10,000 per canister lets a busy unconfigured ledger
// be decided at intake as before; past it, intents of the canister are
// left to its follow-up.
const (
	DefaultMaxStrangers    = 64
	DefaultMaxStrangerOpen = 10_000
)

// DefaultMaxInflight is how many intents an instance handles at once by
// default. Handlers are also what brings a burst of intents given back
// during an outage home in time: with far fewer handlers than the burst,
// the intake consumer redelivers part of it only after one or more
// further ack waits once the outage ends (docs/operations.md#outages).
const DefaultMaxInflight = 256

// strangers tracks the open intents of unconfigured canisters.
type strangers struct {
	maxCanisters, maxOpen int

	mu sync.Mutex
	// open counts, per stranger, its watched intents as the store last
	// said plus the intents admitted since (a reservation each, released
	// by strangerDone when the intent ended final at once; the next
	// refresh corrects any other difference).
	open map[string]int
}

func newStrangers(maxCanisters, maxOpen int) *strangers {
	if maxCanisters <= 0 {
		maxCanisters = DefaultMaxStrangers
	}
	if maxOpen <= 0 {
		maxOpen = DefaultMaxStrangerOpen
	}
	return &strangers{maxCanisters: maxCanisters, maxOpen: maxOpen, open: map[string]int{}}
}

// admit reserves a slot for one intent of stranger c; false when a cap is
// reached.
func (s *strangers) admit(c string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.open[c]
	if n >= s.maxOpen || (n == 0 && len(s.open) >= s.maxCanisters) {
		return false
	}
	s.open[c] = n + 1
	return true
}

// release gives back the slot admit reserved for an intent that ended
// final at once (no watch entry holds it).
func (s *strangers) release(c string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.open[c]; n > 1 {
		s.open[c] = n - 1
	} else {
		delete(s.open, c)
	}
}

// refresh replaces the counts by the store's watch counts of strangers.
func (s *strangers) refresh(counts map[string]int, stranger func(string) bool) {
	open := map[string]int{}
	for l, n := range counts {
		if stranger(l) && n > 0 {
			open[l] = n
		}
	}
	s.mu.Lock()
	s.open = open
	s.mu.Unlock()
}

// followed keeps, of the watched ledgers, every configured one and at
// most maxCanisters strangers (the first by id, so that every instance
// contends for the same ones): the rest wait for a slot, without a lease.
func (s *strangers) followed(ledgers []string, stranger func(string) bool) []string {
	sort.Strings(ledgers)
	out := ledgers[:0:0]
	n := 0
	for _, l := range ledgers {
		if stranger(l) {
			if n >= s.maxCanisters {
				continue
			}
			n++
		}
		out = append(out, l)
	}
	return out
}

// stranger reports whether the daemon reads ledger without configuration.
func (d *Daemon) stranger(ledger string) bool {
	_, ok := d.cfg.Ledgers[ledger]
	return !ok && !d.cfg.StrictLedgers
}

// ledgerLabel is the metrics' ledger label value of ledger.
func (d *Daemon) ledgerLabel(ledger string) string {
	if _, ok := d.cfg.Ledgers[ledger]; ok {
		return ledger
	}
	return StrangerLabel
}

// holdStranger is the service's Hold: an intent of a stranger over a cap
// is stored with a waiting verdict (reconcile.CodeUnconfiguredWait) and a
// watch entry instead of being decided. It costs a row on disk, no memory,
// no client and no IC request; the follow-up decides it once its canister
// is among those followed (strangers.followed). It is not left on the
// intake stream: intents given back with a delay count against the
// consumer's pending acknowledgements, and a flood of them would stall
// the intake of every ledger.
func (d *Daemon) holdStranger(ledger string) *reconciled.Reason {
	if !d.stranger(ledger) || d.strangers.admit(ledger) {
		return nil
	}
	return &reconciled.Reason{Code: reconcile.CodeUnconfiguredWait, Field: "canister_id",
		Message: fmt.Sprintf("canister %s is not configured and this daemon follows as many unconfigured canisters, or open intents of this one, as it may at once; the intent is stored and checked once a slot frees", ledger)}
}

// strangerDone releases the slot of a stranger's intent whose latest
// verdict is final once its delivery is handled: a flood of intents for
// canisters certified missing then does not wait on slots that nothing
// holds. The intent is named by the delivery's message id; a publisher
// that lies in it frees a slot wrongly only until the lease loop's next
// refresh of the counts from the watch list.
func (d *Daemon) strangerDone(ctx context.Context, canister, intentID string) {
	if !d.stranger(canister) {
		return
	}
	if v, err := d.store.LatestVerdict(ctx, intentID); err == nil && v.Final {
		d.strangers.release(canister)
	}
}

// strangerHistory makes the first use of a stranger's history prove that
// the canister holds code: a canister the IC certifies missing, or without
// a module, is refused for good (reconcile.NoSuchCanisterError, a final
// invalid); any answer that is not certified proves nothing and leaves the
// intent unreadable, to retry.
type strangerHistory struct {
	reconcile.History
	ledger string
	conn   interface {
		CanisterExistence(context.Context) (icagent.Existence, error)
	}
	mu        sync.Mutex
	installed bool
}

func (h *strangerHistory) Detect(ctx context.Context) (icrc3.Features, error) {
	h.mu.Lock()
	ok := h.installed
	h.mu.Unlock()
	if !ok {
		e, err := h.conn.CanisterExistence(ctx)
		switch {
		case err != nil:
			return icrc3.Features{}, err
		case e == icagent.CanisterMissing:
			return icrc3.Features{}, &reconcile.NoSuchCanisterError{Ledger: h.ledger}
		case e == icagent.CanisterEmpty:
			return icrc3.Features{}, &reconcile.NoSuchCanisterError{Ledger: h.ledger, NoModule: true}
		}
		h.mu.Lock()
		h.installed = true
		h.mu.Unlock()
	}
	return h.History.Detect(ctx)
}

// evictStrangers drops the clients and engine chains of strangers without
// a watched intent or no longer followed, folding their counters into the retired totals so the
// shared metric series stay monotonic.
func (d *Daemon) evictStrangers(watched map[string]int, followed []string) {
	keep := make(map[string]bool, len(followed))
	for _, l := range followed {
		keep[l] = true
	}
	d.clientsMu.Lock()
	var gone []string
	for l, c := range d.clients {
		if d.stranger(l) && (watched[l] == 0 || !keep[l]) {
			d.retired.add(c.Stats())
			delete(d.clients, l)
			gone = append(gone, l)
		}
	}
	d.clientsMu.Unlock()
	for _, l := range gone {
		d.engine.Forget(l)
	}
}

// retiredStats sums the counters of evicted clients.
type retiredStats struct {
	mu sync.Mutex
	s  icagent.Stats
}

func (r *retiredStats) add(s icagent.Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.s.Queries == nil {
		r.s.Queries = map[string]uint64{}
	}
	for k, v := range s.Queries {
		r.s.Queries[k] += v
	}
	r.s.Total += s.Total
	r.s.Blocks += s.Blocks
}

// LabelledClientStats is ClientStats by metric label: every stranger,
// live or evicted, under StrangerLabel.
func (d *Daemon) LabelledClientStats() map[string]icagent.Stats {
	out := map[string]icagent.Stats{}
	merge := func(label string, s icagent.Stats) {
		t := out[label]
		if t.Queries == nil {
			t.Queries = map[string]uint64{}
		}
		for k, v := range s.Queries {
			t.Queries[k] += v
		}
		t.Total += s.Total
		t.Blocks += s.Blocks
		out[label] = t
	}
	for l, s := range d.ClientStats() {
		merge(d.ledgerLabel(l), s)
	}
	d.retired.mu.Lock()
	defer d.retired.mu.Unlock()
	if r := d.retired.s; r.Total > 0 || r.Blocks > 0 {
		merge(StrangerLabel, r)
	}
	return out
}

// StrangerClients is the number of cached clients of unconfigured
// canisters.
func (d *Daemon) StrangerClients() int {
	d.clientsMu.Lock()
	defer d.clientsMu.Unlock()
	n := 0
	for l := range d.clients {
		if d.stranger(l) {
			n++
		}
	}
	return n
}
