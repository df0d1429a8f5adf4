-- When this instance last checked a watched intent against the ledger. A
-- not_yet intent checked again without news gets no new verdict, so the
-- verdicts alone cannot say that the daemon is still checking. NULL: not
-- checked since this column exists (its latest verdict is the last check
-- known).
ALTER TABLE watch ADD COLUMN checked_at INTEGER;
