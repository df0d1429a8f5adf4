// Package deptest holds the import fences: a test that fails when a
// package's dependencies (non-test, transitive, as `go list` reports them)
// reach something its layer must not — a pure model importing NATS or
// SQLite, the store importing the queue, the production binary linking
// the test replica or package testing, the vocabulary (the module root)
// compiling more than leaves, or the queue, the store or the support
// console compiling the engine. The package has no code of its own.
package deptest
