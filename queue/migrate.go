package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrIntentsPending means the intent stream still holds intents that are
// not settled: moving it would lose them.
var ErrIntentsPending = errors.New("the intent stream still holds intents not yet settled")

// ErrIntentsMoving means the intent stream is off its subjects while
// MoveIntentsToLimits runs: an instance must not put it back, or an intent
// accepted meanwhile would be deleted with it.
var ErrIntentsMoving = errors.New("the intent stream is being moved to limits retention (reconciled migrate-intents); start again when the move is done")

// parkedIntents is the subject the intent stream listens on while it is
// moved, which no publisher uses.
func (c *Conn) parkedIntents() string { return c.subj.Prefix() + ".moving.intents" }

// isParked reports whether cfg is the intent stream taken off its subjects.
func (c *Conn) isParked(cfg jetstream.StreamConfig) bool {
	return len(cfg.Subjects) == 1 && cfg.Subjects[0] == c.parkedIntents()
}

// MoveIntentsToLimits replaces an intent stream of another retention (a
// work queue, created before limits retention) by a limits-retention one
// under the same name, which the server cannot do by an update. It refuses
// (ErrIntentsPending) unless the stream holds no intent: under work-queue
// retention every message still there is undelivered or unacknowledged.
// While it checks, the stream is moved off its subjects, so no intent can
// arrive between the check and the delete (a publisher meanwhile finds no
// stream and gets no acknowledgement), and an instance starting meanwhile
// is refused (ErrIntentsMoving) rather than putting it back; a refusal or
// a failed delete puts the subjects back. The new stream keeps the old
// one's replicas, dedup window and placement; the verdict stream is left
// alone. It reports false when the stream already has limits retention.
// The consumers go with the old stream: each instance recreates its own at
// start, so the fleet should be stopped while it runs.
func (c *Conn) MoveIntentsToLimits(ctx context.Context) (bool, error) {
	st, err := c.js.Stream(ctx, IntentsStream)
	if err != nil {
		return false, fmt.Errorf("queue: move intents: stream %s: %w", IntentsStream, err)
	}
	old := st.CachedInfo().Config
	if old.Retention == jetstream.LimitsPolicy {
		return false, nil
	}
	if c.isParked(old) {
		return false, fmt.Errorf("queue: move intents: %s is already off its subjects: another move runs, or one stopped half way (put it back on %s with nats stream edit)",
			IntentsStream, c.subj.IntentsFilter())
	}
	restore := func(err error) error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, rerr := c.js.UpdateStream(rctx, old); rerr != nil {
			return fmt.Errorf("queue: move intents: %w; and putting %s back on %v failed: %v", err, IntentsStream, old.Subjects, rerr)
		}
		return fmt.Errorf("queue: move intents: %w", err)
	}
	parked := old
	parked.Subjects = []string{c.parkedIntents()}
	if _, err := c.js.UpdateStream(ctx, parked); err != nil {
		return false, fmt.Errorf("queue: move intents: take %s off %v: %w", IntentsStream, old.Subjects, err)
	}
	info, err := st.Info(ctx)
	if err == nil && info.State.Msgs > 0 {
		err = fmt.Errorf("%w: %d (seqs %d..%d); let the fleet settle them first (an intent given up after its last delivery stays in a work queue: remove it by hand)",
			ErrIntentsPending, info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)
	}
	if err != nil {
		return false, restore(err)
	}
	if err := c.js.DeleteStream(ctx, IntentsStream); err != nil {
		return false, restore(fmt.Errorf("delete %s: %w", IntentsStream, err))
	}
	cfg := c.intentsConfig(jetstream.LimitsPolicy)
	cfg.Replicas, cfg.Duplicates, cfg.Placement = old.Replicas, old.Duplicates, old.Placement
	if _, err := c.js.CreateStream(ctx, cfg); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return false, fmt.Errorf("queue: move intents: %s deleted and not created again (an instance creates it at start): %w", IntentsStream, err)
	}
	return true, nil
}
