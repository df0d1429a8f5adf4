// Package icphistory is the ICP ledger's history family behind the
// engine's History: the certified tip from query_encoded_blocks' data
// certificate (certified_data is the raw hash of the last block), and the
// protobuf blocks below it from the ledger and its archives'
// get_encoded_blocks, chained by parent_hash. Queries and certificate
// checks are icagent's, through an icrc3history.Client (the ICP ledger
// also serves ICRC-1's minting account); Choose picks the family of a
// ledger by its endpoints, and keeps the choice only on positive evidence
// (a reply that decodes, a certified tip), never on a reject.
package icphistory
