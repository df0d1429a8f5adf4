package queue

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// LeasesBucket is the JetStream key-value bucket of the follow-up leases:
// one key per ledger, whose value names the instance that follows up that
// ledger's open intents. Its TTL is the lease's: a holder that vanishes
// without releasing loses the lease when its last renewal expires.
const LeasesBucket = "RECONCILE_LEASES"

// LeaseConfig configures Conn.Leases.
type LeaseConfig struct {
	// Holder names this instance (its --instance). An instance restarted
	// under the same name takes back its own unexpired leases at once.
	Holder string
	// TTL is the lease's lifetime after its last renewal (the bucket's
	// TTL: the instance started last sets it for the fleet).
	TTL time.Duration
}

// Leases is one instance's view of the follow-up leases.
type Leases struct {
	kv     jetstream.KeyValue
	holder string
	ttl    time.Duration
	log    *zap.Logger
	now    func() time.Time

	mu   sync.Mutex
	held map[string]lease
}

type lease struct {
	rev uint64
	// until is when the lease may have expired on the server: its last
	// renewal was sent before this time minus the TTL.
	until time.Time
}

// kvKeyRE is what a key-value key may hold; canister ids always match.
var kvKeyRE = regexp.MustCompile(`^[-/_=a-zA-Z0-9]+$`)

// Leases creates or updates the leases bucket (with the streams' replicas)
// and returns this instance's view of it, holding nothing yet.
func (c *Conn) Leases(ctx context.Context, cfg LeaseConfig) (*Leases, error) {
	if cfg.Holder == "" || cfg.TTL <= 0 {
		return nil, fmt.Errorf("queue: leases: holder %q and a positive TTL (%s) are required", cfg.Holder, cfg.TTL)
	}
	kcfg := jetstream.KeyValueConfig{
		Bucket:      LeasesBucket,
		Description: "per-ledger follow-up leases of the reconciled fleet",
		History:     1,
		TTL:         cfg.TTL,
		Storage:     jetstream.FileStorage,
		Replicas:    c.streams.Replicas,
	}
	// A cluster placing a new replicated bucket while every instance of a
	// fleet starts at once can take longer than one API timeout: timeouts
	// are retried for a minute, anything else is reported at once.
	var kv jetstream.KeyValue
	retry := newRetryDelay(250*time.Millisecond, 5*time.Second)
	for giveUp := time.Now().Add(time.Minute); ; {
		var err error
		kv, err = c.js.CreateOrUpdateKeyValue(ctx, kcfg)
		if err == nil {
			break
		}
		timeout := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
		if !timeout || ctx.Err() != nil || time.Now().After(giveUp) {
			return nil, fmt.Errorf("queue: leases bucket %s: %w", LeasesBucket, err)
		}
		c.log.Warn("leases bucket not ready; retrying", zap.Error(err))
		if !retry.wait(ctx) {
			return nil, fmt.Errorf("queue: leases bucket %s: %w", LeasesBucket, ctx.Err())
		}
	}
	return &Leases{kv: kv, holder: cfg.Holder, ttl: cfg.TTL, log: c.log.Named("leases"), now: time.Now,
		held: map[string]lease{}}, nil
}

// Holds reports whether this instance holds the ledger's lease and its
// last renewal cannot have expired yet. A tenth of the TTL is kept as a
// margin for the server's and this host's clocks running at other rates.
func (l *Leases) Holds(ledger string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[ledger]
	return ok && l.now().Before(h.until)
}

// Held lists the ledgers whose lease this instance holds, sorted.
func (l *Leases) Held() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.held))
	for k := range l.held {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Holder returns the instance holding the ledger's lease ("" when none).
func (l *Leases) Holder(ctx context.Context, ledger string) (string, error) {
	e, err := l.kv.Get(ctx, ledger)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("queue: lease %s: %w", ledger, err)
	}
	return string(e.Value()), nil
}

// Hold renews the leases of the given ledgers this instance holds, takes
// those nobody holds, and releases those it holds but no longer needs. It
// returns the ledgers whose lease it has just taken. Failures are logged:
// a lease that could not be renewed is treated as lost.
func (l *Leases) Hold(ctx context.Context, ledgers []string) (gained []string) {
	want := map[string]bool{}
	for _, k := range ledgers {
		if kvKeyRE.MatchString(k) {
			want[k] = true
		}
	}
	l.mu.Lock()
	var drop []string
	for k := range l.held {
		if !want[k] {
			drop = append(drop, k)
		}
	}
	l.mu.Unlock()
	for _, k := range drop {
		l.release(ctx, k)
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if l.take(ctx, k) {
			gained = append(gained, k)
		}
	}
	return gained
}

// take renews or acquires one lease; true when it was not held before.
func (l *Leases) take(ctx context.Context, ledger string) bool {
	sent := l.now()
	val := []byte(l.holder)
	l.mu.Lock()
	h, had := l.held[ledger]
	l.mu.Unlock()
	var rev uint64
	var err error
	if had {
		rev, err = l.kv.Update(ctx, ledger, val, h.rev)
		if err != nil && ctx.Err() == nil {
			l.log.Warn("follow-up lease lost", zap.String("canister_id", ledger), zap.Error(err))
		}
	} else {
		rev, err = l.kv.Create(ctx, ledger, val)
		if errors.Is(err, jetstream.ErrKeyExists) {
			// Ours from before a restart under the same name: take it back
			// rather than wait for it to expire. Another's whose last
			// renewal is a TTL old is taken too, without waiting for the
			// server to remove it; the revision check loses to a renewal
			// that came meanwhile.
			e, gerr := l.kv.Get(ctx, ledger)
			if gerr != nil || (string(e.Value()) != l.holder && l.now().Sub(e.Created()) <= l.ttl) {
				return false
			}
			rev, err = l.kv.Update(ctx, ledger, val, e.Revision())
		}
		if err != nil && !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			l.log.Warn("follow-up lease not taken", zap.String("canister_id", ledger), zap.Error(err))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		// Stopping, not lost: ReleaseAll still gives it back.
		return false
	}
	if err != nil {
		delete(l.held, ledger)
		return false
	}
	l.held[ledger] = lease{rev: rev, until: sent.Add(l.ttl - l.ttl/10)}
	if !had {
		l.log.Info("follow-up lease taken", zap.String("canister_id", ledger))
	}
	return !had
}

func (l *Leases) release(ctx context.Context, ledger string) {
	l.mu.Lock()
	h, ok := l.held[ledger]
	delete(l.held, ledger)
	l.mu.Unlock()
	if !ok {
		return
	}
	// Only our own revision: a lease another instance took meanwhile stays.
	if err := l.kv.Delete(ctx, ledger, jetstream.LastRevision(h.rev)); err != nil {
		l.log.Warn("follow-up lease not released; it expires by itself", zap.String("canister_id", ledger), zap.Error(err))
		return
	}
	l.log.Info("follow-up lease released", zap.String("canister_id", ledger))
}

// ReleaseAll gives up every lease this instance holds, so another instance
// follows up those ledgers at once instead of after the TTL.
func (l *Leases) ReleaseAll(ctx context.Context) {
	for _, k := range l.Held() {
		l.release(ctx, k)
	}
}
