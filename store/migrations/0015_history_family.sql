-- Every cached block of one history is of one ledger family, and the
-- family decides how a cached Value is rebuilt into a block and checked
-- against its verified hash: an ICRC-3 block by its Value's hash, an ICP
-- ledger block by the protobuf bytes its Value carries (store/icpblocks.go).
-- The store used to tell the two apart by looking for the bytes of the ICP
-- Value's key anywhere in a Value, which an ICRC-3 block's own fields (a
-- memo, a field of the ledger's) can hold too. The family is now recorded
-- per history: set by the first write of its blocks, cleared when its chain
-- is discarded.
ALTER TABLE histories ADD COLUMN family TEXT CHECK (family IN ('icrc3', 'icp'));

-- Back-fill, sniffing the bytes once, here: a cached history is the ICP
-- ledger's when the first Value of its lowest run begins as every ICP
-- block's Value does (store/icpblocks.go, icp.ToICRC3): format 1, a Map of
-- 3 or 4 fields whose first is the key "icp_pb" (6 bytes) holding a Blob.
-- No ICRC-3 block written before this migration begins so: the store
-- refused to cache an ICRC-3 Value holding "icp_pb" at its root unless the
-- blob was an ICP block hashing to the block's verified hash. A history
-- holding no runs keeps no family: its next write records one.
UPDATE histories SET family = CASE
        WHEN substr(v.vals, 1, 2) = X'0106' AND substr(v.vals, 3, 1) IN (X'03', X'04')
            AND substr(v.vals, 4, 8) = X'066963705f706201' THEN 'icp'
        ELSE 'icrc3' END
    FROM (SELECT history_id, vals FROM block_runs r
          WHERE r.lo = (SELECT min(lo) FROM block_runs WHERE history_id = r.history_id)) AS v
    WHERE v.history_id = histories.id;
