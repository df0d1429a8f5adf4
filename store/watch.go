package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/reconciled/reconciled"
)

type watchRow struct {
	IntentID   string        `db:"intent_id"`
	CanisterID string        `db:"canister_id"`
	NextCheck  int64         `db:"next_check"`
	Attempts   int64         `db:"attempts"`
	WindowToTS int64         `db:"window_to_ts"`
	LastStatus string        `db:"last_status"`
	CheckedAt  sql.NullInt64 `db:"checked_at"`
}

func watchRowOf(w *reconciled.Watch) (watchRow, error) {
	switch {
	case !reconciled.ValidIntentID(w.IntentID):
		return watchRow{}, fmt.Errorf("%w: watch intent id %q", ErrInvalid, w.IntentID)
	case w.CanisterID == "":
		return watchRow{}, fmt.Errorf("%w: watch %s: empty canister id", ErrInvalid, w.IntentID)
	case w.Attempts < 0:
		return watchRow{}, fmt.Errorf("%w: watch %s: attempts %d", ErrInvalid, w.IntentID, w.Attempts)
	case w.LastStatus != "" && !w.LastStatus.Valid():
		return watchRow{}, fmt.Errorf("%w: watch %s: status %q", ErrInvalid, w.IntentID, w.LastStatus)
	case w.LastStatus.Final():
		return watchRow{}, fmt.Errorf("%w: watch %s: status %s", ErrFinal, w.IntentID, w.LastStatus)
	}
	next, err := nanos("next_check", w.NextCheck)
	if err != nil {
		return watchRow{}, err
	}
	to := sat64(w.WindowToTS)
	return watchRow{
		IntentID: w.IntentID, CanisterID: w.CanisterID, NextCheck: next,
		Attempts: int64(w.Attempts), WindowToTS: to, LastStatus: string(w.LastStatus),
	}, nil
}

func (r *watchRow) entry() reconciled.Watch {
	e := reconciled.Watch{
		IntentID: r.IntentID, CanisterID: r.CanisterID, NextCheck: fromNanos(r.NextCheck),
		Attempts: int(r.Attempts), WindowToTS: uint64(r.WindowToTS), LastStatus: reconciled.Status(r.LastStatus),
	}
	if r.CheckedAt.Valid {
		e.CheckedAt = fromNanos(r.CheckedAt.Int64)
	}
	return e
}

// Watch adds or replaces the intent's watch entry. The intent must be
// stored (ErrNotFound) and not final (ErrFinal): watching a decided intent
// would rescan history for nothing.
func (s *Store) Watch(ctx context.Context, w reconciled.Watch) error {
	r, err := watchRowOf(&w)
	if err != nil {
		return err
	}
	return s.tx(ctx, "watch "+w.IntentID, func(t *Tx) error {
		var final bool
		err := t.GetContext(ctx, &final, `SELECT final FROM intents WHERE intent_id = ?`, w.IntentID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: watch %s: intent: %w", w.IntentID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: watch %s: %w", w.IntentID, err)
		}
		if final {
			return fmt.Errorf("store: watch %s: %w", w.IntentID, ErrFinal)
		}
		return upsertWatch(ctx, t, &r)
	})
}

func upsertWatch(ctx context.Context, t *Tx, r *watchRow) error {
	_, err := t.ExecContext(ctx, `INSERT INTO watch
		(intent_id, canister_id, next_check, attempts, window_to_ts, last_status)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (intent_id) DO UPDATE SET canister_id = excluded.canister_id,
			next_check = excluded.next_check, attempts = excluded.attempts,
			window_to_ts = excluded.window_to_ts, last_status = excluded.last_status`,
		r.IntentID, r.CanisterID, r.NextCheck, r.Attempts, r.WindowToTS, r.LastStatus)
	if err != nil {
		return fmt.Errorf("store: watch %s: %w", r.IntentID, err)
	}
	return nil
}

