package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/reconciled/reconciled/matcher"
)

// The service's ports: small interfaces implemented by the store and the
// queue, which import this package for its types only.

// Errors the ports wrap so the service can tell what happened without
// knowing the implementations.
var (
	// ErrNotFound: no such intent or verdict.
	ErrNotFound = errors.New("reconcile: not found")
	// ErrHistory: a verdict contradicts the stored or streamed history of
	// its intent (a seq gap, another verdict at that seq, a verdict after a
	// final one). Retrying the same verdict cannot succeed.
	ErrHistory = errors.New("reconcile: verdict contradicts the intent's history")
	// ErrInvalidRecord: the store refuses the record itself (a malformed
	// id, a value it cannot hold); retrying cannot succeed.
	ErrInvalidRecord = errors.New("reconcile: record refused by the store")
)

// IntentRecord is an intent as the service stores it.
type IntentRecord struct {
	ID, Canister, Caller, Method string
	// Body is the canonical JSON of a valid intent, or the body as received
	// for an invalid one.
	Body []byte
	// Hash identifies the content: matcher.Intent.Hash for a valid intent,
	// SHA-256 of Body for an invalid one.
	Hash [32]byte
	// Intent is what Body parses to, for a valid intent met here (nil
	// otherwise): a store reads what it indexes from it instead of parsing
	// Body once more.
	Intent *matcher.Intent
}

// PutResult says what Store.PutIntent did.
type PutResult int

const (
	PutCreated  PutResult = iota + 1 // the id was new
	PutExisting                      // same id, same hash: nothing changed
	PutConflict                      // same id, another hash: nothing changed
	PutAdopted                       // the id was known only from verdicts decided elsewhere
)

// Watch is a non-final intent and when to look at it again.
type Watch struct {
	IntentID, Canister string
	NextCheck          time.Time
	// Attempts counts consecutive unreadable checks, for backoff.
	Attempts int
	// LastStatus is the status of the intent's latest stored verdict as
	// the watch list knows it ("" when unknown): a follow-up decision with
	// the same not_yet says nothing new and needs no further read.
	LastStatus Status
}

// Store is the service's persistence.
type Store interface {
	PutIntent(ctx context.Context, rec IntentRecord) (PutResult, error)
	// Intent returns a stored intent with its body, or ErrNotFound.
	Intent(ctx context.Context, id string) (IntentRecord, error)
	// AppendVerdict stores the next verdict (seq = last+1, else ErrHistory);
	// with w non-nil and v not final it schedules w in the same
	// transaction. A final verdict ends the watch.
	AppendVerdict(ctx context.Context, v Verdict, w *Watch) error
	// AppendDecided is AppendVerdict for a verdict decided here: the same
	// transaction records it in the outbox, where it stays until
	// MarkPublished, so a crash between store and publish cannot lose it.
	AppendDecided(ctx context.Context, v Verdict, w *Watch) error
	// PutIntentDecided is PutIntent and then, unless the id is taken by
	// another body (PutConflict: nothing is written), AppendDecided, in one
	// transaction.
	PutIntentDecided(ctx context.Context, rec IntentRecord, v Verdict, w *Watch) (PutResult, error)
	// MarkPublished records that the stream holds the intent's verdict seq
	// (and so every earlier one): its outbox entries up to seq go. It may
	// take effect after it returns, and a mark lost in a crash only costs
	// the outbox pass a stream lookup.
	MarkPublished(ctx context.Context, id string, seq uint64) error
	// DiscardUnpublished removes the intent's verdicts from seq on, all of
	// them still in the outbox (refused by the stream), and watches the
	// intent again unless the verdict before them is final.
	DiscardUnpublished(ctx context.Context, id string, seq uint64) error
	// Unpublished lists the intents with outbox entries, each once.
	Unpublished(ctx context.Context) ([]string, error)
	// UnpublishedBefore reports whether the outbox holds a verdict of the
	// intent below seq (true may be stale: the stream may hold it already).
	UnpublishedBefore(ctx context.Context, id string, seq uint64) (bool, error)
	// LatestVerdict returns the newest stored verdict, or ErrNotFound.
	LatestVerdict(ctx context.Context, id string) (Verdict, error)
	// Verdicts returns the intent's stored verdicts, oldest first (empty
	// when none).
	Verdicts(ctx context.Context, id string) ([]Verdict, error)
	// AppendAfterGap is AppendVerdict for a verdict of the stream that
	// follows seqs the stream does not hold: its seq may skip them.
	AppendAfterGap(ctx context.Context, v Verdict, w *Watch) error
	// ReplaceIntent makes rec and vs (the stream's verdicts of it, oldest
	// first) the intent's record in place of the stored intent, verdicts,
	// outbox rows and watch entry, with w as its watch entry (nil: none),
	// in one transaction.
	ReplaceIntent(ctx context.Context, rec IntentRecord, vs []Verdict, w *Watch) error
	// Watches lists every watched intent.
	Watches(ctx context.Context) ([]Watch, error)
	// Reschedule replaces an intent's watch entry.
	Reschedule(ctx context.Context, w Watch) error
}

// CheckRecorder is a Store that also records when the follow-up last
// checked watched intents against the ledger: a not_yet intent checked
// again without news gets no new verdict, and without this nothing would
// show that it is still being checked. Optional.
type CheckRecorder interface {
	RecordChecks(ctx context.Context, ids []string, at time.Time) error
}

// IntentHeader travels with every verdict message so that other instances,
// consuming the verdict stream into their own stores, learn the intent too.
type IntentHeader struct {
	Body []byte
	Hash [32]byte
}

// StreamedVerdict is a verdict as the verdict stream holds it, with the
// intent its message carries (nil when it carries none).
type StreamedVerdict struct {
	Verdict Verdict
	Intent  *IntentHeader
}

// Sink publishes verdicts and rejects.
type Sink interface {
	// PublishVerdict stores v in the verdict stream; ErrHistory when the
	// stream's history of the intent refuses it.
	PublishVerdict(ctx context.Context, v Verdict, in IntentHeader) error
	PublishReject(ctx context.Context, intentID, code, message string) error
	// LastVerdict returns the stream's newest verdict of the intent, nil
	// when it holds none.
	LastVerdict(ctx context.Context, intentID string) (*Verdict, error)
	// History returns every verdict the stream holds of the intent, oldest
	// first; empty when none.
	History(ctx context.Context, intentID string) ([]StreamedVerdict, error)
}

// Decider decides intents; *Engine implements it.
type Decider interface {
	DecideMany(ctx context.Context, ins []*matcher.Intent) ([]Verdict, error)
}
