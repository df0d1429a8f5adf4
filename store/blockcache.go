package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
)

// Store is the engine's persistent block cache.

// PutVerified caches decoded blocks that were verified against a certified
// tip, in their Value encoding (see PutBlocks for the immutability rule).
// Every block must carry its Value (Raw): ByStamp rebuilds blocks from it.
func (s *Store) PutVerified(ctx context.Context, ledger string, blocks []icrc3.Block) error {
	fam, cbs, err := verifiedRows(ledger, blocks)
	if err != nil {
		return err
	}
	return s.putCached(ctx, ledger, fam, cbs)
}

// PutVerifiedRange is PutVerified and SaveRange in one transaction: a walk
// down the chain stores each verified page with the range it grew, one
// commit a page. Either both are stored or neither.
func (s *Store) PutVerifiedRange(ctx context.Context, ledger string, blocks []icrc3.Block, r icrc3.VerifiedRange) error {
	fam, cbs, err := verifiedRows(ledger, blocks)
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
			if err := s.putCachedTx(ctx, t, ledger, fam, cbs, what); err != nil {
				return err
			}
		}
		return s.saveRangeTx(ctx, t, ledger, r, rwhat)
	})
}

// verifiedRows are the cache rows of verified blocks, and their family.
func verifiedRows(ledger string, blocks []icrc3.Block) (family, []CachedBlock, error) {
	fam, err := familyOf(blocks)
	if err != nil {
		return "", nil, fmt.Errorf("%w: put verified %s: %w", ErrInvalid, ledger, err)
	}
	cbs := make([]CachedBlock, len(blocks))
	for i := range blocks {
		b := &blocks[i]
		if len(b.Raw) == 0 {
			return "", nil, fmt.Errorf("%w: put verified %s: block %d has no Value", ErrInvalid, ledger, b.Index)
		}
		st, err := verifiedStamp(b, fam)
		if err != nil {
			return "", nil, fmt.Errorf("%w: put verified %s: %w", ErrInvalid, ledger, err)
		}
		cbs[i] = CachedBlock{Index: b.Index, TS: b.TS, Hash: b.Hash, Raw: b.Raw, Stamp: st}
	}
	return fam, cbs, nil
}

