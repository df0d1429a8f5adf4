-- An intent's search keys were written into two B-trees: intent_keys
-- itself and intent_keys_by_intent. The second served only the support
-- console's "why did this intent match" query, which also names the
-- terms it looks for, so the primary key (term, intent_id, role) answers
-- it; and ON DELETE CASCADE, though no intent is ever deleted. Writing
-- the keys was a third of the store's CPU per intent in a burst, and this
-- index about half of that.
DROP INDEX intent_keys_by_intent;
