package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/reconcile"
)

// Store is the engine's persistent block cache.
var _ reconcile.BlockCache = (*Store)(nil)

// PutVerified caches decoded blocks that were verified against a certified
// tip, in their Value encoding (see PutBlocks for the immutability rule).
// Every block must carry its Value (Raw): ByStamp rebuilds blocks from it.
func (s *Store) PutVerified(ctx context.Context, ledger string, blocks []icrc3.Block) error {
	cbs, err := verifiedRows(ledger, blocks)
	if err != nil {
		return err
	}
	return s.putCached(ctx, ledger, cbs)
}

// PutVerifiedRange is PutVerified and SaveRange in one transaction: a walk
// down the chain stores each verified page with the range it grew, one
// commit a page. Either both are stored or neither.
func (s *Store) PutVerifiedRange(ctx context.Context, ledger string, blocks []icrc3.Block, r reconcile.VerifiedRange) error {
	cbs, err := verifiedRows(ledger, blocks)
	if err != nil {
		return err
	}
	what, err := checkCachedRows(ledger, cbs)
	if err != nil {
		return err
	}
	rwhat := fmt.Sprintf("save range %s %d..%d", ledger, r.Lo, r.Hi)
	return s.cacheTx(ctx, what+", "+rwhat, func(t *Tx) error {
		if len(cbs) > 0 {
			if err := s.putCachedTx(ctx, t, ledger, cbs, what); err != nil {
				return err
			}
		}
		return s.saveRangeTx(ctx, t, ledger, r, rwhat)
	})
}

// verifiedRows are the cache rows of verified blocks.
func verifiedRows(ledger string, blocks []icrc3.Block) ([]CachedBlock, error) {
	cbs := make([]CachedBlock, len(blocks))
	for i := range blocks {
		b := &blocks[i]
		if len(b.Raw) == 0 {
			return nil, fmt.Errorf("%w: put verified %s: block %d has no Value", ErrInvalid, ledger, b.Index)
		}
		st, err := verifiedStamp(b)
		if err != nil {
			return nil, fmt.Errorf("%w: put verified %s: %w", ErrInvalid, ledger, err)
		}
		cbs[i] = CachedBlock{Index: b.Index, TS: b.TS, Hash: b.Hash, Raw: b.Raw, Stamp: st}
	}
	return cbs, nil
}

// verifiedStamp is the stamp a verified block is indexed under. It is
// taken from the Value itself, not from the caller's parsed fields, so the
// two cannot disagree: readStamp's two fields when they agree with the
// block's (see stamp.go), else the full parse's. An ICP block's Value is
// always parsed in full: its stamp is read from the protobuf bytes it
// carries, not from the readable copy beside them.
func verifiedStamp(b *icrc3.Block) (*uint64, error) {
	if !isICPValue(b.Raw) {
		if r, ok := readStamp(b.Raw); ok && r.ts == b.TS && r.hasStamp == (b.CreatedAt != nil) &&
			(!r.hasStamp || r.stamp == *b.CreatedAt) {
			return b.CreatedAt, nil
		}
	}
	st, err := stampOf(b.Index, b.TS, b.Raw, b.Hash)
	if err != nil {
		return nil, err
	}
	if (st == nil) != (b.CreatedAt == nil) || st != nil && *st != *b.CreatedAt {
		return nil, fmt.Errorf("block %d: created_at differs from its Value", b.Index)
	}
	return st, nil
}

// ByStamp returns the cached blocks of [lo, hi] whose tx.ts equals stamp,
// ascending. Each is rebuilt from its stored Value and re-hashed: a cache
// that no longer matches the hash it was verified with is an error, never
// a silently missing or altered candidate.
func (s *Store) ByStamp(ctx context.Context, ledger string, stamp, lo, hi uint64) ([]icrc3.Block, error) {
	if hi < lo || lo > math.MaxInt64 {
		return nil, nil
	}
	hi = min(hi, math.MaxInt64)
	var rows []blockRow
	// Named: without statistics the planner prefers the primary key's
	// range, which reads every block of [lo, hi] instead of the few stamped.
	if err := s.r.SelectContext(ctx, &rows, `SELECT `+blockCols+` FROM blocks INDEXED BY blocks_by_stamp
		WHERE `+ofHistory+` AND stamp = ? AND idx >= ? AND idx <= ? ORDER BY idx`,
		ledger, int64(stamp), int64(lo), int64(hi)); err != nil {
		return nil, fmt.Errorf("store: blocks of %s stamped %d: %w", ledger, stamp, err)
	}
	out := make([]icrc3.Block, 0, len(rows))
	for i := range rows {
		b, err := rebuild(rows[i].cached())
		if err != nil {
			return nil, fmt.Errorf("store: blocks of %s stamped %d: %w", ledger, stamp, err)
		}
		if b.CreatedAt == nil || *b.CreatedAt != stamp {
			return nil, fmt.Errorf("store: blocks of %s stamped %d: block %d: stored Value has another stamp",
				ledger, stamp, b.Index)
		}
		out = append(out, b)
	}
	return out, nil
}

