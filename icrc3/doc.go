// Package icrc3 is the ICRC-3 block model shared by every ledger family:
// blocks, accounts and generic values with their representation-independent
// hashing, block parsing, hash-chain verification, and the hand-written,
// bounded Candid decoders of ICRC-3 and legacy block pages, whose reader
// CandidReader exports for a family's own replies (package icp reads the
// ICP ledger's with it). Tip, Features and the error kinds are the data
// every family's history returns. It is pure: it imports the standard
// library and agent-go's principal only, so matcher compiles without the IC
// transport (docs/design.md#layout). Reading a ledger is icagent's and the
// families' work.
package icrc3
