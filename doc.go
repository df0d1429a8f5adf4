// Package reconciled is the project's vocabulary: the types every other
// package speaks natively, so that none keeps a twin of another's and no
// adapter translates between them.
//
// It holds the wire types of the verdict stream (Verdict and its parts,
// Status, U64; their JSON is the contract of docs/protocol.md#verdict), the
// records the service, the store and the support API exchange
// (IntentRecord, Watch, PutResult, IntentHeader, StreamedVerdict), the
// intake's Outcome, the errors a store or stream wraps so that callers can
// tell what happened (ErrNotFound, ErrHistory, ErrInvalidRecord), the one
// intent-id rule (ValidIntentID), the one definition of two verdicts
// deciding the same (SameDecision), and the ledger rules (Ledger).
//
// It imports nothing of the project but leaf packages, so that the queue,
// the store and the support API can speak it without compiling the engine,
// the matcher or the ledger codecs. Behaviour lives elsewhere: the engine
// (package reconcile) decides, the matcher parses and matches, the store
// and the queue persist and carry.
package reconciled