// rebuild decodes a cached block and checks it against its stored hash and
// timestamp.
func rebuild(c CachedBlock) (icrc3.Block, error) {
	if b, ok, err := icpBlockOf(c.Index, c.TS, c.Raw, c.Hash); ok {
		return b, err
	}
	v, err := icrc3.UnmarshalValue(c.Raw)
	if err != nil {
		return icrc3.Block{}, fmt.Errorf("block %d: %w", c.Index, err)
	}
	if h := v.Hash(); h != c.Hash {
		return icrc3.Block{}, fmt.Errorf("block %d: stored Value hashes to %s, verified hash is %s", c.Index, h, c.Hash)
	}
	b, err := icrc3.ParseRawBlock(c.Index, c.Raw, c.Hash)
	if err != nil {
		return icrc3.Block{}, err
	}
	if b.TS != c.TS {
		return icrc3.Block{}, fmt.Errorf("block %d: stored Value has ts %d, row has %d", c.Index, b.TS, c.TS)
	}
	return b, nil
}

// WindowBlocks returns the first cached index of [lo, hi] with ts >= from
// and the last with ts <= to; ok is false when no cached block of [lo, hi]
// has its ts in [from, to]. It relies on timestamps never decreasing along
// the chain, which the engine checks while verifying.
func (s *Store) WindowBlocks(ctx context.Context, ledger string, lo, hi, from, to uint64) (first, last uint64, ok bool, err error) {
	if hi < lo || from > to || lo > math.MaxInt64 || from > math.MaxInt64 {
		return 0, 0, false, nil
	}
	hi, to = min(hi, math.MaxInt64), min(to, math.MaxInt64)
	var f, l int64
	err = s.r.GetContext(ctx, &f, `SELECT idx FROM blocks
		WHERE `+ofHistory+` AND ts >= ? AND idx >= ? AND idx <= ? ORDER BY ts, idx LIMIT 1`,
		ledger, int64(from), int64(lo), int64(hi))
	if err == nil {
		err = s.r.GetContext(ctx, &l, `SELECT idx FROM blocks
			WHERE `+ofHistory+` AND ts <= ? AND idx >= ? AND idx <= ? ORDER BY ts DESC, idx DESC LIMIT 1`,
			ledger, int64(to), int64(lo), int64(hi))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("store: window blocks of %s: %w", ledger, err)
	}
	if f > l {
		return 0, 0, false, nil
	}
	return uint64(f), uint64(l), true, nil
}

type rangeRow struct {
	Lo      int64  `db:"lo"`
	Hi      int64  `db:"hi"`
	HiHash  []byte `db:"hi_hash"`
	Below   []byte `db:"below"`
	LoTS    int64  `db:"lo_ts"`
	HiTS    int64  `db:"hi_ts"`
	TipTime int64  `db:"tip_time"`
}

// LoadRange returns the ledger's saved verified range; ok is false when
// none was saved.
func (s *Store) LoadRange(ctx context.Context, ledger string) (reconcile.VerifiedRange, bool, error) {
	var row rangeRow
	err := s.r.GetContext(ctx, &row, `SELECT lo, hi, hi_hash, below, lo_ts, hi_ts, tip_time
		FROM ranges WHERE history = ?`, ledger)
	if errors.Is(err, sql.ErrNoRows) {
		return reconcile.VerifiedRange{}, false, nil
	}
	if err != nil {
		return reconcile.VerifiedRange{}, false, fmt.Errorf("store: load range of %s: %w", ledger, err)
	}
	r := reconcile.VerifiedRange{
		Lo: uint64(row.Lo), Hi: uint64(row.Hi), LoTS: uint64(row.LoTS), HiTS: uint64(row.HiTS),
		TipTime: uint64(row.TipTime),
	}
	copy(r.HiHash[:], row.HiHash)
	if row.Below != nil {
		var b icrc3.Hash
		copy(b[:], row.Below)
		r.Below = &b
	}
	return r, true, nil
}

