// Package family chooses, per ledger, which ledger family reads its
// history: the ICP ledger's (icphistory) or ICRC-3's (icrc3history). The
// families are siblings that know nothing of each other; this package is
// the wiring's choice between them, made by the ledger's endpoints and
// kept only on positive evidence. docs/ledger-family.md says how a third
// family joins the choice.
package family
