// Package matcher reads reconciliation intents and decides, block by block,
// whether a ledger block records the intended call (docs/design.md#intent,
// docs/design.md#window and docs/design.md#matching). It is
// pure: no I/O and no clock, so every verdict rule is testable on its own.
//
// Decisions a reader of the contract may look for:
//
//   - Matching compares fields only. The caller restricts blocks to the
//     intent's Window and to the intent's canister; a block outside the
//     window cannot be the original on a conforming ledger.
//   - A near miss is never a match, and neither is a block of unknown kind.
//   - Fee: an explicit intent fee must equal the block's effective fee (tx.fee,
//     else the block-level fee); a block with no fee at all agrees only with
//     an explicit 0. An intent without a fee does not compare it.
//   - Approve amounts above the token maximum match a block that recorded the
//     maximum (u64::MAX or 2^256−1): the ledger clamps, and that block is the
//     record of the call.
//   - Spec-style 2xfer blocks without a spender are read as spender = from;
//     DFINITY ledgers always record the spender.
//   - Mint and burn are recognised only when LedgerRules.MintingAccount is
//     set; nil means the ledger has no minting account.
//   - With arg_hex the sent bytes are known, and a match must be exact as
//     the ledger deduplicates: every account spelled as sent (an explicit
//     all-zero subaccount is not an absent one) and tx.fee present exactly
//     when the call set a fee. A block equal only up to normalisation is
//     then another call's: a near miss differing in subaccount_form or
//     fee_form (Result.Normalized). Without arg_hex matching is normalised.
//   - ingress_expiry 0 is refused on parsing, one before S−D by CheckRules
//     (it needs the ledger's drift); Window never narrows below S−D.
//   - Canonical covers every field, `after` and `arg_hex` included; Hash
//     covers all but `after`.
package matcher
