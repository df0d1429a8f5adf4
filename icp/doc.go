// Package icp reads the ICP ledger's own block format: protobuf blocks
// chained by SHA-256 of their bytes, with accounts as 28-byte
// AccountIdentifiers rather than ICRC-1 (owner, subaccount) pairs, and
// their translation into icrc3 blocks for matching. Like icrc3 it is pure:
// no transport, no clock.
package icp
