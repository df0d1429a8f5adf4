package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/reconciled/reconciled"
)

// The outbox (migration 0002) closes the gap between committing a verdict
// and publishing it: the verdict and its outbox row commit together, and
// the row stays until the publisher confirms the stream holds the verdict.
// Whoever finds a row (a restart, the next follow-up round) re-publishes.

// AppendDecided is AppendVerdict for a
// verdict decided by this instance: the same transaction records (intent,
// seq) in the outbox. The seq, final and watch rules are AppendVerdict's.
// Re-appending a verdict identical to the stored one adds no row: it was
// stored before, by a decision of its own or by an import from the stream.
// Verdicts read from the stream must use AppendVerdict: the stream holds
// them already.
func (s *Store) AppendDecided(ctx context.Context, v reconciled.Verdict, w *reconciled.Watch) error {
	if w != nil && w.IntentID != v.IntentID {
		return fmt.Errorf("%w: watch entry for %q with verdict for %q", ErrInvalid, w.IntentID, v.IntentID)
	}
	if w != nil {
		c := *w // appendVerdict fills in status and window end
		w = &c
	}
	return s.appendVerdict(ctx, v, w, true)
}

// PutIntentDecided stores an intent and the first verdict decided here for
// it in one transaction: PutIntent, then, unless the id is taken by another
// body (Conflict, and nothing is written), AppendDecided. An intent met for
// the first time thus costs one commit, shared with the rest of its burst.
func (s *Store) PutIntentDecided(ctx context.Context, rec reconciled.IntentRecord, v reconciled.Verdict, w *reconciled.Watch) (reconciled.PutResult, error) {
	if rec.IntentID != v.IntentID {
		return 0, fmt.Errorf("%w: intent %q with verdict for %q", ErrInvalid, rec.IntentID, v.IntentID)
	}
	if w != nil && w.IntentID != v.IntentID {
		return 0, fmt.Errorf("%w: watch entry for %q with verdict for %q", ErrInvalid, w.IntentID, v.IntentID)
	}
	if w != nil {
		c := *w // appendVerdictWrite fills in status and window end
		w = &c
	}
	put, err := s.putIntentWrite(rec)
	if err != nil {
		return 0, err
	}
	vw, err := s.appendVerdictWrite(v, w, true)
	if err != nil {
		return 0, err
	}
	var res reconciled.PutResult
	err = s.groupTx(ctx, "put intent "+rec.IntentID+" and "+vw.what, func(ctx context.Context, t *Tx) error {
		var written bool
		var err error
		if res, written, err = put(ctx, t, vw); err != nil || written || res == reconciled.PutConflict {
			return err
		}
		return vw.write(ctx, t)
	})
	if err != nil {
		return 0, err
	}
	return res, nil
}

func addOutbox(ctx context.Context, t *Tx, id string, seq int64) error {
	if _, err := t.ExecContext(ctx, `INSERT INTO outbox (intent_id, seq) VALUES (?, ?)
		ON CONFLICT (intent_id, seq) DO NOTHING`, id, seq); err != nil {
		return fmt.Errorf("record outbox %s/%d: %w", id, seq, err)
	}
	return nil
}

// MarkPublishedNow records that the verdict stream holds the intent's verdict
// seq: its outbox rows up to seq go, since re-publishing the latest verdict
// covers every earlier one. Rows of later seqs stay. Marking an intent with
// no rows is not an error.
func (s *Store) MarkPublishedNow(ctx context.Context, id string, seq uint64) error {
	// A seq beyond int64 cannot be stored, so every row is at or below it.
	n := int64(math.MaxInt64)
	if seq < math.MaxInt64 {
		n = int64(seq)
	}
	what := fmt.Sprintf("mark %s/%d published", id, seq)
	return s.groupTx(ctx, what, func(ctx context.Context, t *Tx) error {
		if _, err := t.ExecContext(ctx, `DELETE FROM outbox WHERE intent_id = ? AND seq <= ?`, id, n); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		return nil
	})
}

// UnpublishedBefore reports whether the outbox holds a verdict of the
// intent below seq: one the stream may not hold yet, which must reach it
// before seq does. A row whose mark is still queued counts (the caller
// then finds the verdict on the stream).
func (s *Store) UnpublishedBefore(ctx context.Context, id string, seq uint64) (bool, error) {
	n := int64(math.MaxInt64)
	if seq < math.MaxInt64 {
		n = int64(seq)
	}
	var any bool
	if err := s.r.GetContext(ctx, &any, `SELECT EXISTS (SELECT 1 FROM outbox WHERE intent_id = ? AND seq < ?)`, id, n); err != nil {
		return false, fmt.Errorf("store: unpublished verdicts of %s before %d: %w", id, seq, err)
	}
	return any, nil
}

