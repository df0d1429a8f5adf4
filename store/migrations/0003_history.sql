-- The verified chain is keyed by its history: the IC network (a hash of
-- its root key), the canister and the verify mode, written
-- "<network>/<canister>/<mode>" (reconcile.HistoryKey). One canister id on
-- two networks, a local replica reset or a reinstall are different chains;
-- a tip that contradicts the cached one discards it (docs/design.md#verified-history).
--
-- Rows cached before this version name the canister only and cannot be
-- attributed to a network: they are dropped, and the chains are rebuilt
-- from the next certified tips (a cache, not a record: costs reads only).
DROP TABLE blocks;
DROP TABLE tips;
DROP TABLE ranges;

CREATE TABLE blocks (
    history  TEXT NOT NULL,
    idx      INTEGER NOT NULL CHECK (idx >= 0),
    ts       INTEGER NOT NULL CHECK (ts >= 0),
    hash     BLOB NOT NULL CHECK (length(hash) = 32),
    raw      BLOB NOT NULL,
    -- tx.ts (the caller's created_at_time) when the block has one, as the
    -- int64 bit pattern (exact for the only query on it, equality).
    stamp    INTEGER,
    PRIMARY KEY (history, idx)
) STRICT;

CREATE INDEX blocks_by_stamp ON blocks (history, stamp, idx) WHERE stamp IS NOT NULL;
CREATE INDEX blocks_by_ts ON blocks (history, ts, idx);

CREATE TABLE tips (
    history        TEXT PRIMARY KEY,
    idx            INTEGER NOT NULL CHECK (idx >= 0),
    hash           BLOB NOT NULL CHECK (length(hash) = 32),
    certified_time INTEGER NOT NULL CHECK (certified_time >= 0),
    updated_at     INTEGER NOT NULL
) STRICT;

-- Stored as int64 bit patterns (see 0001): an empty range at index 0 has
-- hi = 2^64-1.
CREATE TABLE ranges (
    history  TEXT PRIMARY KEY,
    lo       INTEGER NOT NULL,
    hi       INTEGER NOT NULL,
    hi_hash  BLOB NOT NULL CHECK (length(hi_hash) = 32),
    below    BLOB CHECK (below IS NULL OR length(below) = 32),
    lo_ts    INTEGER NOT NULL,
    hi_ts    INTEGER NOT NULL,
    tip_time INTEGER NOT NULL
) STRICT;

-- History changes seen, for support staff: when a certified tip
-- contradicted a cached chain and the chain was discarded.
CREATE TABLE history_changes (
    history       TEXT NOT NULL,
    detected_at   INTEGER NOT NULL,
    reason        TEXT NOT NULL,
    old_tip_index INTEGER NOT NULL,
    old_tip_hash  BLOB NOT NULL,
    new_tip_index INTEGER NOT NULL,
    new_tip_hash  BLOB NOT NULL
) STRICT;
