package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/reconciled/reconciled/icrc3"
)

// CachedBlock is one verified block of a ledger's history in its raw
// encoding. Only blocks whose hash chain has been verified against a
// certified tip belong in the cache.
type CachedBlock struct {
	Index uint64
	TS    uint64 // ledger time (ns)
	Hash  icrc3.Hash
	// Raw is the block's Value as icrc3.MarshalValue encodes it.
	Raw []byte
	// Stamp is the block's tx.ts (the caller's created_at_time), nil when
	// it has none; ByStamp finds blocks by it. PutBlocks derives it from
	// Raw (a caller's value is ignored): a stamp missing from the index
	// would hide a matching block and turn "found" into "absent".
	Stamp *uint64
}

// Tip is the highest verified point of a ledger's chain.
type Tip struct {
	Index         uint64
	Hash          icrc3.Hash
	CertifiedTime uint64 // certified ledger time (ns) of the certificate
}

type blockRow struct {
	Index int64         `db:"idx"`
	TS    int64         `db:"ts"`
	Hash  []byte        `db:"hash"`
	Raw   []byte        `db:"raw"`
	Stamp sql.NullInt64 `db:"stamp"`
}

func (r *blockRow) cached() CachedBlock {
	b := CachedBlock{Index: uint64(r.Index), TS: uint64(r.TS), Raw: r.Raw}
	copy(b.Hash[:], r.Hash)
	if r.Stamp.Valid {
		st := uint64(r.Stamp.Int64)
		b.Stamp = &st
	}
	return b
}

// stampArg is the stamp column's value: the int64 bit pattern, exact for
// the equality lookups made on it.
func stampArg(st *uint64) any {
	if st == nil {
		return nil
	}
	return int64(*st)
}

const blockCols = `idx, ts, hash, raw, stamp`

// PutBlocks caches verified blocks of a canister in one transaction.
// Verified history is immutable: an index already cached (or the canister's
// tip) with another hash or timestamp is ErrBlockConflict, and then nothing
// of the batch is stored. Re-putting identical blocks is a no-op. Raw must
// decode (icrc3.UnmarshalValue) to a block whose ts is TS.
func (s *Store) PutBlocks(ctx context.Context, canister string, blocks []CachedBlock) error {
	cbs := make([]CachedBlock, len(blocks))
	for i, b := range blocks {
		var err error
		if b.Stamp, err = stampOf(b.Index, b.TS, b.Raw, b.Hash); err != nil {
			return fmt.Errorf("%w: put blocks %s: %w", ErrInvalid, canister, err)
		}
		cbs[i] = b
	}
	return s.putCached(ctx, canister, cbs)
}

// stampOf parses a block's Value encoding for its stamp and checks its ts.
// A block that does not parse is refused: without its stamp it could not be
// found.
func stampOf(index, ts uint64, raw []byte, h icrc3.Hash) (*uint64, error) {
	if b, ok, err := icpBlockOf(index, ts, raw, h); ok {
		return b.CreatedAt, err
	}
	b, err := icrc3.ParseRawBlock(index, raw, h)
	if err != nil {
		return nil, err
	}
	if b.TS != ts {
		return nil, fmt.Errorf("block %d: Value has ts %d, not %d", index, b.TS, ts)
	}
	return b.CreatedAt, nil
}

// putCached stores blocks whose Stamp is already derived from their Value.
func (s *Store) putCached(ctx context.Context, canister string, blocks []CachedBlock) error {
	what, err := checkCachedRows(canister, blocks)
	if err != nil || len(blocks) == 0 {
		return err
	}
	return s.cacheTx(ctx, what, func(t *Tx) error { return s.putCachedTx(ctx, t, canister, blocks, what) })
}

// checkCachedRows refuses blocks that cannot be stored faithfully and names
// the write for its errors.
func checkCachedRows(canister string, blocks []CachedBlock) (string, error) {
	if canister == "" {
		return "", fmt.Errorf("%w: put blocks: empty canister", ErrInvalid)
	}
	if len(blocks) == 0 {
		return "", nil
	}
	for i := range blocks {
		b := &blocks[i]
		if _, err := u64("block index", b.Index); err != nil {
			return "", fmt.Errorf("store: put blocks %s: %w", canister, err)
		}
		if _, err := u64("block ts", b.TS); err != nil {
			return "", fmt.Errorf("store: put blocks %s #%d: %w", canister, b.Index, err)
		}
		if len(b.Raw) == 0 {
			return "", fmt.Errorf("%w: put blocks %s #%d: empty raw encoding", ErrInvalid, canister, b.Index)
		}
	}
	return fmt.Sprintf("put blocks %s %d..%d", canister, blocks[0].Index, blocks[len(blocks)-1].Index), nil
}

