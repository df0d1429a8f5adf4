package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/reconciled/reconciled"
)

// validateIntent refuses a record the store cannot hold faithfully.
func validateIntent(rec *reconciled.IntentRecord) error {
	switch {
	case !reconciled.ValidIntentID(rec.IntentID):
		return fmt.Errorf("%w: intent id %q", ErrInvalid, rec.IntentID)
	case rec.CanisterID == "":
		return fmt.Errorf("%w: intent %s: empty canister id", ErrInvalid, rec.IntentID)
	case rec.Method == "":
		return fmt.Errorf("%w: intent %s: empty method", ErrInvalid, rec.IntentID)
	case rec.Hash == [32]byte{}:
		return fmt.Errorf("%w: intent %s: zero canonical hash", ErrInvalid, rec.IntentID)
	case !json.Valid(rec.Body):
		return fmt.Errorf("%w: intent %s: body is not JSON", ErrInvalid, rec.IntentID)
	}
	return nil
}

// PutIntent stores an intent unless its id is already taken: the first
// writer wins, and a later record is compared by canonical hash only.
func (s *Store) PutIntent(ctx context.Context, rec reconciled.IntentRecord) (reconciled.PutResult, error) {
	put, err := s.putIntentWrite(rec)
	if err != nil {
		return 0, err
	}
	var res reconciled.PutResult
	// A burst stores many intents at once: they share one commit (and one
	// fsync) with each other and with the verdicts being appended.
	err = s.groupTx(ctx, "put intent "+rec.IntentID, func(ctx context.Context, t *Tx) error {
		var err error
		res, _, err = put(ctx, t, nil)
		return err
	})
	if err != nil {
		return 0, err
	}
	return res, nil
}

