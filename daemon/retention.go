package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled/store"
)

const (
	// DefaultRetention is how long a final intent stays in the store after
	// its final verdict: the verdict stream's default age limit
	// (queue.StreamsConfig.VerdictMaxAge), so the store keeps what a new
	// instance could import and no more.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultRepublishHorizon is the longest a tool layer re-publishes an
	// intent after first sending it: the ledger's 24 h deduplication
	// window, past which re-sending the payment is a new payment, and an
	// hour of clock drift.
	DefaultRepublishHorizon = 25 * time.Hour
	// pruneEvery is the period of retention's rounds.
	pruneEvery = 5 * time.Minute
)

// ErrRetentionTooShort is the error of a retention below the re-publish
// horizon.
var ErrRetentionTooShort = errors.New("retention is below the re-publish horizon")

// CheckRetention refuses a retention shorter than the re-publish horizon:
// an intent re-published after its rows were pruned is then decided from
// the verdict stream alone, which must still hold it; a retention at
// least the horizon keeps every intent a tool layer may still re-publish.
func CheckRetention(retention, horizon time.Duration) error {
	if horizon <= 0 {
		return fmt.Errorf("re-publish horizon %v: must be positive", horizon)
	}
	if retention < horizon {
		return fmt.Errorf("%w: retention %v, re-publish horizon %v (raise --retention or lower --republish-horizon)",
			ErrRetentionTooShort, retention, horizon)
	}
	return nil
}

// followStart is where a newly created verdict follower starts: the
// verdicts older than the retention would be pruned as soon as imported.
func (d *Daemon) followStart(now time.Time) time.Time { return now.Add(-d.cfg.Retention) }

// pruneFinals deletes, every period, the final intents decided longer ago
// than the retention (store.PruneFinalsBefore), until ctx ends. A failed
// round is logged and the next one retries: pruning is housekeeping, and
// the store's write health (readiness) reports a storage that refuses it.
func (d *Daemon) pruneFinals(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		cutoff := time.Now().Add(-d.cfg.Retention)
		r, err := d.store.PruneFinalsBefore(ctx, cutoff, store.DefaultPruneBatch)
		if ctx.Err() != nil {
			return
		}
		fields := []zap.Field{zap.Int("intents", r.Intents), zap.Int("batches", r.Batches),
			zap.Time("decided_before", cutoff), zap.Duration("took", r.Took), zap.Uint64("pruned_total", d.store.Pruned())}
		switch {
		case err != nil:
			d.log.Warn("retention round failed; next round retries", append(fields, zap.Error(err))...)
		case r.Intents > 0:
			d.log.Info("retention pruned final intents", fields...)
		default:
			d.log.Debug("retention round found nothing to prune", fields...)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
