-- Retention (store/prune.go) deletes final intents with every row that
-- belongs to them. intent_keys is keyed by term, so finding an intent's
-- keys, and the foreign key check that deleting its intents row makes,
-- would each scan the whole table without an index by intent. 0007
-- dropped this index when no intent was ever deleted; retention needs it
-- back, and it keeps the store bounded, which is worth its write cost.
CREATE INDEX intent_keys_by_intent ON intent_keys (intent_id);
