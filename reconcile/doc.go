// Package reconcile decides what happened to an intent and keeps the fleet's
// answer.
//
// The Engine drives the matcher over verified history: it reads a ledger
// through the History interface defined here (implemented by the ICRC
// family, package icrc3history, and the ICP family, package icphistory),
// keeps one verified chain per ledger (network, canister and verify mode)
// in a BlockCache, and settles each intent by the table of
// docs/design.md#statuses: found only
// on a verified match, absent only when the window has closed in certified
// time with every block of it verified, not_yet while it is open,
// unreadable on any failure. The decisions of one ledger share a certified
// tip and one walk down its chain; each is answered as soon as the pages
// verified settle it, and intents arriving meanwhile may join the walk
// (Engine.DecideJoining, Engine.JoinRunning). The walk's pages are written
// to the cache behind it, each with the range it grew, while reads take
// the pages not yet written from memory (pagewriter.go).
//
// The Service takes intents from the queue, stores them and their verdicts
// through the Store port, publishes verdicts through the Sink port with the
// stream's per-subject sequence as the guard against a second writer, and
// follows up open intents of the ledgers whose lease this instance holds,
// each ledger's rounds on their own so that a slow ledger delays only its
// own intents. The verdict stream is the fleet's record: stored verdicts
// reach it in seq order, never skipping one, and a store that holds
// another body or other verdicts than the stream for an id takes the
// stream's (service_yield.go). The ports are interfaces of this package,
// typed in the project's vocabulary (package reconciled) and implemented by
// packages store and queue, which do not import this one.
package reconcile