// Unwatch removes the intent's watch entry; removing an absent one is not
// an error.
func (s *Store) Unwatch(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM watch WHERE intent_id = ?`, id); err != nil {
		s.noteFailed(PathState, err)
		return fmt.Errorf("store: unwatch %s: %w", id, err)
	}
	return nil
}

const watchCols = `intent_id, canister_id, next_check, attempts, window_to_ts, last_status, checked_at`

// RecordChecks records that the watched intents ids were checked against
// the ledger at at. A not_yet intent checked again without news gets no
// new verdict, so this is what tells that it is still being checked. Ids
// no longer watched are skipped, and a check time never goes back.
func (s *Store) RecordChecks(ctx context.Context, ids []string, at time.Time) error {
	n, err := nanos("checked_at", at)
	if err != nil {
		return err
	}
	const chunk = 500 // well under SQLite's bound on parameters
	for len(ids) > 0 {
		part := ids[:min(chunk, len(ids))]
		ids = ids[len(part):]
		args := make([]any, 0, len(part)+2)
		args = append(args, n, n)
		for _, id := range part {
			args = append(args, id)
		}
		if _, err := s.w.ExecContext(ctx, `UPDATE watch SET checked_at = ?
			WHERE (checked_at IS NULL OR checked_at < ?) AND intent_id IN (?`+strings.Repeat(", ?", len(part)-1)+`)`,
			args...); err != nil {
			return fmt.Errorf("store: record checks: %w", err)
		}
	}
	return nil
}

// DueWatches returns the entries whose next check is at or before now,
// earliest first.
func (s *Store) DueWatches(ctx context.Context, now time.Time) ([]reconciled.Watch, error) {
	n, err := nanos("now", now)
	if err != nil {
		return nil, err
	}
	return s.watches(ctx, "due watches",
		`SELECT `+watchCols+` FROM watch WHERE next_check <= ? ORDER BY next_check, intent_id`, n)
}

// Watches returns every watch entry, earliest next check first: the
// undecided intents a restarted daemon resumes.
func (s *Store) Watches(ctx context.Context) ([]reconciled.Watch, error) {
	return s.watches(ctx, "watches", `SELECT `+watchCols+` FROM watch ORDER BY next_check, intent_id`)
}

// WatchCount is the number of watch entries, without reading them: what
// a metrics scrape needs (counted on the watch table's primary-key index).
func (s *Store) WatchCount(ctx context.Context) (int, error) {
	var n int
	if err := s.r.GetContext(ctx, &n, `SELECT count(*) FROM watch`); err != nil {
		return 0, fmt.Errorf("store: count watches: %w", err)
	}
	return n, nil
}

func (s *Store) watches(ctx context.Context, what, q string, args ...any) ([]reconciled.Watch, error) {
	var rows []watchRow
	if err := s.r.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	out := make([]reconciled.Watch, len(rows))
	for i := range rows {
		out[i] = rows[i].entry()
	}
	return out, nil
}

// ByCanister groups entries by ledger, keeping their order within each
// group, so one scan of a ledger can serve all its intents.
func ByCanister(entries []reconciled.Watch) map[string][]reconciled.Watch {
	out := make(map[string][]reconciled.Watch)
	for _, e := range entries {
		out[e.CanisterID] = append(out[e.CanisterID], e)
	}
	return out
}

// WatchOf returns the intent's watch entry, or ErrNotFound when it is not
// watched.
func (s *Store) WatchOf(ctx context.Context, id string) (reconciled.Watch, error) {
	ws, err := s.watches(ctx, "watch of "+id, `SELECT `+watchCols+` FROM watch WHERE intent_id = ?`, id)
	if err != nil {
		return reconciled.Watch{}, err
	}
	if len(ws) == 0 {
		return reconciled.Watch{}, fmt.Errorf("store: watch of %s: %w", id, ErrNotFound)
	}
	return ws[0], nil
}

// WatchedLedgers lists the ledgers with at least one watched intent, each
// once, sorted.
func (s *Store) WatchedLedgers(ctx context.Context) ([]string, error) {
	var out []string
	if err := s.r.SelectContext(ctx, &out, `SELECT DISTINCT canister_id FROM watch ORDER BY canister_id`); err != nil {
		return nil, fmt.Errorf("store: watched ledgers: %w", err)
	}
	return out, nil
}

// WatchCounts returns, per ledger with at least one watched intent, how
// many it has: what bounds the open intents of unconfigured canisters.
func (s *Store) WatchCounts(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		CanisterID string `db:"canister_id"`
		N          int    `db:"n"`
	}
	if err := s.r.SelectContext(ctx, &rows, `SELECT canister_id, count(*) AS n FROM watch GROUP BY canister_id`); err != nil {
		return nil, fmt.Errorf("store: watch counts: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.CanisterID] = r.N
	}
	return out, nil
}

// WatchOpenIntents puts on the watch list every stored intent whose latest
// verdict is not final and that is not watched yet, due at once, and
// returns how many it added. A store written before every store watched
// the fleet's open intents holds imported ones unwatched; this adopts them.
func (s *Store) WatchOpenIntents(ctx context.Context) (int, error) {
	res, err := s.w.ExecContext(ctx, `INSERT INTO watch (intent_id, canister_id, next_check, last_status)
		SELECT i.intent_id, i.canister_id, ?, i.status FROM intents i
		WHERE i.final = 0 AND i.latest_seq > 0 AND i.status IS NOT NULL
			AND i.canister_id IS NOT NULL AND i.body IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM watch w WHERE w.intent_id = i.intent_id)`, s.now().UnixNano())
	if err != nil {
		s.noteFailed(PathState, err)
		return 0, fmt.Errorf("store: watch open intents: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: watch open intents: %w", err)
	}
	return int(n), nil
}

// OldestOpen is the oldest watched (open, non-final) intent of a ledger.
type OldestOpen struct {
	CanisterID, IntentID string
	FirstSeen            time.Time
}

// OldestOpenByLedger returns, per ledger on the watch list, its oldest
// watched intent by first_seen, ordered by ledger.
func (s *Store) OldestOpenByLedger(ctx context.Context) ([]OldestOpen, error) {
	var rows []struct {
		CanisterID string `db:"canister_id"`
		IntentID   string `db:"intent_id"`
		FirstSeen  int64  `db:"first_seen"`
	}
	// SQLite takes the bare columns of a min() aggregate from the row
	// holding the minimum.
	if err := s.r.SelectContext(ctx, &rows, `SELECT w.canister_id AS canister_id, i.intent_id AS intent_id,
		min(i.first_seen) AS first_seen FROM watch w JOIN intents i ON i.intent_id = w.intent_id
		WHERE i.final = 0 GROUP BY w.canister_id ORDER BY w.canister_id`); err != nil {
		return nil, fmt.Errorf("store: oldest open intents: %w", err)
	}
	out := make([]OldestOpen, len(rows))
	for i, r := range rows {
		out[i] = OldestOpen{CanisterID: r.CanisterID, IntentID: r.IntentID, FirstSeen: fromNanos(r.FirstSeen)}
	}
	return out, nil
}

// Reschedule replaces an intent's watch entry (Watch), keeping the entry's
// status and window end in step with the intent's latest verdict, which
// listings show; the caller's LastStatus and WindowToTS are not used.
func (s *Store) Reschedule(ctx context.Context, w reconciled.Watch) error {
	e := reconciled.Watch{IntentID: w.IntentID, CanisterID: w.CanisterID, NextCheck: w.NextCheck, Attempts: w.Attempts}
	v, err := s.LatestVerdict(ctx, w.IntentID)
	switch {
	case err == nil:
		e.LastStatus = v.Status
		if v.Window != nil {
			e.WindowToTS = uint64(v.Window.ToTS)
		}
	case !errors.Is(err, ErrNotFound):
		return err
	}
	return s.Watch(ctx, e)
}