// verifiedStamp is the stamp a verified block is indexed under. It is
// taken from the Value itself, not from the caller's parsed fields, so the
// two cannot disagree: readStamp's two fields when they agree with the
// block's (see stamp.go), else the full parse's. An ICP block's Value is
// always parsed in full: its stamp is read from the protobuf bytes it
// carries, not from the readable copy beside them.
func verifiedStamp(b *icrc3.Block, fam family) (*uint64, error) {
	if fam == familyICRC3 {
		if r, ok := readStamp(b.Raw); ok && r.ts == b.TS && r.hasStamp == (b.CreatedAt != nil) &&
			(!r.hasStamp || r.stamp == *b.CreatedAt) {
			return b.CreatedAt, nil
		}
	}
	st, err := stampOf(b.Index, b.TS, b.Raw, b.Hash, fam)
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
	var rows []struct {
		Index  int64 `db:"idx"`
		Family int64 `db:"family"`
		runRow
	}
	// One statement, so the stamps, the runs holding them and their
	// history's family are read in one snapshot. A stamp whose run is
	// missing reads as the run -1..-1, which openRun refuses: an error,
	// never a silently missing candidate.
	if err := s.r.SelectContext(ctx, &rows, `SELECT s.idx AS idx, coalesce(r.lo, -1) AS lo, coalesce(r.hi, -1) AS hi,
			coalesce(r.meta, x'') AS meta, coalesce(r.vals, x'') AS vals,
			coalesce((SELECT `+familyCodeSQL+` FROM histories WHERE id = s.history_id), 0) AS family
		FROM block_stamps s LEFT JOIN block_runs r
			ON r.history_id = s.history_id AND r.lo > s.idx - `+fmt.Sprint(runBlocks)+` AND r.lo <= s.idx AND r.hi >= s.idx
		WHERE s.`+ofHistory+` AND s.stamp = ? AND s.idx >= ? AND s.idx <= ? ORDER BY s.idx`,
		ledger, int64(stamp), int64(lo), int64(hi)); err != nil {
		return nil, fmt.Errorf("store: blocks of %s stamped %d: %w", ledger, stamp, err)
	}
	out := make([]icrc3.Block, 0, len(rows))
	for i := range rows {
		r, err := openRun(rows[i].runRow, true)
		if err == nil && !r.has(uint64(rows[i].Index)) {
			err = fmt.Errorf("stamped block %d is not in its run %d..%d", rows[i].Index, r.lo, r.hi())
		}
		if err != nil {
			return nil, fmt.Errorf("store: blocks of %s stamped %d: %w", ledger, stamp, err)
		}
		b, err := rebuild(r.block(int(uint64(rows[i].Index)-r.lo)), familyOfCode(rows[i].Family))
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

// rebuild decodes a cached block by the rule of its history's family and
// checks it against its stored hash and timestamp.
func rebuild(c CachedBlock, fam family) (icrc3.Block, error) {
	switch fam {
	case familyICP:
		return icpBlockOf(c.Index, c.TS, c.Raw, c.Hash)
	case familyICRC3:
	default:
		return icrc3.Block{}, fmt.Errorf("block %d: its history records no ledger family (%q)", c.Index, fam)
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
// has its ts in [from, to]. Blocks without a timestamp (ts 0) are in no
// window. It relies on timestamps never decreasing along the chain, which
// the engine checks while verifying: a run's highest timestamp then finds
// the run where a window starts, and the first run past its end.
func (s *Store) WindowBlocks(ctx context.Context, ledger string, lo, hi, from, to uint64) (first, last uint64, ok bool, err error) {
	from = max(from, 1)
	if hi < lo || from > to || lo > math.MaxInt64 || from > math.MaxInt64 {
		return 0, 0, false, nil
	}
	hi, to = min(hi, math.MaxInt64), min(to, math.MaxInt64)
	first, last, ok, err = s.windowBlocks(ctx, ledger, lo, hi, from, to)
	if err != nil {
		return 0, 0, false, fmt.Errorf("store: window blocks of %s: %w", ledger, err)
	}
	return first, last, ok, nil
}

// windowBlocks is WindowBlocks on checked arguments. Its reads need not
// share a snapshot: verified blocks are immutable, and a chain discarded
// meanwhile answers nothing or a block that was in it.
//
// Every verdict asks it, so its common case is two statements: each bound
// lies in the run that the timestamp index finds for it, read with that
// probe. The scans below run only when blocks without a timestamp push a
// bound into a neighbouring run.
func (s *Store) windowBlocks(ctx context.Context, ledger string, lo, hi, from, to uint64) (first, last uint64, ok bool, err error) {
	startRun, found, err := s.firstRun(ctx, ledger, int64(from), hi)
	if err != nil || !found {
		return 0, 0, false, err
	}
	end := hi
	var pastRun run
	past := false
	if to < math.MaxInt64 {
		if pastRun, past, err = s.firstRun(ctx, ledger, int64(to)+1, hi); err != nil {
			return 0, 0, false, err
		}
		if past {
			end = min(end, pastRun.hi())
		}
	}
	start := max(startRun.lo, lo)
	if start > end {
		return 0, 0, false, nil
	}
	toHit := func(r run, k int) bool {
		t := r.ts(k)
		return t != 0 && t <= to
	}
	// Both scans stop at their first hit, which the runs found above hold
	// unless their blocks near the window carry no timestamp.
	f, ok, err := s.scanFrom(ctx, ledger, startRun, start, end, from)
	if err != nil || !ok {
		return 0, 0, false, err
	}
	l, ok := uint64(0), false
	below := end // the highest index not yet scanned for the last block
	if past && pastRun.has(end) {
		if l, ok = scanRun(pastRun, start, end, true, toHit); !ok {
			if pastRun.lo <= start {
				return 0, 0, false, nil
			}
			below = pastRun.lo - 1
		}
	}
	if !ok {
		if l, ok, err = s.scanRuns(ctx, ledger, int64(start), int64(below), true, toHit); err != nil || !ok {
			return 0, 0, false, err
		}
	}
	if f > l {
		return 0, 0, false, nil
	}
	return f, l, true, nil
}

// WindowStart returns the first cached index of [lo, hi] with ts >= from
// (a block without a timestamp is in no window); ok is false when there is
// none. It is WindowBlocks's first index, for a caller that knows the
// window's last block.
func (s *Store) WindowStart(ctx context.Context, ledger string, lo, hi, from uint64) (first uint64, ok bool, err error) {
	from = max(from, 1)
	if hi < lo || lo > math.MaxInt64 || from > math.MaxInt64 {
		return 0, false, nil
	}
	hi = min(hi, math.MaxInt64)
	startRun, found, err := s.firstRun(ctx, ledger, int64(from), hi)
	if err == nil && found && max(startRun.lo, lo) <= hi {
		first, ok, err = s.scanFrom(ctx, ledger, startRun, max(startRun.lo, lo), hi, from)
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: window start of %s: %w", ledger, err)
	}
	return first, ok, nil
}

// firstRun is the lowest run of the history at or below index hi whose
// highest timestamp reaches ts, without its Values. Runs above hi are not
// asked about: blocks above the verified range (a refresh cut before it
// recorded them) may be another history's, whose timestamps say nothing
// of the range's.
func (s *Store) firstRun(ctx context.Context, ledger string, ts int64, hi uint64) (run, bool, error) {
	var rows []runRow
	if err := s.r.SelectContext(ctx, &rows, `SELECT `+runMeta+` FROM block_runs INDEXED BY block_runs_by_ts
		WHERE `+ofHistory+` AND ts_hi >= ? AND lo <= ? ORDER BY ts_hi, lo LIMIT 1`, ledger, ts, int64(hi)); err != nil || len(rows) == 0 {
		return run{}, false, err
	}
	r, err := openRun(rows[0], false)
	return r, err == nil, err
}

// scanFrom returns the first index of [start, end] with ts >= from,
// starting in startRun (firstRun's for from) and going on into the runs
// above it when its blocks near the bound carry no timestamp.
func (s *Store) scanFrom(ctx context.Context, ledger string, startRun run, start, end, from uint64) (uint64, bool, error) {
	fromHit := func(r run, k int) bool {
		t := r.ts(k)
		return t != 0 && t >= from
	}
	if f, ok := scanRun(startRun, start, end, false, fromHit); ok || startRun.hi() >= end {
		return f, ok, nil
	}
	return s.scanRuns(ctx, ledger, int64(max(start, startRun.hi()+1)), int64(end), false, fromHit)
}

// scanRun is scanRuns over one run already read: the first index of [start,
// end] that the run holds, in index order (descending when down), for
// which hit is true.
func scanRun(r run, start, end uint64, down bool, hit func(run, int) bool) (uint64, bool) {
	a, b := max(start, r.lo), min(end, r.hi())
	if a > b {
		return 0, false
	}
	for i := range b - a + 1 {
		idx := a + i
		if down {
			idx = b - i
		}
		if hit(r, int(idx-r.lo)) {
			return idx, true
		}
	}
	return 0, false
}

// scanBatch is how many runs scanRuns reads at a time: a scan's hit is
// almost always in its first or second run.
const scanBatch = 2

// scanRuns visits the cached blocks of [start, end] of a history in index
// order (descending when down) and returns the first index for which hit
// is true.
func (s *Store) scanRuns(ctx context.Context, key string, start, end int64, down bool, hit func(run, int) bool) (uint64, bool, error) {
	q := `SELECT ` + runMeta + ` FROM block_runs
		WHERE ` + ofHistory + ` AND ` + overRange + ` ORDER BY lo LIMIT ` + fmt.Sprint(scanBatch)
	if down {
		q = strings.Replace(q, "ORDER BY lo", "ORDER BY lo DESC", 1)
	}
	for start <= end {
		var rows []runRow
		if err := s.r.SelectContext(ctx, &rows, q, append([]any{key}, overArgs(uint64(start), uint64(end))...)...); err != nil {
			return 0, false, err
		}
		runs, err := openRuns(rows, false)
		if err != nil || len(runs) == 0 {
			return 0, false, err
		}
		for _, r := range runs {
			if idx, ok := scanRun(r, uint64(start), uint64(end), down, hit); ok {
				return idx, true, nil
			}
		}
		// The rest of the range, past the runs just read; a run reaching
		// the range's end (which may be the last storable index) ends it.
		last := runs[len(runs)-1]
		if len(runs) < scanBatch || down && last.lo <= uint64(start) || !down && last.hi() >= uint64(end) {
			break
		}
		if down {
			end = int64(last.lo) - 1
		} else {
			start = int64(last.hi()) + 1
		}
	}
	return 0, false, nil
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
func (s *Store) LoadRange(ctx context.Context, ledger string) (icrc3.VerifiedRange, bool, error) {
	var row rangeRow
	err := s.r.GetContext(ctx, &row, `SELECT lo, hi, hi_hash, below, lo_ts, hi_ts, tip_time
		FROM ranges WHERE history = ?`, ledger)
	if errors.Is(err, sql.ErrNoRows) {
		return icrc3.VerifiedRange{}, false, nil
	}
	if err != nil {
		return icrc3.VerifiedRange{}, false, fmt.Errorf("store: load range of %s: %w", ledger, err)
	}
	r := icrc3.VerifiedRange{
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
func (s *Store) SaveRange(ctx context.Context, ledger string, r icrc3.VerifiedRange) error {
	if ledger == "" {
		return fmt.Errorf("%w: save range: empty canister", ErrInvalid)
	}
	what := fmt.Sprintf("save range %s %d..%d", ledger, r.Lo, r.Hi)
	return s.cacheTx(ctx, what, func(t *Tx) error { return s.saveRangeTx(ctx, t, ledger, r, what) })
}

// saveRangeTx is SaveRange's write, inside t.
func (s *Store) saveRangeTx(ctx context.Context, t *Tx, ledger string, r icrc3.VerifiedRange, what string) error {
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
	r, ok, err := runAt(ctx, s.r, ledger, index)
	if err != nil {
		return h, 0, false, fmt.Errorf("store: block %d of %s: %w", index, ledger, err)
	}
	if !ok {
		return h, 0, false, nil
	}
	k := int(index - r.lo)
	copy(h[:], r.hashAt(k))
	return h, r.ts(k), true, nil
}

// Discard forgets a chain's blocks, tip and range and records the change,
// in one transaction: the ledger's history changed, and no block of the old
// one may answer again.
func (s *Store) Discard(ctx context.Context, ledger string, ch reconciled.HistoryChange) error {
	what := "discard chain " + ledger
	hexHash := func(h string) []byte { b, _ := hex.DecodeString(h); return b }
	return s.tx(ctx, what, func(t *Tx) error {
		// The history keeps its id: ids are never reused (see 0005). It
		// loses its family: the ledger's next history may be of another
		// (0015).
		if _, err := t.ExecContext(ctx, `UPDATE histories SET family = NULL WHERE key = ?`, ledger); err != nil {
			return fmt.Errorf("store: %s: family: %w", what, err)
		}
		for _, d := range [...]struct{ table, where string }{
			{"block_runs", ofHistory}, {"block_stamps", ofHistory}, {"tips", "history = ?"}, {"ranges", "history = ?"},
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