// putIntentWrite checks rec and returns the write that stores it inside a
// writer transaction, so that other writes can share that transaction.
// Given first, a verdict of seq 1, the write stores an intent no row holds
// yet with that verdict (verdictWrite.writeFirst) and reports it written.
func (s *Store) putIntentWrite(rec reconciled.IntentRecord) (func(ctx context.Context, t *Tx, first *verdictWrite) (reconciled.PutResult, bool, error), error) {
	if err := validateIntent(&rec); err != nil {
		return nil, err
	}
	now := s.now()
	if rec.FirstSeen.IsZero() {
		rec.FirstSeen = now
	}
	seen, err := nanos("first_seen", rec.FirstSeen)
	if err != nil {
		return nil, err
	}
	ix := indexOf(&rec)
	return func(ctx context.Context, t *Tx, first *verdictWrite) (reconciled.PutResult, bool, error) {
		if first != nil && first.v.Seq == 1 {
			// A first verdict almost always comes with an intent no row
			// holds: its insert is tried first, and only an id already
			// taken is read.
			created, err := first.writeFirst(ctx, t, &rec, seen, now.UnixNano(), ix)
			if err != nil || created {
				return reconciled.PutCreated, created, err
			}
		}
		var res reconciled.PutResult
		var stored []byte
		err := t.GetContext(ctx, &stored, `SELECT canonical_hash FROM intents WHERE intent_id = ?`, rec.IntentID)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = t.ExecContext(ctx, `INSERT INTO intents
				(intent_id, canister_id, caller, method, body, canonical_hash, first_seen, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
				rec.IntentID, rec.CanisterID, rec.Caller, rec.Method, string(rec.Body),
				rec.Hash[:], seen, now.UnixNano())
			if err == nil {
				err = indexIntent(ctx, t, rec.IntentID, ix)
			}
			res = reconciled.PutCreated
		case err != nil:
			return 0, false, fmt.Errorf("store: put intent %s: %w", rec.IntentID, err)
		case stored == nil:
			// first_seen stays: it is the listing key, and moving it would
			// let a paging cursor see the row twice.
			_, err = t.ExecContext(ctx, `UPDATE intents SET canister_id = ?, caller = ?, method = ?,
				body = ?, canonical_hash = ?, updated_at = ? WHERE intent_id = ?`,
				rec.CanisterID, rec.Caller, rec.Method, string(rec.Body), rec.Hash[:],
				now.UnixNano(), rec.IntentID)
			if err == nil {
				err = indexIntent(ctx, t, rec.IntentID, ix)
			}
			res = reconciled.PutAdopted
		case bytes.Equal(stored, rec.Hash[:]):
			res = reconciled.PutExisting
		default:
			res = reconciled.PutConflict
		}
		if err != nil {
			return 0, false, fmt.Errorf("store: put intent %s: %w", rec.IntentID, err)
		}
		return res, false, nil
	}, nil
}

const intentCols = `intent_id, canister_id, caller, method, body, canonical_hash,
	first_seen, status, final, latest_seq, updated_at`

// listCols are intentCols of intents i and the times of intent_facts f.
const listCols = `i.intent_id, i.canister_id, i.caller, i.method, i.body, i.canonical_hash,
	i.first_seen, i.status, i.final, i.latest_seq, i.updated_at, f.decided_at, f.stamp`

type intentRow struct {
	IntentID   string         `db:"intent_id"`
	CanisterID sql.NullString `db:"canister_id"`
	Caller     sql.NullString `db:"caller"`
	Method     sql.NullString `db:"method"`
	Body       sql.NullString `db:"body"`
	Hash       []byte         `db:"canonical_hash"`
	FirstSeen  int64          `db:"first_seen"`
	Status     sql.NullString `db:"status"`
	Final      bool           `db:"final"`
	LatestSeq  int64          `db:"latest_seq"`
	UpdatedAt  int64          `db:"updated_at"`
	DecidedAt  sql.NullInt64  `db:"decided_at"`
	Stamp      sql.NullInt64  `db:"stamp"`
}

// Intent returns the stored intent. An id known only from verdicts decided
// elsewhere has no record: ErrNotFound (its verdicts are still readable).
func (s *Store) Intent(ctx context.Context, id string) (reconciled.IntentRecord, error) {
	var row intentRow
	err := s.r.GetContext(ctx, &row, `SELECT `+intentCols+` FROM intents WHERE intent_id = ? AND body IS NOT NULL`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return reconciled.IntentRecord{}, fmt.Errorf("store: intent %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return reconciled.IntentRecord{}, fmt.Errorf("store: intent %s: %w", id, err)
	}
	rec := reconciled.IntentRecord{
		IntentID:   row.IntentID,
		CanisterID: row.CanisterID.String,
		Caller:     row.Caller.String,
		Method:     row.Method.String,
		Body:       json.RawMessage(row.Body.String),
		FirstSeen:  fromNanos(row.FirstSeen),
	}
	copy(rec.Hash[:], row.Hash)
	return rec, nil
}

// IntentSummary is one row of a listing: the intent and its latest verdict.
type IntentSummary struct {
	IntentID   string
	CanisterID string // "" when HasBody is false
	Caller     string
	Method     string
	FirstSeen  time.Time
	// Status is the latest verdict's status, "" before the first verdict.
	Status    reconciled.Status
	Final     bool
	LatestSeq uint64
	UpdatedAt time.Time
	// HasBody is false for an intent known only from verdicts decided by
	// another sidecar.
	HasBody bool
	// Body is the intent as received (nil when HasBody is false).
	Body json.RawMessage
	// DecidedAt is the latest verdict's decided_at; zero before the first.
	DecidedAt time.Time
	// Stamp is the intent's created_at_time in ledger ns; 0 when the body
	// has none the matcher accepts.
	Stamp uint64
	// Matches says why a listing with keys returned the intent: the roles
	// of the matching keys (caller, from, to, spender, canister, amount,
	// memo, block, near_miss) and "intent_id".
	Matches []string
}

func (row *intentRow) summary() IntentSummary {
	s := IntentSummary{
		IntentID:   row.IntentID,
		CanisterID: row.CanisterID.String,
		Caller:     row.Caller.String,
		Method:     row.Method.String,
		FirstSeen:  fromNanos(row.FirstSeen),
		Status:     reconciled.Status(row.Status.String),
		Final:      row.Final,
		LatestSeq:  uint64(row.LatestSeq),
		UpdatedAt:  fromNanos(row.UpdatedAt),
		HasBody:    row.Body.Valid,
	}
	if row.Body.Valid {
		s.Body = json.RawMessage(row.Body.String)
	}
	if row.DecidedAt.Valid {
		s.DecidedAt = fromNanos(row.DecidedAt.Int64)
	}
	if row.Stamp.Valid {
		s.Stamp = uint64(row.Stamp.Int64)
	}
	return s
}

// ListFilter selects intents. Zero fields do not filter.
type ListFilter struct {
	// Status keeps intents whose latest verdict has one of these statuses;
	// "" selects intents with no verdict yet.
	Status   []reconciled.Status
	Canister string
	Caller   string
	// Since keeps intents first seen at or after it.
	Since time.Time
	// Open keeps intents without a final verdict.
	Open bool
	// Until keeps intents first seen before it.
	Until time.Time
	// StampFrom and StampTo keep intents whose created_at_time is in
	// [StampFrom, StampTo); either may be zero.
	StampFrom, StampTo time.Time
	// Keys keep intents that carry any of the keys, and IDPrefix (also)
	// intents whose id starts with it; both empty select by neither.
	Keys     []Key
	IDPrefix string
	// ByDecided orders by the latest verdict's decided time instead of
	// first_seen, and so lists only intents with a verdict.
	ByDecided bool
	// Newest lists newest first; the default is oldest first.
	Newest bool
	// Cursor continues a listing from the nextCursor of a previous call with
	// the same filter.
	Cursor string
	// Limit bounds the page: 0 means 100, at most 1000.
	Limit int
}

const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

// ListIntents returns one page of intents ordered by (first_seen,
// intent_id) and the cursor for the next page ("" after the last). Paging
// is keyset, not offset: rows inserted while paging never shift the page
// boundaries, so every row that existed when the first page was read is
// returned exactly once.
func (s *Store) ListIntents(ctx context.Context, f ListFilter) ([]IntentSummary, string, error) {
	limit := f.Limit
	switch {
	case limit < 0:
		return nil, "", fmt.Errorf("%w: list limit %d", ErrInvalid, limit)
	case limit == 0:
		limit = defaultListLimit
	case limit > maxListLimit:
		limit = maxListLimit
	}
	var where []string
	var args []any
	if len(f.Status) > 0 {
		var ors []string
		var in []any
		for _, st := range f.Status {
			if st == "" {
				ors = append(ors, "i.status IS NULL")
				continue
			}
			if !st.Valid() {
				return nil, "", fmt.Errorf("%w: list status %q", ErrInvalid, st)
			}
			in = append(in, string(st))
		}
		if len(in) > 0 {
			ors = append(ors, "i.status IN (?"+strings.Repeat(", ?", len(in)-1)+")")
			args = append(args, in...)
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	if f.Canister != "" {
		where = append(where, "i.canister_id = ?")
		args = append(args, f.Canister)
	}
	if f.Caller != "" {
		where = append(where, "i.caller = ?")
		args = append(args, f.Caller)
	}
	if !f.Since.IsZero() {
		since, err := nanos("since", f.Since)
		if err != nil {
			return nil, "", err
		}
		where = append(where, "i.first_seen >= ?")
		args = append(args, since)
	}
	for _, b := range []struct {
		what, cond string
		t          time.Time
	}{{"until", "i.first_seen < ?", f.Until}, {"stamp from", "f.stamp >= ?", f.StampFrom}, {"stamp to", "f.stamp < ?", f.StampTo}} {
		if b.t.IsZero() {
			continue
		}
		n, err := nanos(b.what, b.t)
		if err != nil {
			return nil, "", err
		}
		where = append(where, b.cond)
		args = append(args, n)
	}
	if c, a := keyCond(&f); c != "" {
		where = append(where, c)
		args = append(args, a...)
	}
	if f.Open {
		where = append(where, "i.final = 0")
	}
	cmp, order := ">", "ASC"
	if f.Newest {
		cmp, order = "<", "DESC"
	}
	key := "i.first_seen"
	if f.ByDecided {
		key = "f.decided_at"
		where = append(where, "f.decided_at IS NOT NULL")
	}
	if f.Cursor != "" {
		c, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		if c.newest != f.Newest || c.decided != f.ByDecided {
			return nil, "", fmt.Errorf("%w: cursor was taken with the other order", ErrInvalid)
		}
		where = append(where, "("+key+", i.intent_id) "+cmp+" (?, ?)")
		args = append(args, c.seen, c.id)
	}
	q := "SELECT " + listCols + " FROM intents i LEFT JOIN intent_facts f ON f.intent_id = i.intent_id"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY " + key + " " + order + ", i.intent_id " + order + " LIMIT ?"
	args = append(args, limit+1)

	var rows []intentRow
	if err := s.r.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, "", fmt.Errorf("store: list intents: %w", err)
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		seen := last.FirstSeen
		if f.ByDecided {
			seen = last.DecidedAt.Int64
		}
		next = cursor{newest: f.Newest, decided: f.ByDecided, seen: seen, id: last.IntentID}.encode()
	}
	out := make([]IntentSummary, len(rows))
	for i := range rows {
		out[i] = rows[i].summary()
	}
	if err := s.matches(ctx, &f, out); err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// cursor is the last row of a page. It is opaque to callers; the version
// prefix lets its format change without misreading old cursors.
type cursor struct {
	newest  bool
	decided bool // seen is the decided time
	seen    int64
	id      string
}

func (c cursor) encode() string {
	dir := "a"
	if c.newest {
		dir = "d"
	}
	if c.decided {
		dir = strings.ToUpper(dir)
	}
	return base64.RawURLEncoding.EncodeToString([]byte("1." + dir + "." + strconv.FormatInt(c.seen, 10) + "." + c.id))
}

func decodeCursor(s string) (cursor, error) {
	bad := fmt.Errorf("%w: malformed cursor", ErrInvalid)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, bad
	}
	parts := strings.SplitN(string(b), ".", 4)
	if len(parts) != 4 || parts[0] != "1" || len(parts[1]) != 1 || !strings.Contains("adAD", parts[1]) || !reconciled.ValidIntentID(parts[3]) {
		return cursor{}, bad
	}
	seen, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return cursor{}, bad
	}
	return cursor{newest: strings.EqualFold(parts[1], "d"), decided: parts[1] == "A" || parts[1] == "D", seen: seen, id: parts[3]}, nil
}

// CountByStatus counts intents by their latest verdict's status; the key ""
// counts intents with no verdict yet.
func (s *Store) CountByStatus(ctx context.Context) (map[reconciled.Status]int, error) {
	var rows []struct {
		Status string `db:"status"`
		N      int    `db:"n"`
	}
	if err := s.r.SelectContext(ctx, &rows,
		`SELECT coalesce(status, '') AS status, count(*) AS n FROM intents GROUP BY 1`); err != nil {
		return nil, fmt.Errorf("store: count by status: %w", err)
	}
	out := make(map[reconciled.Status]int, len(rows))
	for _, r := range rows {
		out[reconciled.Status(r.Status)] = r.N
	}
	return out, nil
}
