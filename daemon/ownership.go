package daemon

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// holdLeases keeps this instance contending for the follow-up lease of
// every ledger its store has open intents of: renewing those it holds,
// taking those whose holder released them or vanished, and releasing those
// it no longer needs. A lease just taken starts a follow-up round at once,
// so a hand-off costs the dead holder's TTL and little more. FollowUpNow
// comes here first, so the round it asks for covers ledgers just taken.
func (d *Daemon) holdLeases(ctx context.Context) {
	every := min(d.cfg.LeaseTTL/3, d.cfg.PollInterval)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	woken := false
	for {
		counts, err := d.store.WatchCounts(ctx)
		followed := d.followedLedgers(counts)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.log.Warn("watched ledgers unreadable; leases kept as they are", zap.Error(err))
		} else {
			// Strangers leave before newcomers take their slots: the round
			// a new lease starts creates the newcomer's client, and the
			// clients of strangers stay within their cap only if those
			// that ended or lost their slot are gone by then.
			d.strangers.refresh(counts, d.stranger)
			d.evictStrangers(counts, followed)
			if gained := d.leases.Hold(ctx, followed); len(gained) > 0 || woken {
				select {
				case d.trigger <- struct{}{}:
				default:
				}
			}
		}
		woken = false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.wake:
			woken = true
		}
	}
}

// followedLedgers is the ledgers with watched intents this instance
// contends for: every configured one, and at most MaxStrangers
// unconfigured ones (strangers.followed).
func (d *Daemon) followedLedgers(counts map[string]int) []string {
	ledgers := make([]string, 0, len(counts))
	for l := range counts {
		ledgers = append(ledgers, l)
	}
	return d.strangers.followed(ledgers, d.stranger)
}
