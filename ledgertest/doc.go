// Package ledgertest is an in-process Internet Computer replica that hosts
// ICRC-1/2/3 ledgers, an ICP-style ledger and their archives, in the style
// of net/http/httptest. It speaks the real IC HTTP interface (CBOR
// envelopes, node-signed query replies, BLS-certified state) so an
// unmodified agent-go talks to it exactly as it would to mainnet. Tests,
// the demo and test ledger of cmd/reconciled-dev and the benchmark use it.
package ledgertest