// OutboxEntry is a stored verdict the stream may not hold yet.
type OutboxEntry struct {
	IntentID string `db:"intent_id"`
	Seq      uint64 `db:"seq"`
}

// Outbox lists the outbox, ordered by intent id and seq, after the queued
// marks (MarkPublishedLater) are applied.
func (s *Store) Outbox(ctx context.Context) ([]OutboxEntry, error) {
	if err := s.flushMarks(ctx); err != nil {
		return nil, err
	}
	var rows []OutboxEntry
	if err := s.r.SelectContext(ctx, &rows, `SELECT intent_id, seq FROM outbox ORDER BY intent_id, seq`); err != nil {
		return nil, fmt.Errorf("store: list outbox: %w", err)
	}
	return rows, nil
}

// DiscardUnpublished removes the intent's verdicts from seq on, which
// must all be in the outbox: decided here and refused by the verdict
// stream, because another instance published those seqs first. The
// intent's latest status goes back to the verdict before them and, that
// one not being final, the intent is watched again; the caller then
// imports the stream's verdicts in their place. A verdict without an
// outbox row (published, or imported from the stream) is never discarded:
// ErrInvalid.
func (s *Store) DiscardUnpublished(ctx context.Context, id string, seq uint64) error {
	if seq == 0 || seq > math.MaxInt64 {
		return fmt.Errorf("%w: discard %s from seq %d", ErrInvalid, id, seq)
	}
	from := int64(seq)
	what := fmt.Sprintf("discard unpublished verdicts of %s from seq %d", id, seq)
	// A queued mark must not clear the rows of verdicts written after
	// this discard at the same seqs.
	if err := s.flushMarks(ctx); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return s.tx(ctx, what, func(t *Tx) error {
		var published int
		if err := t.GetContext(ctx, &published, `SELECT COUNT(*) FROM verdicts v WHERE v.intent_id = ? AND v.seq >= ?
			AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.intent_id = v.intent_id AND o.seq = v.seq)`, id, from); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		if published > 0 {
			return fmt.Errorf("%w: %s: %d of them are not in the outbox", ErrInvalid, what, published)
		}
		for _, q := range []string{`DELETE FROM verdicts WHERE intent_id = ? AND seq >= ?`,
			`DELETE FROM outbox WHERE intent_id = ? AND seq >= ?`} {
			if _, err := t.ExecContext(ctx, q, id, from); err != nil {
				return fmt.Errorf("store: %s: %w", what, err)
			}
		}
		var prev struct {
			Seq    int64  `db:"seq"`
			Status string `db:"status"`
			Final  bool   `db:"final"`
		}
		err := t.GetContext(ctx, &prev, `SELECT seq, status, final FROM verdicts WHERE intent_id = ? ORDER BY seq DESC LIMIT 1`, id)
		var status any
		switch {
		case err == nil:
			status = prev.Status
		case errors.Is(err, sql.ErrNoRows):
		default:
			return fmt.Errorf("store: %s: %w", what, err)
		}
		now := s.now().UnixNano()
		if _, err := t.ExecContext(ctx, `UPDATE intents SET status = ?, final = ?, latest_seq = ?, updated_at = ? WHERE intent_id = ?`,
			status, prev.Final, prev.Seq, now, id); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		if prev.Final {
			return nil
		}
		// Watched again until the stream's verdicts say otherwise.
		if _, err := t.ExecContext(ctx, `INSERT INTO watch (intent_id, canister_id, next_check, last_status)
			SELECT intent_id, canister_id, ?, COALESCE(status, '') FROM intents WHERE intent_id = ? AND canister_id IS NOT NULL
			ON CONFLICT (intent_id) DO UPDATE SET last_status = excluded.last_status`, now, id); err != nil {
			return fmt.Errorf("store: %s: watch: %w", what, err)
		}
		return nil
	})
}

// Unpublished lists each intent with outbox rows once: re-publishing its
// latest verdict settles all of them.
func (s *Store) Unpublished(ctx context.Context) ([]string, error) {
	es, err := s.Outbox(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range es {
		if n := len(ids); n == 0 || ids[n-1] != e.IntentID {
			ids = append(ids, e.IntentID)
		}
	}
	return ids, nil
}
