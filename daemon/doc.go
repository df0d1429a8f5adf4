// Package daemon is one reconciled instance, importable: New wires the
// SQLite store, the NATS connection and streams, the engine and the
// service, the ledger client pool, the verdict follower that imports the
// fleet's verdicts into the local store, the per-ledger follow-up leases,
// and the HTTP surface (probes, /metrics, support API); Ready reports
// readiness, naming every failing check (NATS, JetStream, the embedded
// server's JetStream store, the store's real writes), and Shutdown drains
// it. The daemon's own embedded NATS server is supervised: a JetStream
// store that failed is reopened by a restart once its directory takes
// writes. A daemon that cannot go on (its NATS connection closed for good,
// or a restart of its embedded server failed) gives up (Failed), for its
// process to exit.
//
// `reconciled serve` and `reconciled-dev demo` only turn flags into a Config;
// benchmarks and end-to-end tests run the very same wiring (see
// daemon/daemontest).
//
// Open intents belong to the fleet, not to the instance that decided
// them: every store watches every open intent it learns from the verdict
// stream, and the instance holding a ledger's lease (a key in the
// RECONCILE_LEASES bucket, renewed while held, released on Shutdown,
// expiring after Config.LeaseTTL when its holder vanishes) follows them
// up. Verdicts are appended to the stream with the expected last sequence
// of their subject, so two would-be writers never publish the same seq
// twice or contradicting seqs.
package daemon
