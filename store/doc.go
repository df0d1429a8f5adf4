// Package store keeps the daemon's durable state in SQLite: intents, their
// verdict histories, the watch list of undecided intents, and the verified
// block cache with each ledger's verified tip. Its size is bounded: final
// intents older than a retention period are pruned (prune.go) and each
// chain's oldest cached blocks trimmed (trim.go).
//
// All writes go through one connection opened with BEGIN IMMEDIATE
// transactions, so every read-check-write sequence (verdict seq rules,
// first-writer-wins intents, block immutability) runs serialised and cannot
// be interleaved by another writer. Reads use a separate bounded pool of
// query-only connections that see WAL snapshots and never block the writer.
//
// The store tracks the outcome of its real writes per path (WriteFailures):
// a path fails from its first write the storage refused (disk full, I/O
// error, …) until a later commit on it changes rows, and Writable, what
// readiness asks, fails meanwhile whatever its own one-row probe finds.
//
// It speaks the project's vocabulary (package reconciled) natively: its
// records are reconciled.IntentRecord and reconciled.Watch, its errors of
// not found, history and invalid record are the vocabulary's of that kind,
// and *Store is the service's Store and the engine's BlockCache ports as it
// is, without importing the engine.
package store
