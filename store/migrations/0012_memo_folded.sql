-- A memo's text as a customer types it may differ in case from the memo
-- sent (ORDER-7, order-7): every memo is also indexed with its ASCII
-- letters lower-cased, under mf:. The bytes beyond ASCII stay as they are,
-- as lower() without ICU leaves them, and as the Go side folds them.
INSERT OR IGNORE INTO intent_keys (term, intent_id, role)
    SELECT 'mf:' || lower(hex(lower(CAST(unhex(substr(term, 3)) AS TEXT)))), intent_id, role
    FROM intent_keys WHERE term >= 'm:' AND term < 'm;';
