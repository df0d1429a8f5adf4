// Package icrc1 holds the ICRC-1 and ICRC-2 Candid call arguments and
// results (icrc1_transfer, icrc2_approve, icrc2_transfer_from and their
// errors) as agent-go marshals them, and the ICRC-1 reads both ledger
// families share (the minting account, settled only by the certified
// state, and screened Candid replies). Payers, the test ledger and tests
// share the types so that what is sent, what a ledger records and what is
// matched cannot drift apart. The block model they refer to is icrc3's;
// the transport is icagent's.
package icrc1
