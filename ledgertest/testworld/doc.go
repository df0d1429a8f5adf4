// Package testworld is the set-up the ledger tests share: a test replica
// (ledgertest) with one ICRC or ICP-style ledger, an agent for it and, when
// asked, the verified history client (icrc3history) reading that ledger,
// all stopped when the test ends. It is a package of its own so that
// ledgertest, which the development and benchmark commands link, carries
// neither package testing nor the client it is the replica for.
package testworld
