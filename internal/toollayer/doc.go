// Package toollayer is a tool layer for the test replica (ledgertest): it
// pays through agent-go as ed25519 identities, loses the replies, and asks
// the daemon over NATS what happened — what a real tool layer does after an
// unknown outcome. The demo (cmd/reconciled-dev) and the end-to-end tests of
// cmd/reconciled use it; it links the test replica, so the production
// binary must not (internal/deptest holds that fence).
package toollayer
