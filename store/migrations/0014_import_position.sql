-- What this store has imported from the fleet's verdict stream, so that a
-- store wiped, replaced or restored from an older copy is told from the one
-- its verdict follower fed: an identity made with the store (the follower's
-- consumer names the store it feeds), the stream its position is of (the
-- stream's creation time), and the stream sequence through which it has
-- imported every verdict. A store migrated from before holds no position
-- (stream_seq NULL) until its follower's is taken once.
CREATE TABLE import_position (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    store_id   TEXT    NOT NULL,
    stream     TEXT    NOT NULL DEFAULT '',
    stream_seq INTEGER CHECK (stream_seq >= 0)
);
INSERT INTO import_position (id, store_id) VALUES (1, lower(hex(randomblob(16))));
