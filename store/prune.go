package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Retention: a final intent whose final verdict was decided before a
// cutoff is deleted with every row that belongs to it (intents,
// intent_facts, intent_keys, verdicts, watch). An intent without a final
// verdict is never deleted: it is still being decided. One with an outbox
// row is never deleted either: the stream may not hold that verdict yet,
// and the outbox is how it gets there. Published outbox rows do not
// exist (MarkPublished deletes them), so nothing of a pruned intent is
// left for the outbox to find.
//
// Each batch is one transaction of the single writer's group commit, so
// verdict writes queue behind at most one batch; the selection and the
// deletes run in that transaction, so no verdict appended meanwhile is
// lost with its intent.

// DefaultPruneBatch is the number of intents one prune transaction deletes
// at most.
const DefaultPruneBatch = 256

// PruneFinals deletes up to limit final intents whose latest verdict was
// decided before cutoff, oldest first, in one transaction. It returns the
// number deleted.
func (s *Store) PruneFinals(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	if limit <= 0 {
		limit = DefaultPruneBatch
	}
	before, err := nanos("prune cutoff", cutoff)
	if err != nil {
		return 0, err
	}
	var n int
	err = s.groupTx(ctx, "prune final intents", func(ctx context.Context, t *Tx) error {
		n = 0 // the group may run this function twice
		var ids []string
		// intent_facts_by_decided: the oldest decisions first. Open
		// intents decided before the cutoff are passed over in each
		// batch; there are as many as the watch list holds.
		if err := t.SelectContext(ctx, &ids, `SELECT f.intent_id FROM intent_facts f
			JOIN intents i ON i.intent_id = f.intent_id
			WHERE f.decided_at IS NOT NULL AND f.decided_at < ? AND i.final = 1
			AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.intent_id = f.intent_id)
			ORDER BY f.decided_at, f.intent_id LIMIT ?`, before, limit); err != nil {
			return fmt.Errorf("store: prune: select: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		in := "(?" + strings.Repeat(",?", len(ids)-1) + ")"
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		// Children first, then the intents rows: the foreign keys' checks
		// then find nothing left to cascade to.
		for _, table := range []string{"intent_keys", "verdicts", "watch", "intent_facts", "intents"} {
			if _, err := t.ExecContext(ctx, "DELETE FROM "+table+" WHERE intent_id IN "+in, args...); err != nil {
				return fmt.Errorf("store: prune: delete from %s: %w", table, err)
			}
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.pruned.Add(uint64(n))
	return n, nil
}

// PruneRound is what one PruneFinalsBefore call did.
type PruneRound struct {
	Intents int           // intents deleted
	Batches int           // transactions committed
	Took    time.Duration // wall time of the round
}

// PruneFinalsBefore runs PruneFinals in batches of batch intents until one
// deletes fewer, so a backlog is worked off in one round. Between batches
// the writer is free: verdict writes queued meanwhile commit before the
// next batch takes it. It returns what was done even with an error.
func (s *Store) PruneFinalsBefore(ctx context.Context, cutoff time.Time, batch int) (PruneRound, error) {
	if batch <= 0 {
		batch = DefaultPruneBatch
	}
	start := time.Now()
	var r PruneRound
	for {
		if err := ctx.Err(); err != nil {
			r.Took = time.Since(start)
			return r, err
		}
		n, err := s.PruneFinals(ctx, cutoff, batch)
		if err != nil {
			r.Took = time.Since(start)
			return r, err
		}
		r.Intents += n
		if n > 0 {
			r.Batches++
		}
		if n < batch {
			r.Took = time.Since(start)
			return r, nil
		}
	}
}

// Pruned is the number of intents retention has deleted since Open.
func (s *Store) Pruned() uint64 { return s.pruned.Load() }
