-- Caching verified blocks was the cold scan's largest CPU cost, and most of
-- it went into B-trees that each repeated the history's text key
-- ("<network>/<canister>/<mode>", about 50 bytes): the rowid table, the
-- primary key's index, blocks_by_stamp and blocks_by_ts. Blocks are now
-- keyed by a small integer per history, in a table stored in its primary
-- key's order (WITHOUT ROWID), so a cached block writes three B-trees whose
-- keys are a few bytes, and a page of blocks is read in one key range.
--
-- A history's id is never reused or removed (Discard deletes the chain's
-- blocks, not its id), so an id read once names the same history for the
-- life of the file. tips, ranges and history_changes keep the text key:
-- they hold one row per history.
CREATE TABLE histories (
    id  INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE
) STRICT;

-- No REFERENCES histories (id): with foreign keys enforced, every inserted
-- block would probe histories once more, and the store writes history_id
-- only as read from that table in the same transaction.
CREATE TABLE blocks_by_history (
    history_id INTEGER NOT NULL,
    idx        INTEGER NOT NULL CHECK (idx >= 0),
    ts         INTEGER NOT NULL CHECK (ts >= 0),
    hash       BLOB NOT NULL CHECK (length(hash) = 32),
    raw        BLOB NOT NULL,
    -- tx.ts (the caller's created_at_time) when the block has one, as the
    -- int64 bit pattern (exact for the only query on it, equality).
    stamp      INTEGER,
    PRIMARY KEY (history_id, idx)
) STRICT, WITHOUT ROWID;

-- The cached rows are copied, not dropped: they are verified history under
-- the same keys, so the tips and ranges that describe them stay true, and
-- dropping them would turn every ledger's next scan into a cold one.
INSERT INTO histories (key) SELECT DISTINCT history FROM blocks ORDER BY history;
INSERT INTO blocks_by_history (history_id, idx, ts, hash, raw, stamp)
    SELECT h.id, b.idx, b.ts, b.hash, b.raw, b.stamp
    FROM blocks b JOIN histories h ON h.key = b.history
    ORDER BY h.id, b.idx;

DROP TABLE blocks;
ALTER TABLE blocks_by_history RENAME TO blocks;

-- ByStamp's lookup.
CREATE INDEX blocks_by_stamp ON blocks (history_id, stamp, idx) WHERE stamp IS NOT NULL;
-- WindowBlocks: timestamps never decrease along a chain, so (ts, idx)
-- order is index order and the window's first and last blocks are one
-- index probe each.
CREATE INDEX blocks_by_ts ON blocks (history_id, ts, idx);
