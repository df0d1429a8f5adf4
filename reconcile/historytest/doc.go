// Package historytest is the conformance suite of reconcile.History: the
// contract the engine relies on when it reads a ledger's blocks, written as
// checks that any family's implementation (icrc3history.Client,
// icphistory.History, family.History, the next family) is run against,
// over a test replica's ledger it can change (see docs/ledger-family.md).
package historytest
