// Package icphistory is the ICP ledger's history family behind the
// engine's History: the certified tip from query_encoded_blocks' data
// certificate (certified_data is the raw hash of the last block), and the
// protobuf blocks below it from the ledger and its archives'
// get_encoded_blocks, chained by parent_hash. Queries and certificate
// checks are icagent's. It knows nothing of the ICRC family: which family
// reads a ledger is chosen above both, by package family.
package icphistory
