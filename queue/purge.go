package queue

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// defaultPurgeEvery bounds the purges of acknowledged intents to one a
// second while acks happen: a purge is a few requests and one write of the
// stream, against an fsync per intent saved.
const defaultPurgeEvery = time.Second

// PurgeResult says what one purge did.
type PurgeResult struct {
	// Floor is the lowest ack floor of the stream's consumers: every
	// intent at or below it is acknowledged (or terminated as bad input)
	// by every one of them; the intake's consumer never gives one up.
	Floor uint64
	// Purged counts the stream sequences removed, messages deleted one by
	// one before included (0 when there was nothing below the floor, or the
	// stream is not under limits retention).
	Purged uint64
	// HeldBy names a consumer whose ack floor is Floor, and Kept counts the
	// intents left above it: an operator's consumer that stopped reading
	// shows here while the stream grows behind it.
	HeldBy string
	Kept   uint64
}

// PurgeAcknowledgedIntents removes from a limits-retention intent stream
// every intent that each of its consumers has settled: it takes the lowest
// ack floor over all consumers, not only the intake's (an operator's own
// consumer must not lose what it has not read), and purges below it. The
// intake's own consumer, named intake, must be among them: while it is
// missing (deleted, its state lost, about to be created again) the others'
// floors say nothing of what the daemons settled, and nothing goes. A
// work-queue stream removes intents on ack itself and is left alone. A
// consumer the listing misses (e.g. one whose servers are down) keeps the
// whole stream. Every instance of a fleet may call it: purges below a
// floor are idempotent.
func (c *Conn) PurgeAcknowledgedIntents(ctx context.Context, intake string) (PurgeResult, error) {
	st, err := c.js.Stream(ctx, IntentsStream)
	if err != nil {
		return PurgeResult{}, fmt.Errorf("queue: purge: stream %s: %w", IntentsStream, err)
	}
	info := st.CachedInfo()
	if info.Config.Retention != jetstream.LimitsPolicy || info.State.Msgs == 0 {
		return PurgeResult{}, nil
	}
	floor, seen, ours, heldBy := uint64(math.MaxUint64), 0, false, ""
	lister := st.ListConsumers(ctx)
	for ci := range lister.Info() {
		seen++
		ours = ours || ci.Name == intake
		if ci.AckFloor.Stream < floor || ci.AckFloor.Stream == floor && ci.Name != intake {
			floor, heldBy = ci.AckFloor.Stream, ci.Name
		}
	}
	if err := lister.Err(); err != nil {
		return PurgeResult{}, fmt.Errorf("queue: purge: consumers of %s: %w", IntentsStream, err)
	}
	if !ours || seen < info.State.Consumers {
		// No intake consumer (the one to come must still get every intent
		// it has not settled), or a consumer was not listed and its floor
		// is unknown: nothing may go.
		return PurgeResult{}, nil
	}
	res := PurgeResult{Floor: floor, HeldBy: heldBy, Kept: info.State.Msgs}
	if floor < info.State.FirstSeq {
		return res, nil
	}
	res.Kept = 0
	if info.State.LastSeq > floor {
		res.Kept = info.State.LastSeq - floor
	}
	// The purge sequence is kept: everything below floor+1 goes.
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(floor+1)); err != nil {
		return res, fmt.Errorf("queue: purge %s below %d: %w", IntentsStream, floor+1, err)
	}
	res.Purged = min(floor, info.State.LastSeq) - info.State.FirstSeq + 1
	return res, nil
}

// settled tells the purge loop that an intent was settled, without
// waiting: one pending signal is enough for the next purge to see it.
func (in *Intake) settled() {
	select {
	case in.acked <- struct{}{}:
	default:
	}
}

// purgeLoop purges after settles, at most once per PurgeEvery, so the last
// ack of a burst is purged within PurgeEvery. It ends with ctx.
func (in *Intake) purgeLoop(ctx context.Context) {
	defer in.purging.Done()
	for {
		select {
		case <-in.acked:
		case <-ctx.Done():
			return
		}
		in.purge(ctx)
		t := time.NewTimer(in.cfg.PurgeEvery)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// purge runs one purge; a failure is logged and left to the next one.
func (in *Intake) purge(ctx context.Context) {
	log := in.log
	res, err := in.conn.PurgeAcknowledgedIntents(ctx, in.cfg.Durable)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("purge of acknowledged intents failed; retried", zap.Duration("after", in.cfg.PurgeEvery), zap.Error(err))
		}
		if !in.conn.nc.IsClosed() {
			in.settled()
		}
		return
	}
	if res.Purged > 0 {
		log.Debug("acknowledged intents purged", zap.Uint64("ack_floor", res.Floor), zap.Uint64("sequences", res.Purged))
	}
	if res.HeldBy != "" && res.HeldBy != in.cfg.Durable && res.Kept >= holdWarnAt && time.Since(in.heldWarned) >= holdWarnEvery {
		in.heldWarned = time.Now()
		log.Warn("another consumer of the intent stream holds the purge: the stream keeps every intent above its ack floor until it reads on, or is deleted",
			zap.String("consumer", res.HeldBy), zap.Uint64("ack_floor", res.Floor), zap.Uint64("intents_kept", res.Kept))
	}
}

// A consumer other than the intake's holding this many intents in the
// stream is warned about, at most once per holdWarnEvery: a few behind is
// a consumer reading, this many one that stopped.
var (
	holdWarnAt    uint64 = 10_000
	holdWarnEvery        = 5 * time.Minute
)
