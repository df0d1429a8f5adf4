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

// MoveIntentsToLimits replaces an intent stream of another retention (a
// work queue, created before limits retention) by a limits-retention one
// under the same name, which the server cannot do by an update. It refuses
// (ErrIntentsPending) unless the stream holds no intent: under work-queue
// retention every message still there is undelivered or unacknowledged.
// While it checks, the stream is moved off its subjects, so no intent can
// arrive between the check and the delete (a publisher meanwhile gets no
// stream and retries); a refusal puts the subjects back. It reports false
// when the stream already has limits retention. The consumers go with the
// old stream: each instance recreates its own at start, so the fleet
// should be stopped while it runs.
func (c *Conn) MoveIntentsToLimits(ctx context.Context) (bool, error) {
	st, err := c.js.Stream(ctx, IntentsStream)
	if err != nil {
		return false, fmt.Errorf("queue: move intents: stream %s: %w", IntentsStream, err)
	}
	old := st.CachedInfo().Config
	if old.Retention == jetstream.LimitsPolicy {
		return false, nil
	}
	parked := old
	parked.Subjects = []string{c.subj.Prefix() + ".moving.intents"}
	if _, err := c.js.UpdateStream(ctx, parked); err != nil {
		return false, fmt.Errorf("queue: move intents: take %s off %v: %w", IntentsStream, old.Subjects, err)
	}
	info, err := st.Info(ctx)
	if err == nil && info.State.Msgs > 0 {
		err = fmt.Errorf("%w: %d (seqs %d..%d); let the fleet settle them first", ErrIntentsPending,
			info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)
	}
	if err != nil {
		restore, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, rerr := c.js.UpdateStream(restore, old); rerr != nil {
			return false, fmt.Errorf("queue: move intents: %w; and putting %s back on %v failed: %v", err, IntentsStream, old.Subjects, rerr)
		}
		return false, fmt.Errorf("queue: move intents: %w", err)
	}
	if err := c.js.DeleteStream(ctx, IntentsStream); err != nil {
		return false, fmt.Errorf("queue: move intents: delete %s: %w", IntentsStream, err)
	}
	if err := c.EnsureStreams(ctx); err != nil {
		return false, fmt.Errorf("queue: move intents: %s deleted but not created again (run again, or start an instance): %w", IntentsStream, err)
	}
	return true, nil
}
