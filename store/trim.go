package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/reconciled/reconciled/icrc3"
)

// Bounding the block cache: TrimBlocks drops a chain's oldest cached runs
// and raises its verified range's bottom past them, in one transaction.
// What stays is still a verified range with all of its blocks: Lo moves to
// the first run kept, Below becomes the hash of the block just under it
// (read from the cache before the run holding it goes), and LoTS the
// lowest timestamp the range still holds. A window below the new Lo is no
// longer covered, so the engine reads its blocks from the ledger again and
// verifies them against Below, as for any window older than the range.
// Blocks outside the recorded range below the cut go too.
//
// The engine keeps its chain's range in memory: it must hold the chain
// (reconcile.Engine.TrimCache) while this runs and reload the range after.

// DefaultTrimRuns bounds the runs one TrimBlocks transaction deletes (64
// blocks each).
const DefaultTrimRuns = 256

// TrimBlocks deletes the cached blocks of ledger (a history key) below the
// lowest run holding a block with ts >= keepTS, at most maxRuns runs, and
// saves the range they leave. It returns the blocks deleted; 0 when the
// range holds nothing older than keepTS or is not recorded.
func (s *Store) TrimBlocks(ctx context.Context, ledger string, keepTS uint64, maxRuns int) (int, error) {
	if maxRuns <= 0 {
		maxRuns = DefaultTrimRuns
	}
	keep := int64(math.MaxInt64)
	if keepTS < math.MaxInt64 {
		keep = int64(keepTS)
	}
	what := "trim block cache of " + ledger
	var deleted int
	err := s.cacheTx(ctx, what, func(t *Tx) error {
		deleted = 0
		var rr []rangeRow
		if err := t.SelectContext(ctx, &rr, `SELECT lo, hi, hi_hash, below, lo_ts, hi_ts, tip_time
			FROM ranges WHERE history = ?`, ledger); err != nil {
			return fmt.Errorf("store: %s: load range: %w", what, err)
		}
		if len(rr) == 0 {
			return nil
		}
		r := rr[0]
		lo, hi := uint64(r.Lo), uint64(r.Hi)
		if lo == hi+1 || lo > math.MaxInt64 || hi > math.MaxInt64 {
			return nil // empty: nothing cached to trim
		}
		// The first run (in index order) holding a block at or after
		// keepTS: timestamps never decrease along the chain, so every run
		// below it holds only older blocks or none with a timestamp.
		var cut []int64
		if err := t.SelectContext(ctx, &cut, `SELECT lo FROM block_runs WHERE `+ofHistory+` AND ts_hi >= ?
			ORDER BY ts_hi, lo LIMIT 1`, ledger, keep); err != nil {
			return fmt.Errorf("store: %s: find cut: %w", what, err)
		}
		newLo := hi + 1 // no block kept: only a run at Hi stays (below)
		if len(cut) == 1 {
			newLo = uint64(cut[0])
		}
		// The run holding Hi always stays: the range then still ends at a
		// cached block, and the next refresh continues from it.
		top, ok, err := runAt(ctx, t, ledger, hi)
		if err != nil || !ok {
			return err // a range whose top is not cached is not trimmed
		}
		newLo = min(newLo, top.lo)
		// At most maxRuns runs a transaction: the cut moves up by whole
		// runs from the range's bottom.
		var los []int64
		if err := t.SelectContext(ctx, &los, `SELECT lo FROM block_runs WHERE `+ofHistory+` AND lo >= ? AND lo <= ?
			ORDER BY lo LIMIT ?`, ledger, int64(lo), int64(newLo), maxRuns+1); err != nil {
			return fmt.Errorf("store: %s: runs: %w", what, err)
		}
		if len(los) > maxRuns {
			newLo = uint64(los[maxRuns])
		}
		if newLo <= lo {
			return nil
		}
		// The block under the new bottom vouches for it: its hash is the
		// new Below. It must be cached (the range held it).
		under, ok, err := runAt(ctx, t, ledger, newLo-1)
		if err != nil {
			return fmt.Errorf("store: %s: block %d: %w", what, newLo-1, err)
		}
		if !ok {
			return fmt.Errorf("store: %s: block %d inside the verified range is not cached", what, newLo-1)
		}
		var below icrc3.Hash
		copy(below[:], under.hashAt(int(newLo-1-under.lo)))
		kept, ok, err := runAt(ctx, t, ledger, newLo)
		if err != nil || !ok || kept.lo != newLo {
			return fmt.Errorf("store: %s: no run starts at the new bottom %d (%v)", what, newLo, err)
		}
		// The lowest timestamp left: the first run from newLo with one.
		loTS := uint64(math.MaxUint64)
		var ts []int64
		if err := t.SelectContext(ctx, &ts, `SELECT ts_lo FROM block_runs WHERE `+ofHistory+` AND lo >= ? AND ts_lo > 0
			ORDER BY lo LIMIT 1`, ledger, int64(newLo)); err != nil {
			return fmt.Errorf("store: %s: lowest timestamp: %w", what, err)
		}
		if len(ts) == 1 {
			loTS = uint64(ts[0])
		}
		// The stamp rows of the runs going, found from the runs' records
		// (block_stamps is keyed by stamp, not by index).
		var rows []runRow
		if err := t.SelectContext(ctx, &rows, `SELECT `+runMeta+` FROM block_runs WHERE `+ofHistory+` AND lo < ?`,
			ledger, int64(newLo)); err != nil {
			return fmt.Errorf("store: %s: runs going: %w", what, err)
		}
		runs, err := openRuns(rows, false)
		if err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		var id int64
		if err := t.GetContext(ctx, &id, `SELECT id FROM histories WHERE key = ?`, ledger); err != nil {
			return fmt.Errorf("store: %s: history id: %w", what, err)
		}
		for _, run := range runs {
			for k := range run.n {
				if st, ok := run.stamp(k); ok {
					if _, err := t.ExecContext(ctx, `DELETE FROM block_stamps WHERE history_id = ? AND stamp = ? AND idx = ?`,
						id, int64(st), int64(run.lo)+int64(k)); err != nil {
						return fmt.Errorf("store: %s: stamps: %w", what, err)
					}
				}
			}
			deleted += run.n
		}
		if _, err := t.ExecContext(ctx, `DELETE FROM block_runs WHERE history_id = ? AND lo < ?`, id, int64(newLo)); err != nil {
			return fmt.Errorf("store: %s: runs: %w", what, err)
		}
		if _, err := t.ExecContext(ctx, `UPDATE ranges SET lo = ?, below = ?, lo_ts = ? WHERE history = ?`,
			int64(newLo), below[:], int64(loTS), ledger); err != nil {
			return fmt.Errorf("store: %s: save range: %w", what, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}

// stamp is the run's k-th block's stamp, if it has one.
func (r run) stamp(k int) (uint64, bool) {
	rec := r.rec(k)
	if rec[recFlag] != flagStamp {
		return 0, false
	}
	return binary.LittleEndian.Uint64(rec[recStamp:]), true
}

// OldestOpenWindows returns, per ledger (canister id), the start (ledger
// ns) of the oldest window among its watched intents' verdicts: the
// oldest block an open intent still needs. Ledgers whose watched intents
// have no window yet are absent.
func (s *Store) OldestOpenWindows(ctx context.Context) (map[string]uint64, error) {
	var rows []struct {
		Canister string `db:"canister_id"`
		From     int64  `db:"from_ts"`
	}
	if err := s.r.SelectContext(ctx, &rows, `SELECT w.canister_id, min(json_extract(v.json, '$.window.from_ts')) AS from_ts
		FROM watch w JOIN verdicts v ON v.intent_id = w.intent_id
		WHERE json_extract(v.json, '$.window.from_ts') IS NOT NULL
		GROUP BY w.canister_id`); err != nil {
		return nil, fmt.Errorf("store: oldest open windows: %w", err)
	}
	out := make(map[string]uint64, len(rows))
	for _, r := range rows {
		if r.From >= 0 {
			out[r.Canister] = uint64(r.From)
		}
	}
	return out, nil
}