// putCachedTx is putCached's write, inside t.
func (s *Store) putCachedTx(ctx context.Context, t *Tx, canister string, blocks []CachedBlock, what string) error {
	tip, hasTip, err := getTip(ctx, t, canister)
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	for i := range blocks {
		b := &blocks[i]
		if hasTip && b.Index == tip.Index && b.Hash != tip.Hash {
			return fmt.Errorf("%w: %s: block %d hash %s, verified tip has %s",
				ErrBlockConflict, canister, b.Index, b.Hash, tip.Hash)
		}
	}
	hid, err := historyID(ctx, t, canister)
	if err != nil {
		return fmt.Errorf("store: %s: history id: %w", what, err)
	}
	// Parsing a 200-row statement costs as much as binding it: the
	// writer keeps one prepared for every full chunk.
	var full *sqlx.Stmt
	if len(blocks) >= insertRows {
		full = t.StmtxContext(ctx, s.insertFull)
		defer full.Close()
	}
	args := make([]any, 0, 6*min(len(blocks), insertRows))
	for len(blocks) > 0 {
		chunk := blocks[:min(len(blocks), insertRows)]
		blocks = blocks[len(chunk):]
		exec := func(ctx context.Context, args ...any) (sql.Result, error) {
			return t.ExecContext(ctx, insertSQL(len(chunk)), args...)
		}
		if len(chunk) == insertRows {
			exec = full.ExecContext
		}
		if err := insertBlocks(ctx, t, exec, args, canister, hid, chunk); err != nil {
			return fmt.Errorf("store: %s: blocks %d..%d: %w", what, chunk[0].Index, chunk[len(chunk)-1].Index, err)
		}
	}
	return nil
}

// historyID returns the id the blocks of history key are stored under,
// assigning the next one to a key cached for the first time.
func historyID(ctx context.Context, t *Tx, key string) (int64, error) {
	var id int64
	err := t.GetContext(ctx, &id, `SELECT id FROM histories WHERE key = ?`, key)
	if errors.Is(err, sql.ErrNoRows) {
		err = t.GetContext(ctx, &id, `INSERT INTO histories (key) VALUES (?) RETURNING id`, key)
	}
	return id, err
}

// ofHistory selects the blocks of the history whose key is the next
// argument. A key never cached has no id and selects nothing.
const ofHistory = `history_id = (SELECT id FROM histories WHERE key = ?)`

// insertRows is how many blocks one INSERT statement carries: one
// statement per row spent most of a cache write in statement overhead, and
// 6 parameters a row stays far below SQLite's parameter limit.
const insertRows = 200

// insertSQL is the statement inserting n blocks.
func insertSQL(n int) string {
	var q strings.Builder
	q.WriteString(`INSERT INTO blocks (history_id, idx, ts, hash, raw, stamp) VALUES `)
	for i := range n {
		if i > 0 {
			q.WriteString(", ")
		}
		// Numbered parameters (one ?1 for the history) would cost more:
		// the driver reads and allocates every parameter's name.
		q.WriteString("(?, ?, ?, ?, ?, ?)")
	}
	q.WriteString(` ON CONFLICT (history_id, idx) DO NOTHING`)
	return q.String()
}

