-- Search keys for the support console: what a customer knows about a
-- payment, so that finding it is an index probe rather than a scan.
--
-- term is "<kind>:<value>", every value in lower case:
--   p:<principal>        an account owner (any of its accounts)
--   a:<ICRC-1 text>      one account
--   x:<64 hex>           the ICP ledger's account identifier of that account
--   u:<ledger>:<units>   the amount, per ledger, in raw units
--   m:<hex>              the memo
--   b:<index>            a block the verdicts name (role block or near_miss)
-- role says why the intent carries the term (caller, from, to, spender,
-- canister, amount, memo, block, near_miss). Body terms are written with the
-- intent; block terms with its verdicts.
CREATE TABLE intent_keys (
    term      TEXT NOT NULL,
    intent_id TEXT NOT NULL REFERENCES intents (intent_id) ON DELETE CASCADE,
    role      TEXT NOT NULL,
    PRIMARY KEY (term, intent_id, role)
) STRICT, WITHOUT ROWID;

CREATE INDEX intent_keys_by_intent ON intent_keys (intent_id);

-- Per-intent times that listings filter and sort on. stamp is the intent's
-- created_at_time (saturated to int64); decided_at the latest verdict's.
-- indexed = 1 once the body's terms are written: rows of databases written
-- before this table are filled when the store opens (their bodies need
-- the intent parser, which SQL does not have).
CREATE TABLE intent_facts (
    intent_id  TEXT PRIMARY KEY REFERENCES intents (intent_id) ON DELETE CASCADE,
    stamp      INTEGER,
    decided_at INTEGER,
    indexed    INTEGER NOT NULL DEFAULT 0 CHECK (indexed IN (0, 1))
) STRICT;

CREATE INDEX intent_facts_by_stamp ON intent_facts (stamp, intent_id) WHERE stamp IS NOT NULL;
CREATE INDEX intent_facts_by_decided ON intent_facts (decided_at, intent_id) WHERE decided_at IS NOT NULL;

INSERT INTO intent_facts (intent_id, decided_at)
    SELECT i.intent_id, v.decided_at FROM intents i
    LEFT JOIN verdicts v ON v.intent_id = i.intent_id AND v.seq = i.latest_seq;

INSERT OR IGNORE INTO intent_keys (term, intent_id, role)
    SELECT 'b:' || json_extract(json, '$.block.index'), intent_id, 'block' FROM verdicts
    WHERE json_extract(json, '$.block.index') IS NOT NULL;

INSERT OR IGNORE INTO intent_keys (term, intent_id, role)
    SELECT 'b:' || json_extract(n.value, '$.index'), v.intent_id, 'near_miss'
    FROM verdicts v, json_each(v.json, '$.near_misses') n
    WHERE json_extract(n.value, '$.index') IS NOT NULL;
