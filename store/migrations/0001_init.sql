-- Every u64 that the daemon stores in an INTEGER column (block indexes,
-- ledger timestamps, seq) is checked to be < 2^63 before it is written, so
-- SQLite's signed ordering is the numeric ordering. Wall-clock times are
-- Unix nanoseconds.

CREATE TABLE intents (
    intent_id      TEXT PRIMARY KEY,
    -- canister_id, caller, method, body and canonical_hash are NULL while
    -- the intent is known only from verdicts another sidecar decided.
    canister_id    TEXT,
    caller         TEXT,
    method         TEXT,
    body           TEXT,
    canonical_hash BLOB CHECK (canonical_hash IS NULL OR length(canonical_hash) = 32),
    first_seen     INTEGER NOT NULL,
    -- Cache of the latest verdict, kept by the same transaction that appends
    -- it, so listings need no join.
    status         TEXT,
    final          INTEGER NOT NULL DEFAULT 0 CHECK (final IN (0, 1)),
    latest_seq     INTEGER NOT NULL DEFAULT 0 CHECK (latest_seq >= 0),
    updated_at     INTEGER NOT NULL,
    CHECK ((body IS NULL) = (canonical_hash IS NULL))
) STRICT;

CREATE INDEX intents_by_first_seen ON intents (first_seen, intent_id);
CREATE INDEX intents_by_canister ON intents (canister_id, first_seen, intent_id);
CREATE INDEX intents_by_caller ON intents (caller, first_seen, intent_id);
CREATE INDEX intents_by_status ON intents (status, first_seen, intent_id);

CREATE TABLE verdicts (
    intent_id  TEXT NOT NULL REFERENCES intents (intent_id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    status     TEXT NOT NULL,
    final      INTEGER NOT NULL CHECK (final IN (0, 1)),
    json       TEXT NOT NULL,
    decided_at INTEGER NOT NULL,
    PRIMARY KEY (intent_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE watch (
    intent_id    TEXT PRIMARY KEY REFERENCES intents (intent_id) ON DELETE CASCADE,
    canister_id  TEXT NOT NULL,
    next_check   INTEGER NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    window_to_ts INTEGER NOT NULL DEFAULT 0 CHECK (window_to_ts >= 0),
    last_status  TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX watch_due ON watch (next_check, intent_id);

CREATE TABLE blocks (
    canister TEXT NOT NULL,
    idx      INTEGER NOT NULL CHECK (idx >= 0),
    ts       INTEGER NOT NULL CHECK (ts >= 0),
    hash     BLOB NOT NULL CHECK (length(hash) = 32),
    raw      BLOB NOT NULL,
    -- tx.ts (the caller's created_at_time) when the block has one. Caller
    -- chosen, so it may exceed 2^63: stored as the int64 bit pattern, which
    -- is exact for the only query on it, equality.
    stamp    INTEGER,
    PRIMARY KEY (canister, idx)
) STRICT;

CREATE INDEX blocks_by_stamp ON blocks (canister, stamp, idx) WHERE stamp IS NOT NULL;
-- Timestamps never decrease along a chain, so (ts, idx) order is index
-- order and the window's first and last blocks are one index probe each.
CREATE INDEX blocks_by_ts ON blocks (canister, ts, idx);

CREATE TABLE tips (
    canister       TEXT PRIMARY KEY,
    idx            INTEGER NOT NULL CHECK (idx >= 0),
    hash           BLOB NOT NULL CHECK (length(hash) = 32),
    certified_time INTEGER NOT NULL CHECK (certified_time >= 0),
    updated_at     INTEGER NOT NULL
) STRICT;

-- The engine's verified range per ledger (reconcile.VerifiedRange). Its
-- numbers are only read back, never compared in SQL, so they are stored as
-- int64 bit patterns: an empty range at index 0 has hi = 2^64-1.
CREATE TABLE ranges (
    canister TEXT PRIMARY KEY,
    lo       INTEGER NOT NULL,
    hi       INTEGER NOT NULL,
    hi_hash  BLOB NOT NULL CHECK (length(hi_hash) = 32),
    below    BLOB CHECK (below IS NULL OR length(below) = 32),
    lo_ts    INTEGER NOT NULL,
    hi_ts    INTEGER NOT NULL,
    tip_time INTEGER NOT NULL
) STRICT;

-- One row rewritten by Writable: a readiness probe that proves a commit
-- reaches the disk, not merely that the file opens.
CREATE TABLE probe (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at INTEGER NOT NULL
) STRICT;
