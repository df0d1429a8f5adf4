// Package icp reads the ICP ledger's own block format: protobuf blocks
// chained by SHA-256 of their bytes, with accounts as 28-byte
// AccountIdentifiers rather than ICRC-1 (owner, subaccount) pairs, their
// translation into icrc3 blocks for matching, and the Candid replies of the
// ledger and its archives that carry them (query_encoded_blocks,
// get_encoded_blocks), read with icrc3's bounded reader. Like icrc3 it is
// pure: no transport, no clock.
package icp
