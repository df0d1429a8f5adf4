-- The transactional outbox: verdicts decided by this instance that the
-- verdict stream is not yet known to hold. A row is written by the same
-- transaction that appends its verdict and deleted once the stream holds
-- that seq (or a later one), so a crash between store and publish leaves a
-- row that a restart finds. Verdicts imported from the stream never get one.
CREATE TABLE outbox (
    intent_id TEXT NOT NULL REFERENCES intents (intent_id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL CHECK (seq >= 1),
    PRIMARY KEY (intent_id, seq)
) STRICT, WITHOUT ROWID;

-- Before this table existed, a restart re-published the latest verdict of
-- every watched intent. Seeding their latest seqs keeps that guarantee for a
-- database written by that version; re-publishing checks the stream first,
-- so a verdict that is already there costs one lookup.
INSERT INTO outbox (intent_id, seq)
    SELECT i.intent_id, i.latest_seq FROM intents i JOIN watch w ON w.intent_id = i.intent_id
    WHERE i.latest_seq > 0;
