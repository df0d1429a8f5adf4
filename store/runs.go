package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/jmoiron/sqlx"
)

// runBlocks is the most blocks one block_runs row holds (0006 checks it).
// A run is read whole to answer for one of its blocks (BlockAt, ByStamp),
// so it stays small — about 20 KB of Values — while a 2,000-block page
// still writes only 32 rows. A run overlapping an index i starts above
// i-runBlocks, which bounds every lookup by index to a short key range.
const runBlocks = 64

// A run's data is one fixed record per block, in index order, followed by
// the blocks' Values concatenated. A record is the block's ts (8 bytes), its
// hash (32), a flag byte (1 when it has a stamp), the stamp (8) and the end
// of its Value in the Values area (4), integers little-endian.
const (
	recTS      = 0
	recHash    = 8
	recFlag    = 40
	recStamp   = 41
	recRawEnd  = 49
	runRecord  = 53
	flagStamp  = 1
	maxRunData = math.MaxUint32
)

// encodeRun appends the data of a run of blocks with consecutive indexes.
func encodeRun(dst []byte, blocks []CachedBlock) ([]byte, error) {
	raw := 0
	for i := range blocks {
		raw += len(blocks[i].Raw)
	}
	if raw > maxRunData-len(blocks)*runRecord {
		return nil, fmt.Errorf("%w: blocks %d..%d: %d bytes of Values exceed a run", ErrInvalid,
			blocks[0].Index, blocks[len(blocks)-1].Index, raw)
	}
	base := len(dst)
	need := len(blocks)*runRecord + raw
	if cap(dst)-base < need {
		grown := make([]byte, base, base+need)
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:base+len(blocks)*runRecord]
	end := 0
	for i := range blocks {
		b := &blocks[i]
		r := dst[base+i*runRecord : base+(i+1)*runRecord]
		binary.LittleEndian.PutUint64(r[recTS:], b.TS)
		copy(r[recHash:recFlag], b.Hash[:])
		r[recFlag] = 0
		binary.LittleEndian.PutUint64(r[recStamp:], 0)
		if b.Stamp != nil {
			r[recFlag] = flagStamp
			binary.LittleEndian.PutUint64(r[recStamp:], *b.Stamp)
		}
		end += len(b.Raw)
		binary.LittleEndian.PutUint32(r[recRawEnd:], uint32(end))
	}
	for i := range blocks {
		dst = append(dst, blocks[i].Raw...)
	}
	return dst, nil
}

// run is a stored run, checked by openRun: every accessor may then index
// its data without bounds failures.
type run struct {
	lo   uint64
	n    int
	data []byte
}

type runRow struct {
	Lo   int64  `db:"lo"`
	Hi   int64  `db:"hi"`
	Data []byte `db:"data"`
}

const runCols = `lo, hi, data`

// openRun checks a stored run's encoding. A run that does not decode is an
// error, never a run with fewer blocks: a block missing from the cache's
// answer could turn "found" into "absent".
func openRun(row runRow) (run, error) {
	n := row.Hi - row.Lo + 1
	if row.Lo < 0 || n < 1 || n > runBlocks {
		return run{}, fmt.Errorf("cached run %d..%d: not a run", row.Lo, row.Hi)
	}
	r := run{lo: uint64(row.Lo), n: int(n), data: row.Data}
	recs := r.n * runRecord
	if len(r.data) < recs {
		return run{}, fmt.Errorf("cached run %d..%d: %d bytes, want at least %d", row.Lo, row.Hi, len(r.data), recs)
	}
	prev := uint32(0)
	for k := range r.n {
		rec := r.rec(k)
		end := binary.LittleEndian.Uint32(rec[recRawEnd:])
		if end < prev || rec[recFlag] > flagStamp || (rec[recFlag] == 0 && binary.LittleEndian.Uint64(rec[recStamp:]) != 0) {
			return run{}, fmt.Errorf("cached run %d..%d: record %d is corrupt", row.Lo, row.Hi, k)
		}
		prev = end
	}
	if int(prev) != len(r.data)-recs {
		return run{}, fmt.Errorf("cached run %d..%d: Values take %d bytes, records say %d", row.Lo, row.Hi, len(r.data)-recs, prev)
	}
	return r, nil
}

func (r run) rec(k int) []byte { return r.data[k*runRecord : (k+1)*runRecord] }

// hi is the run's highest index.
func (r run) hi() uint64 { return r.lo + uint64(r.n) - 1 }

// has reports whether index is in the run.
func (r run) has(index uint64) bool { return index >= r.lo && index <= r.hi() }

func (r run) ts(k int) uint64 { return binary.LittleEndian.Uint64(r.rec(k)[recTS:]) }

func (r run) hashAt(k int) []byte { return r.rec(k)[recHash:recFlag] }

// block is the run's k-th block; its Raw aliases the run's data.
func (r run) block(k int) CachedBlock {
	rec := r.rec(k)
	b := CachedBlock{Index: r.lo + uint64(k), TS: r.ts(k)}
	copy(b.Hash[:], rec[recHash:recFlag])
	if rec[recFlag] == flagStamp {
		st := binary.LittleEndian.Uint64(rec[recStamp:])
		b.Stamp = &st
	}
	start := uint32(0)
	if k > 0 {
		start = binary.LittleEndian.Uint32(r.rec(k - 1)[recRawEnd:])
	}
	end := binary.LittleEndian.Uint32(rec[recRawEnd:])
	values := r.data[r.n*runRecord:]
	b.Raw = values[start:end:end]
	return b
}

// tsBounds are the lowest and highest non-zero timestamps of blocks (0, 0
// when none has one): a block of an unknown type may carry no ts.
func tsBounds(blocks []CachedBlock) (lo, hi uint64) {
	for i := range blocks {
		if t := blocks[i].TS; t != 0 {
			if lo == 0 {
				lo = t
			}
			hi = t
		}
	}
	return lo, hi
}

// overlapping returns the cached runs of history hid holding any index of
// [lo, hi], ascending.
func overlapping(ctx context.Context, q sqlx.QueryerContext, hid int64, lo, hi uint64) ([]run, error) {
	var rows []runRow
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+runCols+` FROM block_runs
		WHERE history_id = ? AND lo > ? AND lo <= ? AND hi >= ? ORDER BY lo`,
		hid, int64(lo)-runBlocks, int64(hi), int64(lo)); err != nil {
		return nil, err
	}
	return openRuns(rows)
}

func openRuns(rows []runRow) ([]run, error) {
	out := make([]run, len(rows))
	for i := range rows {
		r, err := openRun(rows[i])
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// runAt returns the cached run of the history keyed key holding index; ok
// is false when index is not cached.
func runAt(ctx context.Context, q sqlx.QueryerContext, key string, index uint64) (r run, ok bool, err error) {
	if index > math.MaxInt64 {
		return run{}, false, nil
	}
	var rows []runRow
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+runCols+` FROM block_runs
		WHERE `+ofHistory+` AND lo > ? AND lo <= ? AND hi >= ?`,
		key, int64(index)-runBlocks, int64(index), int64(index)); err != nil {
		return run{}, false, err
	}
	if len(rows) == 0 {
		return run{}, false, nil
	}
	if len(rows) > 1 {
		return run{}, false, fmt.Errorf("block %d is in %d cached runs", index, len(rows))
	}
	r, err = openRun(rows[0])
	return r, err == nil, err
}
