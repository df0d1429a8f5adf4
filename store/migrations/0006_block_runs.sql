-- A cached block was a row of its own, written into three B-trees (the
-- table, blocks_by_stamp and blocks_by_ts): about 6.5 µs of CPU a block,
-- the largest cost of a cold scan and of a burst's walk. Verified blocks
-- are now stored in runs of consecutive indexes, one row per run holding
-- every block's timestamp, hash, stamp and Value (store/runs.go), so a page
-- of 2,000 blocks writes about 32 rows. Only the stamp index, which
-- ByStamp must search across a whole window, keeps a row per stamped block.
--
-- The cached rows are dropped, with the tips and ranges that describe
-- them: re-encoding them needs the run format, which SQL cannot write. It
-- is a cache, not a record: each chain's next scan reads its blocks again.
-- History ids are kept (they are never reused, see 0005).
DROP TABLE blocks;
DELETE FROM tips;
DELETE FROM ranges;

-- One run: blocks lo..hi (at most 64, store/runs.go) of one history:
-- meta holds each block's ts, hash and stamp, vals their Values. ts_lo and ts_hi are the lowest and highest non-zero
-- timestamps of the run (0 when it has none); timestamps never decrease
-- along a verified chain, so runs in index order are in ts_hi order.
CREATE TABLE block_runs (
    history_id INTEGER NOT NULL,
    lo         INTEGER NOT NULL CHECK (lo >= 0),
    hi         INTEGER NOT NULL CHECK (hi >= lo AND hi - lo < 64),
    ts_lo      INTEGER NOT NULL CHECK (ts_lo >= 0),
    ts_hi      INTEGER NOT NULL CHECK (ts_hi >= ts_lo),
    meta       BLOB NOT NULL,
    vals       BLOB NOT NULL,
    PRIMARY KEY (history_id, lo)
) STRICT;

-- WindowBlocks: the first run reaching a window's start, and the first
-- run past its end.
CREATE INDEX block_runs_by_ts ON block_runs (history_id, ts_hi, lo);

-- ByStamp's lookup: every cached block carrying a tx.ts (the caller's
-- created_at_time), as the int64 bit pattern (exact for equality).
CREATE TABLE block_stamps (
    history_id INTEGER NOT NULL,
    stamp      INTEGER NOT NULL,
    idx        INTEGER NOT NULL CHECK (idx >= 0),
    PRIMARY KEY (history_id, stamp, idx)
) STRICT, WITHOUT ROWID;