// insertBlocks inserts blocks in one statement (exec runs it; args is
// scratch space for its arguments). A row already cached is left alone;
// when any was (fewer rows inserted than given), every block is compared
// with the row now stored at its index, so a cached block with another
// hash or ts, or two blocks of the batch at one index that disagree, is
// ErrBlockConflict.
func insertBlocks(ctx context.Context, t *Tx, exec func(context.Context, ...any) (sql.Result, error),
	args []any, canister string, hid int64, blocks []CachedBlock) error {
	args = args[:0]
	var h any = hid // boxed once, not once a row
	for i := range blocks {
		b := &blocks[i]
		args = append(args, h, int64(b.Index), int64(b.TS), b.Hash[:], b.Raw, stampArg(b.Stamp))
	}
	res, err := exec(ctx, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == int64(len(blocks)) {
		return nil
	}
	// The batch's own indexes, not the span between its lowest and highest:
	// a sparse batch must not read every cached block in between.
	q := `SELECT idx, ts, hash FROM blocks WHERE history_id = ? AND idx IN (?` + strings.Repeat(", ?", len(blocks)-1) + `)`
	args = append(args[:0], hid)
	for i := range blocks {
		args = append(args, int64(blocks[i].Index))
	}
	var rows []struct {
		Index int64  `db:"idx"`
		TS    int64  `db:"ts"`
		Hash  []byte `db:"hash"`
	}
	if err := t.SelectContext(ctx, &rows, q, args...); err != nil {
		return err
	}
	type stored struct {
		ts   int64
		hash []byte
	}
	have := make(map[uint64]stored, len(rows))
	for _, r := range rows {
		have[uint64(r.Index)] = stored{r.TS, r.Hash}
	}
	for i := range blocks {
		b := &blocks[i]
		old, ok := have[b.Index]
		if !ok {
			return fmt.Errorf("block %d: neither inserted nor cached", b.Index)
		}
		if !bytes.Equal(old.hash, b.Hash[:]) || old.ts != int64(b.TS) {
			return fmt.Errorf("%w: %s: block %d cached with hash %x ts %d, now hash %s ts %d",
				ErrBlockConflict, canister, b.Index, old.hash, old.ts, b.Hash, b.TS)
		}
	}
	return nil
}

// CachedBlocks returns the cached blocks of canister with start ≤ index <
// end, ascending. The cache may have gaps: callers check contiguity. Ask
// for page-sized ranges; the result is held in memory.
func (s *Store) CachedBlocks(ctx context.Context, canister string, start, end uint64) ([]CachedBlock, error) {
	if start >= end || start > math.MaxInt64 {
		return nil, nil
	}
	// Nothing at or above 2^63 is ever stored, so clamping the inclusive
	// last index loses nothing.
	last := min(end-1, math.MaxInt64)
	var rows []blockRow
	if err := s.r.SelectContext(ctx, &rows, `SELECT `+blockCols+` FROM blocks
		WHERE `+ofHistory+` AND idx >= ? AND idx <= ? ORDER BY idx`, canister, int64(start), int64(last)); err != nil {
		return nil, fmt.Errorf("store: cached blocks %s %d..%d: %w", canister, start, end, err)
	}
	out := make([]CachedBlock, len(rows))
	for i := range rows {
		out[i] = rows[i].cached()
	}
	return out, nil
}

// PutTip records a newly verified tip. The tip only moves forward: a lower
// index than the stored one is ignored (a lagging replica or a slower
// concurrent verification), the same index with the same hash keeps the
// later certified time, and the same index with another hash — or a hash
// contradicting the cached block at that index — is ErrBlockConflict.
func (s *Store) PutTip(ctx context.Context, canister string, tip Tip) error {
	if canister == "" {
		return fmt.Errorf("%w: put tip: empty canister", ErrInvalid)
	}
	what := fmt.Sprintf("put tip %s %d", canister, tip.Index)
	return s.tx(ctx, what, func(t *Tx) error {
		if err := s.putTip(ctx, t, canister, tip); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		return nil
	})
}

func (s *Store) putTip(ctx context.Context, t *Tx, canister string, tip Tip) error {
	idx, err := u64("tip index", tip.Index)
	if err != nil {
		return err
	}
	ct, err := u64("tip certified time", tip.CertifiedTime)
	if err != nil {
		return err
	}
	if err := checkCached(ctx, t, canister, tip.Index, tip.Hash); err != nil {
		return err
	}
	old, ok, err := getTip(ctx, t, canister)
	if err != nil {
		return err
	}
	if ok && old.Index > tip.Index {
		return nil
	}
	if ok && old.Index == tip.Index && old.Hash != tip.Hash {
		return fmt.Errorf("%w: stored tip %d has hash %s, now %s", ErrBlockConflict, old.Index, old.Hash, tip.Hash)
	}
	_, err = t.ExecContext(ctx, `INSERT INTO tips (history, idx, hash, certified_time, updated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (history) DO UPDATE SET idx = excluded.idx, hash = excluded.hash,
			certified_time = max(certified_time, excluded.certified_time), updated_at = excluded.updated_at`,
		canister, idx, tip.Hash[:], ct, s.now().UnixNano())
	return err
}

// checkCached fails with ErrBlockConflict when block index of canister is
// cached with a hash other than h. An uncached (or unstorable) index
// passes: there is nothing to contradict.
func checkCached(ctx context.Context, t *Tx, canister string, index uint64, h icrc3.Hash) error {
	if index > math.MaxInt64 {
		return nil
	}
	var cached []byte
	err := t.GetContext(ctx, &cached, `SELECT hash FROM blocks WHERE `+ofHistory+` AND idx = ?`, canister, int64(index))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	case !bytes.Equal(cached, h[:]):
		return fmt.Errorf("%w: block %d is cached with hash %x, not %s", ErrBlockConflict, index, cached, h)
	}
	return nil
}

// Tip returns the canister's highest verified tip, or ErrNotFound.
func (s *Store) Tip(ctx context.Context, canister string) (Tip, error) {
	tip, ok, err := getTip(ctx, s.r, canister)
	if err != nil {
		return Tip{}, fmt.Errorf("store: tip %s: %w", canister, err)
	}
	if !ok {
		return Tip{}, fmt.Errorf("store: tip %s: %w", canister, ErrNotFound)
	}
	return tip, nil
}

func getTip(ctx context.Context, q sqlx.QueryerContext, canister string) (Tip, bool, error) {
	var row struct {
		Index int64  `db:"idx"`
		Hash  []byte `db:"hash"`
		CT    int64  `db:"certified_time"`
	}
	err := sqlx.GetContext(ctx, q, &row, `SELECT idx, hash, certified_time FROM tips WHERE history = ?`, canister)
	if errors.Is(err, sql.ErrNoRows) {
		return Tip{}, false, nil
	}
	if err != nil {
		return Tip{}, false, err
	}
	tip := Tip{Index: uint64(row.Index), CertifiedTime: uint64(row.CT)}
	copy(tip.Hash[:], row.Hash)
	return tip, true, nil
}
