package store

import (
	"context"
	"fmt"
	"math"

	"github.com/jmoiron/sqlx"

	"github.com/reconciled/reconciled/reconcile"
)

// The outbox (migration 0002) closes the gap between committing a verdict
// and publishing it: the verdict and its outbox row commit together, and
// the row stays until the publisher confirms the stream holds the verdict.
// Whoever finds a row (a restart, the next follow-up round) re-publishes.

// AppendDecided is AppendVerdictWatch (AppendVerdict when w is nil) for a
// verdict decided by this instance: the same transaction records (intent,
// seq) in the outbox. The seq, final and watch rules are AppendVerdict's.
// Re-appending a verdict identical to the stored one adds no row: it was
// stored before, by a decision of its own or by an import from the stream.
// Verdicts read from the stream must use AppendVerdict: the stream holds
// them already.
func (s *Store) AppendDecided(ctx context.Context, v reconcile.Verdict, w *WatchEntry) error {
	if w != nil && w.IntentID != v.IntentID {
		return fmt.Errorf("%w: watch entry for %q with verdict for %q", ErrInvalid, w.IntentID, v.IntentID)
	}
	if w != nil {
		c := *w // appendVerdict fills in status and window end
		w = &c
	}
	return s.appendVerdict(ctx, v, w, true)
}

func addOutbox(ctx context.Context, t *sqlx.Tx, id string, seq int64) error {
	if _, err := t.ExecContext(ctx, `INSERT INTO outbox (intent_id, seq) VALUES (?, ?)
		ON CONFLICT (intent_id, seq) DO NOTHING`, id, seq); err != nil {
		return fmt.Errorf("record outbox %s/%d: %w", id, seq, err)
	}
	return nil
}

// MarkPublished records that the verdict stream holds the intent's verdict
// seq: its outbox rows up to seq go, since re-publishing the latest verdict
// covers every earlier one. Rows of later seqs stay. Marking an intent with
// no rows is not an error.
func (s *Store) MarkPublished(ctx context.Context, id string, seq uint64) error {
	// A seq beyond int64 cannot be stored, so every row is at or below it.
	n := int64(math.MaxInt64)
	if seq < math.MaxInt64 {
		n = int64(seq)
	}
	what := fmt.Sprintf("mark %s/%d published", id, seq)
	return s.groupTx(ctx, what, func(ctx context.Context, t *sqlx.Tx) error {
		if _, err := t.ExecContext(ctx, `DELETE FROM outbox WHERE intent_id = ? AND seq <= ?`, id, n); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		return nil
	})
}

// OutboxEntry is a stored verdict the stream may not hold yet.
type OutboxEntry struct {
	IntentID string `db:"intent_id"`
	Seq      uint64 `db:"seq"`
}

// Outbox lists the outbox, ordered by intent id and seq.
func (s *Store) Outbox(ctx context.Context) ([]OutboxEntry, error) {
	var rows []OutboxEntry
	if err := s.r.SelectContext(ctx, &rows, `SELECT intent_id, seq FROM outbox ORDER BY intent_id, seq`); err != nil {
		return nil, fmt.Errorf("store: list outbox: %w", err)
	}
	return rows, nil
}
