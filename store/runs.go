package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// runBlocks is the most blocks one block_runs row holds (0006 checks it).
// A run is read whole to answer for one of its blocks (BlockAt, ByStamp),
// so it stays small — about 20 KB of Values — while a 2,000-block page
// still writes only 32 rows. A run overlapping an index i starts above
// i-runBlocks, which bounds every lookup by index to a short key range.
const runBlocks = 64

// A run is stored in two columns. meta holds one fixed record per block,
// in index order: the block's ts (8 bytes), its hash (32), a flag byte (1
// when it has a stamp), the stamp (8) and the end of its Value in vals (4),
// integers little-endian. vals holds the blocks' Values concatenated. Reads
// that need no Value (BlockAt, WindowBlocks, the immutability check) read
// meta alone, about 3 KB, and never the Values' overflow pages.
const (
	recTS      = 0
	recHash    = 8
	recFlag    = 40
	recStamp   = 41
	recRawEnd  = 49
	runRecord  = 53
	flagStamp  = 1
	maxRunVals = math.MaxUint32
)

// encodeRun appends the meta and vals of a run of blocks with consecutive
// indexes.
func encodeRun(meta, vals []byte, blocks []CachedBlock) ([]byte, []byte, error) {
	base := len(meta)
	meta = slices.Grow(meta, len(blocks)*runRecord)[:base+len(blocks)*runRecord]
	start := len(vals)
	for i := range blocks {
		b := &blocks[i]
		vals = append(vals, b.Raw...)
		if len(vals)-start > maxRunVals {
			return nil, nil, fmt.Errorf("%w: blocks %d..%d: Values exceed a run", ErrInvalid,
				blocks[0].Index, blocks[len(blocks)-1].Index)
		}
		r := meta[base+i*runRecord : base+(i+1)*runRecord]
		binary.LittleEndian.PutUint64(r[recTS:], b.TS)
		copy(r[recHash:recFlag], b.Hash[:])
		r[recFlag] = 0
		binary.LittleEndian.PutUint64(r[recStamp:], 0)
		if b.Stamp != nil {
			r[recFlag] = flagStamp
			binary.LittleEndian.PutUint64(r[recStamp:], *b.Stamp)
		}
		binary.LittleEndian.PutUint32(r[recRawEnd:], uint32(len(vals)-start))
	}
	return meta, vals, nil
}

// run is a stored run, checked by openRun: every accessor may then index
// its meta, and block its vals, without bounds failures.
type run struct {
	lo   uint64
	n    int
	meta []byte
	vals []byte // nil when read without the Values
}

type runRow struct {
	Lo   int64  `db:"lo"`
	Hi   int64  `db:"hi"`
	Meta []byte `db:"meta"`
	Vals []byte `db:"vals"`
}

// runMeta selects a run without its Values, runCols with them.
const (
	runMeta = `lo, hi, meta, NULL AS vals`
	runCols = `lo, hi, meta, vals`
)

// openRun checks a stored run's encoding. A run that does not decode is an
// error, never a run with fewer blocks: a block missing from the cache's
// answer could turn "found" into "absent". withVals says whether the row
// was read with its Values.
func openRun(row runRow, withVals bool) (run, error) {
	n := row.Hi - row.Lo + 1
	if row.Lo < 0 || n < 1 || n > runBlocks {
		return run{}, fmt.Errorf("cached run %d..%d: not a run", row.Lo, row.Hi)
	}
	r := run{lo: uint64(row.Lo), n: int(n), meta: row.Meta, vals: row.Vals}
	if len(r.meta) != r.n*runRecord {
		return run{}, fmt.Errorf("cached run %d..%d: %d bytes of records, want %d", row.Lo, row.Hi, len(r.meta), r.n*runRecord)
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
	if withVals && int(prev) != len(r.vals) {
		return run{}, fmt.Errorf("cached run %d..%d: Values take %d bytes, records say %d", row.Lo, row.Hi, len(r.vals), prev)
	}
	return r, nil
}

func (r run) rec(k int) []byte { return r.meta[k*runRecord : (k+1)*runRecord] }

// hi is the run's highest index.
func (r run) hi() uint64 { return r.lo + uint64(r.n) - 1 }

// has reports whether index is in the run.
func (r run) has(index uint64) bool { return index >= r.lo && index <= r.hi() }

func (r run) ts(k int) uint64 { return binary.LittleEndian.Uint64(r.rec(k)[recTS:]) }

func (r run) hashAt(k int) []byte { return r.rec(k)[recHash:recFlag] }

// block is the run's k-th block, from a run read with its Values; its Raw
// aliases them.
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
	b.Raw = r.vals[start:end:end]
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

// selecter runs a query into a slice: the read pool and a write
// transaction, both with cached statements.
type selecter interface {
	SelectContext(ctx context.Context, dst any, q string, args ...any) error
}

// overRange selects the runs holding any index of [lo, hi], with the
// arguments overArgs gives: a run holding lo starts above lo-runBlocks, so
// the key range read stays short.
const overRange = `lo > ? AND lo <= ? AND hi >= ?`

func overArgs(lo, hi uint64) []any { return []any{int64(lo) - runBlocks, int64(hi), int64(lo)} }

// cachedRuns returns the cached runs of the history keyed key holding any
// index of [lo, hi] (both below 2^63), ascending, with their Values when
// withVals.
func cachedRuns(ctx context.Context, q selecter, key string, lo, hi uint64, withVals bool) ([]run, error) {
	cols := runMeta
	if withVals {
		cols = runCols
	}
	var rows []runRow
	if err := q.SelectContext(ctx, &rows, `SELECT `+cols+` FROM block_runs WHERE `+ofHistory+` AND `+overRange+` ORDER BY lo`,
		append([]any{key}, overArgs(lo, hi)...)...); err != nil {
		return nil, err
	}
	return openRuns(rows, withVals)
}

func openRuns(rows []runRow, withVals bool) ([]run, error) {
	out := make([]run, len(rows))
	for i := range rows {
		r, err := openRun(rows[i], withVals)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// runAt returns the cached run of the history keyed key holding index,
// without its Values; ok is false when index is not cached.
func runAt(ctx context.Context, q selecter, key string, index uint64) (r run, ok bool, err error) {
	if index > math.MaxInt64 {
		return run{}, false, nil
	}
	runs, err := cachedRuns(ctx, q, key, index, index, false)
	if err != nil || len(runs) == 0 {
		return run{}, false, err
	}
	if len(runs) > 1 {
		return run{}, false, fmt.Errorf("block %d is in %d cached runs", index, len(runs))
	}
	return runs[0], true, nil
}
