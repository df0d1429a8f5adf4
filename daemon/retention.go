package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/store"
)

const (
	// DefaultRetention is how long a final intent stays in the store after
	// its final verdict: the verdict stream's default age limit, so the
	// store keeps what a new instance could import and no more.
	DefaultRetention = queue.DefaultVerdictMaxAge
	// DefaultRepublishHorizon is the longest a tool layer re-publishes an
	// intent after first sending it: the ledger's 24 h deduplication
	// window, past which re-sending the payment is a new payment, and an
	// hour of clock drift.
	DefaultRepublishHorizon = 25 * time.Hour
	// DefaultBlockCacheMargin is ledger time, not a block count: what an
	// intent needs is a span of ledger time (its window), and ledgers'
	// block rates differ by orders of magnitude. The blocks kept already
	// cover every window a tool layer may still send (the re-publish
	// horizon) and every open one; the margin is slack for intents whose
	// created_at is a little older than that, which would otherwise cost a
	// walk down the ledger.
	DefaultBlockCacheMargin = time.Hour
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
		d.retentionRound(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// retentionRound prunes the final intents decided before now - retention
// and trims the block cache, logging what it did.
func (d *Daemon) retentionRound(ctx context.Context, now time.Time) {
	cutoff := now.Add(-d.cfg.Retention)
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
	d.trimBlockCache(ctx)
}

// trimBlockCache bounds each ledger's block cache to the blocks intents
// may still need and the margin (reconcile.Engine.TrimCache).
func (d *Daemon) trimBlockCache(ctx context.Context) {
	start := time.Now()
	open, err := d.store.OldestOpenWindows(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("block cache trim skipped: open windows unknown", zap.Error(err))
		}
		return
	}
	margin := uint64(d.cfg.BlockCacheMargin)
	oldest := func(canister string) (uint64, bool) {
		from, ok := open[canister]
		if !ok {
			return 0, false
		}
		return from - min(from, margin), true
	}
	n, err := d.engine.TrimCache(ctx, d.cfg.RepublishHorizon+d.cfg.BlockCacheMargin, oldest, store.DefaultTrimRuns)
	if ctx.Err() != nil {
		return
	}
	fields := []zap.Field{zap.Int("blocks", n), zap.Duration("margin", d.cfg.BlockCacheMargin), zap.Duration("took", time.Since(start))}
	switch {
	case err != nil:
		d.log.Warn("block cache trim failed; next round retries", append(fields, zap.Error(err))...)
	case n > 0:
		d.log.Info("block cache trimmed", fields...)
	default:
		d.log.Debug("block cache trim found nothing to drop", fields...)
	}
}
