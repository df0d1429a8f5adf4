package store

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
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

// stampArg is the stamp column's value: the int64 bit pattern, exact for
// the equality lookups made on it.
func stampArg(st *uint64) any {
	if st == nil {
		return nil
	}
	return int64(*st)
}

// PutBlocks caches verified blocks of a canister in one transaction.
// Verified history is immutable: an index already cached (or the canister's
// tip) with another hash or timestamp is ErrBlockConflict, and then nothing
// of the batch is stored. Re-putting identical blocks is a no-op. The
// blocks are ICRC-3 blocks (PutVerified caches those of any family): Raw
// must decode (icrc3.UnmarshalValue) to a block whose ts is TS.
func (s *Store) PutBlocks(ctx context.Context, canister string, blocks []CachedBlock) error {
	cbs := make([]CachedBlock, len(blocks))
	for i, b := range blocks {
		var err error
		if b.Stamp, err = stampOf(b.Index, b.TS, b.Raw, b.Hash, familyICRC3); err != nil {
			return fmt.Errorf("%w: put blocks %s: %w", ErrInvalid, canister, err)
		}
		cbs[i] = b
	}
	return s.putCached(ctx, canister, familyICRC3, cbs)
}

// stampOf parses a block's Value encoding, by the rule of the block's
// family, for its stamp and checks its ts. A block that does not parse is
// refused: without its stamp it could not be found.
func stampOf(index, ts uint64, raw []byte, h icrc3.Hash, fam family) (*uint64, error) {
	if fam == familyICP {
		b, err := icpBlockOf(index, ts, raw, h)
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

// putCached stores blocks of family fam whose Stamp is already derived
// from their Value.
func (s *Store) putCached(ctx context.Context, canister string, fam family, blocks []CachedBlock) error {
	what, err := checkCachedRows(canister, blocks)
	if err != nil || len(blocks) == 0 {
		return err
	}
	return s.cacheTx(ctx, what, func(t *Tx) error { return s.putCachedTx(ctx, t, canister, fam, blocks, what) })
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
func (s *Store) putCachedTx(ctx context.Context, t *Tx, canister string, fam family, blocks []CachedBlock, what string) error {
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
	hid, err := historyID(ctx, t, canister, fam)
	if err != nil {
		return fmt.Errorf("store: %s: history: %w", what, err)
	}
	fresh, err := uncached(ctx, t, hid, canister, blocks)
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if err := s.insertRuns(ctx, t, hid, fresh); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return nil
}

// uncached returns blocks in index order, without those already cached
// and without repeats. Verified history is immutable: a block whose index
// is cached, or repeated in the batch, with another hash or ts is
// ErrBlockConflict. Only the recorded verified range holds facts, though:
// a cached run outside it (a refresh stores blocks above the range before
// it records the range, and may be cut in between) that the batch
// overlaps is dropped, and the batch stored in its place (dropStrays).
func uncached(ctx context.Context, t *Tx, hid int64, canister string, blocks []CachedBlock) ([]CachedBlock, error) {
	bs := slices.Clone(blocks)
	slices.SortStableFunc(bs, func(a, b CachedBlock) int { return cmp.Compare(a.Index, b.Index) })
	conflict := func(b *CachedBlock, hash []byte, ts uint64) error {
		if bytes.Equal(hash, b.Hash[:]) && ts == b.TS {
			return nil
		}
		return fmt.Errorf("%w: %s: block %d cached with hash %x ts %d, now hash %s ts %d",
			ErrBlockConflict, canister, b.Index, hash, ts, b.Hash, b.TS)
	}
	out := bs[:0]
	for i := range bs {
		if n := len(out); n > 0 && out[n-1].Index == bs[i].Index {
			if err := conflict(&bs[i], out[n-1].Hash[:], out[n-1].TS); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, bs[i])
	}
	if len(out) == 0 {
		return out, nil
	}
	runs, err := cachedRuns(ctx, t, canister, out[0].Index, out[len(out)-1].Index, false)
	if err != nil || len(runs) == 0 {
		return out, err
	}
	if runs, err = dropStrays(ctx, t, hid, canister, runs); err != nil || len(runs) == 0 {
		return out, err
	}
	kept := out[:0]
	for i := range out {
		b := &out[i]
		for len(runs) > 0 && runs[0].hi() < b.Index {
			runs = runs[1:]
		}
		if len(runs) == 0 || !runs[0].has(b.Index) {
			kept = append(kept, *b)
			continue
		}
		k := int(b.Index - runs[0].lo)
		if err := conflict(b, runs[0].hashAt(k), runs[0].ts(k)); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// dropStrays deletes those of runs (cached runs a batch overlaps) that lie
// outside the history's recorded verified range, with their stamp rows,
// and returns the others. A refresh walks down from a new tip and records
// the range only once it has reached the range: cut in between, it leaves
// verified blocks above the range that no range vouches for, and if the
// ledger's history then changed, the next refresh verifies other blocks at
// those indices before it can see the change at the range's top. Without a
// recorded range (PutBlocks alone) every cached block is kept. A run
// partly inside the range is kept: a walk's runs lie within its pages,
// and a stray run a walk overlaps is dropped before the range can grow
// over it.
func dropStrays(ctx context.Context, t *Tx, hid int64, canister string, runs []run) ([]run, error) {
	var rng struct {
		Lo int64 `db:"lo"`
		Hi int64 `db:"hi"`
	}
	err := t.GetContext(ctx, &rng, `SELECT lo, hi FROM ranges WHERE history = ?`, canister)
	if errors.Is(err, sql.ErrNoRows) {
		return runs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("recorded range: %w", err)
	}
	kept := runs[:0:0]
	for _, r := range runs {
		if rng.Lo <= rng.Hi && int64(r.hi()) >= rng.Lo && int64(r.lo) <= rng.Hi {
			kept = append(kept, r)
			continue
		}
		for k := range r.n {
			if rec := r.rec(k); rec[recFlag] == flagStamp {
				st := binary.LittleEndian.Uint64(rec[recStamp:])
				if _, err := t.ExecContext(ctx, `DELETE FROM block_stamps WHERE history_id = ? AND stamp = ? AND idx = ?`,
					hid, int64(st), int64(r.lo)+int64(k)); err != nil {
					return nil, fmt.Errorf("drop stamp of block %d above the range: %w", r.lo+uint64(k), err)
				}
			}
		}
		if _, err := t.ExecContext(ctx, `DELETE FROM block_runs WHERE history_id = ? AND lo = ?`, hid, int64(r.lo)); err != nil {
			return nil, fmt.Errorf("drop run %d..%d outside the range %d..%d: %w", r.lo, r.hi(), rng.Lo, rng.Hi, err)
		}
	}
	return kept, nil
}

// insertRuns stores blocks (ascending, none cached) as runs of consecutive
// indexes of at most runBlocks, with a stamp row for each stamped block.
func (s *Store) insertRuns(ctx context.Context, t *Tx, hid int64, blocks []CachedBlock) error {
	if err := s.insertStamps(ctx, t, hid, blocks); err != nil {
		return err
	}
	ins := t.StmtxContext(ctx, s.insertRun)
	defer ins.Close()
	var meta, vals []byte
	for len(blocks) > 0 {
		n := 1
		for n < len(blocks) && n < runBlocks && blocks[n].Index == blocks[n-1].Index+1 {
			n++
		}
		r := blocks[:n]
		blocks = blocks[n:]
		var err error
		if meta, vals, err = encodeRun(meta[:0], vals[:0], r); err != nil {
			return err
		}
		tsLo, tsHi := tsBounds(r)
		if _, err := ins.ExecContext(ctx, hid, int64(r[0].Index), int64(r[n-1].Index), int64(tsLo), int64(tsHi), meta, vals); err != nil {
			return fmt.Errorf("run %d..%d: %w", r[0].Index, r[n-1].Index, err)
		}
	}
	return nil
}

// historyID returns the id the blocks of history key, of family fam, are
// stored under, assigning the next one to a key cached for the first time,
// and records the history's family when it has none (a new history, or one
// whose chain was discarded). Blocks of another family than the history's
// cached blocks are ErrBlockConflict: one history's blocks are of one
// family, and its cached blocks are rebuilt by its recorded one. A history
// holding no blocks takes the new family.
func historyID(ctx context.Context, t *Tx, key string, fam family) (int64, error) {
	var row struct {
		ID     int64          `db:"id"`
		Family sql.NullString `db:"family"`
	}
	err := t.GetContext(ctx, &row, `SELECT id, family FROM histories WHERE key = ?`, key)
	if errors.Is(err, sql.ErrNoRows) {
		err = t.GetContext(ctx, &row.ID, `INSERT INTO histories (key, family) VALUES (?, ?) RETURNING id`, key, string(fam))
		return row.ID, err
	}
	if err != nil || row.Family.Valid && family(row.Family.String) == fam {
		return row.ID, err
	}
	if row.Family.Valid {
		var held bool
		if err := t.GetContext(ctx, &held, `SELECT EXISTS (SELECT 1 FROM block_runs WHERE history_id = ?)`, row.ID); err != nil {
			return 0, fmt.Errorf("blocks held: %w", err)
		}
		if held {
			return 0, fmt.Errorf("%w: the history's cached blocks are of family %s, these of %s",
				ErrBlockConflict, row.Family.String, fam)
		}
	}
	if _, err := t.ExecContext(ctx, `UPDATE histories SET family = ? WHERE id = ?`, string(fam), row.ID); err != nil {
		return 0, fmt.Errorf("record family %s: %w", fam, err)
	}
	return row.ID, nil
}

// ofHistory selects the blocks of the history whose key is the next
// argument. A key never cached has no id and selects nothing.
const ofHistory = `history_id = (SELECT id FROM histories WHERE key = ?)`

// insertRunSQL stores one run (prepared once on the writer).
const insertRunSQL = `INSERT INTO block_runs (history_id, lo, hi, ts_lo, ts_hi, meta, vals) VALUES (?, ?, ?, ?, ?, ?, ?)`

// stampRows is how many stamp rows one INSERT statement carries: one
// statement per row spent most of a cache write in statement overhead, and
// 3 parameters a row stays far below SQLite's parameter limit.
const stampRows = 200

// stampsSQL is the statement inserting n stamp rows.
func stampsSQL(n int) string {
	var q strings.Builder
	q.WriteString(`INSERT INTO block_stamps (history_id, stamp, idx) VALUES `)
	for i := range n {
		if i > 0 {
			q.WriteString(", ")
		}
		// Numbered parameters (one ?1 for the history) would cost more:
		// the driver reads and allocates every parameter's name.
		q.WriteString("(?, ?, ?)")
	}
	return q.String()
}

// insertStamps indexes the stamped blocks by stamp. A full chunk runs the
// statement prepared on the writer: parsing a 200-row statement costs as
// much as binding it.
func (s *Store) insertStamps(ctx context.Context, t *Tx, hid int64, blocks []CachedBlock) error {
	var h any = hid // boxed once, not once a row
	args := make([]any, 0, 3*stampRows)
	var full *sqlx.Stmt
	flush := func() error {
		n := len(args) / 3
		if n == 0 {
			return nil
		}
		var err error
		if n == stampRows {
			if full == nil {
				full = t.StmtxContext(ctx, s.insertStampsFull)
			}
			_, err = full.ExecContext(ctx, args...)
		} else {
			_, err = t.ExecContext(ctx, stampsSQL(n), args...)
		}
		args = args[:0]
		return err
	}
	defer func() {
		if full != nil {
			full.Close()
		}
	}()
	for i := range blocks {
		b := &blocks[i]
		if b.Stamp == nil {
			continue
		}
		args = append(args, h, stampArg(b.Stamp), int64(b.Index))
		if len(args) == 3*stampRows {
			if err := flush(); err != nil {
				return fmt.Errorf("stamps to block %d: %w", b.Index, err)
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("stamps: %w", err)
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
	runs, err := cachedRuns(ctx, s.r, canister, start, last, true)
	if err != nil {
		return nil, fmt.Errorf("store: cached blocks %s %d..%d: %w", canister, start, end, err)
	}
	var out []CachedBlock
	for _, r := range runs {
		for k := range r.n {
			if i := r.lo + uint64(k); i >= start && i <= last {
				out = append(out, r.block(k))
			}
		}
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
	r, ok, err := runAt(ctx, t, canister, index)
	if err != nil || !ok {
		return err
	}
	if cached := r.hashAt(int(index - r.lo)); !bytes.Equal(cached, h[:]) {
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
