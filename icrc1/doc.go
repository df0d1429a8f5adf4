// Package icrc1 holds the ICRC-1 and ICRC-2 Candid call arguments and
// results (icrc1_transfer, icrc2_approve, icrc2_transfer_from and their
// errors) as agent-go marshals them. Payers, the test ledger and tests
// share them so that what is sent, what a ledger records and what is
// matched cannot drift apart. The block model they refer to is icrc3's.
package icrc1