// SaveRange replaces the ledger's verified range and advances its tip (see
// PutTip) in one transaction. Hashes that contradict cached blocks — HiHash
// at Hi, Below at Lo-1 — are ErrBlockConflict and nothing is saved.
func (s *Store) SaveRange(ctx context.Context, ledger string, r reconcile.VerifiedRange) error {
	if ledger == "" {
		return fmt.Errorf("%w: save range: empty canister", ErrInvalid)
	}
	what := fmt.Sprintf("save range %s %d..%d", ledger, r.Lo, r.Hi)
	return s.cacheTx(ctx, what, func(t *Tx) error { return s.saveRangeTx(ctx, t, ledger, r, what) })
}

// saveRangeTx is SaveRange's write, inside t.
func (s *Store) saveRangeTx(ctx context.Context, t *Tx, ledger string, r reconcile.VerifiedRange, what string) error {
	if r.Lo > 0 && r.Below != nil {
		if err := checkCached(ctx, t, ledger, r.Lo-1, *r.Below); err != nil {
			return fmt.Errorf("store: %s: below: %w", what, err)
		}
	}
	if err := s.putTip(ctx, t, ledger, Tip{Index: r.Hi, Hash: r.HiHash, CertifiedTime: r.TipTime}); err != nil {
		return fmt.Errorf("store: %s: tip: %w", what, err)
	}
	var below []byte
	if r.Below != nil {
		below = r.Below[:]
	}
	_, err := t.ExecContext(ctx, `INSERT INTO ranges (history, lo, hi, hi_hash, below, lo_ts, hi_ts, tip_time)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (history) DO UPDATE SET lo = excluded.lo, hi = excluded.hi, hi_hash = excluded.hi_hash,
			below = excluded.below, lo_ts = excluded.lo_ts, hi_ts = excluded.hi_ts, tip_time = excluded.tip_time`,
		ledger, int64(r.Lo), int64(r.Hi), r.HiHash[:], below, int64(r.LoTS), int64(r.HiTS), int64(r.TipTime))
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return nil
}

// BlockAt returns the hash and ts of a cached block; ok is false when the
// index is not cached.
func (s *Store) BlockAt(ctx context.Context, ledger string, index uint64) (icrc3.Hash, uint64, bool, error) {
	var h icrc3.Hash
	if index > math.MaxInt64 {
		return h, 0, false, nil
	}
	var row struct {
		Hash []byte `db:"hash"`
		TS   int64  `db:"ts"`
	}
	err := s.r.GetContext(ctx, &row, `SELECT hash, ts FROM blocks WHERE `+ofHistory+` AND idx = ?`, ledger, int64(index))
	if errors.Is(err, sql.ErrNoRows) {
		return h, 0, false, nil
	}
	if err != nil {
		return h, 0, false, fmt.Errorf("store: block %d of %s: %w", index, ledger, err)
	}
	copy(h[:], row.Hash)
	return h, uint64(row.TS), true, nil
}

// Discard forgets a chain's blocks, tip and range and records the change,
// in one transaction: the ledger's history changed, and no block of the old
// one may answer again.
func (s *Store) Discard(ctx context.Context, ledger string, ch reconcile.HistoryChange) error {
	what := "discard chain " + ledger
	hexHash := func(h string) []byte { b, _ := hex.DecodeString(h); return b }
	return s.tx(ctx, what, func(t *Tx) error {
		// The history keeps its id: ids are never reused (see 0005).
		for _, d := range [...]struct{ table, where string }{
			{"blocks", ofHistory}, {"tips", "history = ?"}, {"ranges", "history = ?"},
		} {
			if _, err := t.ExecContext(ctx, `DELETE FROM `+d.table+` WHERE `+d.where, ledger); err != nil {
				return fmt.Errorf("store: %s: %s: %w", what, d.table, err)
			}
		}
		// Indexes above 2^63 are never cached: recorded as bit patterns.
		_, err := t.ExecContext(ctx, `INSERT INTO history_changes (history, detected_at, reason,
			old_tip_index, old_tip_hash, new_tip_index, new_tip_hash) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			ledger, s.now().UnixNano(), ch.Reason, int64(ch.OldTipIndex), hexHash(ch.OldTipHash),
			int64(ch.NewTipIndex), hexHash(ch.NewTipHash))
		if err != nil {
			return fmt.Errorf("store: %s: record: %w", what, err)
		}
		return nil
	})
}

// HistoryChanges returns how many history changes were recorded for a
// chain.
func (s *Store) HistoryChanges(ctx context.Context, ledger string) (int, error) {
	var n int
	if err := s.r.GetContext(ctx, &n, `SELECT count(*) FROM history_changes WHERE history = ?`, ledger); err != nil {
		return 0, fmt.Errorf("store: history changes of %s: %w", ledger, err)
	}
	return n, nil
}
