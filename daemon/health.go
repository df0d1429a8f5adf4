package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/store"
)

// Problem is one failing readiness check.
type Problem struct {
	// Check names it: "failed" (the daemon gave up, see Failed), "nats",
	// "jetstream", "embedded_jetstream", "import" (the verdict follower
	// has not caught up with the stream, importHealth) or "store".
	Check string `json:"check"`
	// Since is when it started failing, when known.
	Since time.Time `json:"since,omitzero"`
	Error string    `json:"error"`
}

// NotReadyError is what Ready returns when a check fails: every failing
// check, so that /readyz says why.
type NotReadyError struct {
	Problems []Problem
}

func (e *NotReadyError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Check + ": " + p.Error
		if !p.Since.IsZero() {
			parts[i] += " (since " + p.Since.UTC().Format(time.RFC3339) + ")"
		}
	}
	return "not ready: " + strings.Join(parts, "; ")
}

// Ready returns nil when the daemon can take work: it has not given up,
// NATS is connected and its JetStream answers, the embedded server's
// JetStream (if any) can store, the verdict follower has caught up with
// the fleet's verdicts, and the store takes writes (no real write path
// failing, and the probe write commits). Otherwise a *NotReadyError
// names every failing check.
func (d *Daemon) Ready(ctx context.Context) error {
	// A corrupt store is the whole answer: nothing it says can be
	// trusted, and only moving it away mends it (store.ErrCorrupt).
	if err := d.store.Corrupt(); err != nil {
		return err
	}
	var ps []Problem
	if err := d.FailedErr(); err != nil {
		ps = append(ps, Problem{Check: "failed", Error: err.Error()})
	}
	if since, down := d.conn.Disconnected(); down {
		ps = append(ps, Problem{Check: "nats", Since: since, Error: "nats disconnected"})
	} else if err := d.checkJetStream(ctx); err != nil {
		ps = append(ps, Problem{Check: "jetstream", Error: err.Error()})
	}
	if e := d.embedded(); e != nil {
		if st := e.Status(); st.Err != nil {
			msg := st.Err.Error()
			if e == d.ownEmb {
				msg += "; the server is restarted on the same store once its dir takes a write"
			}
			ps = append(ps, Problem{Check: "embedded_jetstream", Since: st.Since, Error: msg})
		}
	}
	if p := d.imports.problem(); p != nil {
		ps = append(ps, *p)
	}
	failing := false
	for _, f := range d.store.WriteFailures() {
		if f.Path == store.PathProbe {
			continue
		}
		failing = true
		ps = append(ps, Problem{Check: "store", Since: f.Since,
			Error: fmt.Sprintf("%s writes failing (%d failed): %v", f.Path, f.Failures, f.Err)})
	}
	if !failing {
		if err := d.store.Writable(ctx); err != nil {
			p := Problem{Check: "store", Error: err.Error()}
			for _, f := range d.store.WriteFailures() {
				if f.Path == store.PathProbe {
					p.Since = f.Since
				}
			}
			ps = append(ps, p)
		}
	}
	if len(ps) > 0 {
		return &NotReadyError{Problems: ps}
	}
	return nil
}

// jetStreamCheckTimeout bounds the JetStream API round trip of a
// readiness check: a server that disabled JetStream keeps the API subject
// and never answers, and a probe must answer within its own timeout.
const jetStreamCheckTimeout = time.Second

func (d *Daemon) checkJetStream(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, jetStreamCheckTimeout)
	defer cancel()
	return d.conn.CheckJetStream(ctx)
}

// embedded is the in-process server the daemon uses, its own or shared.
func (d *Daemon) embedded() *queue.Embedded {
	if d.ownEmb != nil {
		return d.ownEmb
	}
	if d.cfg.NATSURL == "" {
		return d.opts.Embedded
	}
	return nil
}

// Failed is closed when the daemon has given up: something it cannot
// recover from in-process (its embedded NATS server could not be
// restarted). The process should then exit non-zero for its supervisor;
// FailedErr says why.
func (d *Daemon) Failed() <-chan struct{} { return d.failed }

// FailedErr is why the daemon gave up, nil while it has not.
func (d *Daemon) FailedErr() error {
	select {
	case <-d.failed:
		return d.failErr
	default:
		return nil
	}
}

func (d *Daemon) fail(err error) {
	d.failOnce.Do(func() {
		d.failErr = err
		d.log.Error("the daemon cannot do its job and gives up", zap.Error(err))
		close(d.failed)
	})
}

// superviseEmbedded keeps the daemon's own NATS server's JetStream able to
// store: a store that failed is reopened by a restart once its dir takes
// writes again; a restart that fails gives the daemon up.
func (d *Daemon) superviseEmbedded(ctx context.Context) {
	err := d.ownEmb.Supervise(ctx, queue.SuperviseConfig{Log: d.log.Named("nats-supervisor")})
	if err != nil {
		d.fail(fmt.Errorf("daemon: embedded NATS server: %w", err))
	}
}

// Open-age alerts: an open intent older than Config.OpenAgeAlert is one
// the daemon could not settle in the time it normally takes (a day's
// window and then some). The log says so once when a ledger's oldest
// passes it, again every openAgeRepeat while it stays past it, and once
// when it is back under.
const (
	defaultOpenAgeAlert = 25 * time.Hour
	openAgeRepeat       = time.Hour
)

// watchOpenAges checks the ledgers' oldest open intents every period.
func (d *Daemon) watchOpenAges(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	logged := map[string]time.Time{}
	for {
		if err := d.checkOpenAges(ctx, time.Now(), logged); err != nil && ctx.Err() == nil {
			d.log.Warn("check the age of open intents", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkOpenAges logs the ledgers whose oldest open intent is past the
// threshold at now; logged holds when each such ledger was last logged.
func (d *Daemon) checkOpenAges(ctx context.Context, now time.Time, logged map[string]time.Time) error {
	oldest, err := d.store.OldestOpenByLedger(ctx)
	if err != nil {
		return err
	}
	limit := d.cfg.OpenAgeAlert
	over := map[string]bool{}
	for _, o := range oldest {
		age := now.Sub(o.FirstSeen)
		if age <= limit {
			continue
		}
		over[o.CanisterID] = true
		if last, ok := logged[o.CanisterID]; ok && now.Sub(last) < openAgeRepeat {
			continue
		}
		logged[o.CanisterID] = now
		d.log.Warn("a ledger's oldest open intent is older than the alert threshold",
			zap.String("canister_id", o.CanisterID), zap.String("intent_id", o.IntentID),
			zap.Duration("age", age.Round(time.Second)), zap.Duration("threshold", limit))
	}
	for l := range logged {
		if !over[l] {
			delete(logged, l)
			d.log.Info("a ledger's oldest open intent is back under the alert threshold",
				zap.String("canister_id", l), zap.Duration("threshold", limit))
		}
	}
	return nil
}
