package reconcile

import (
	"context"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
)

// The service's ports: small interfaces implemented by the store and the
// queue, which import this package for its types only.

// Store is the service's persistence.
type Store interface {
	PutIntent(ctx context.Context, rec reconciled.IntentRecord) (reconciled.PutResult, error)
	// Intent returns a stored intent with its body, or ErrNotFound.
	Intent(ctx context.Context, id string) (reconciled.IntentRecord, error)
	// AppendVerdict stores the next verdict (seq = last+1, else ErrHistory);
	// with w non-nil and v not final it schedules w in the same
	// transaction. A final verdict ends the watch.
	AppendVerdict(ctx context.Context, v reconciled.Verdict, w *reconciled.Watch) error
	// AppendDecided is AppendVerdict for a verdict decided here: the same
	// transaction records it in the outbox, where it stays until
	// MarkPublished, so a crash between store and publish cannot lose it.
	AppendDecided(ctx context.Context, v reconciled.Verdict, w *reconciled.Watch) error
	// PutIntentDecided is PutIntent and then, unless the id is taken by
	// another body (PutConflict: nothing is written), AppendDecided, in one
	// transaction.
	PutIntentDecided(ctx context.Context, rec reconciled.IntentRecord, v reconciled.Verdict, w *reconciled.Watch) (reconciled.PutResult, error)
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
	LatestVerdict(ctx context.Context, id string) (reconciled.Verdict, error)
	// Verdicts returns the intent's stored verdicts, oldest first (empty
	// when none).
	Verdicts(ctx context.Context, id string) ([]reconciled.Verdict, error)
	// AppendAfterGap is AppendVerdict for a verdict of the stream that
	// follows seqs the stream does not hold: its seq may skip them.
	AppendAfterGap(ctx context.Context, v reconciled.Verdict, w *reconciled.Watch) error
	// ReplaceIntent makes rec and vs (the stream's verdicts of it, oldest
	// first) the intent's record in place of the stored intent, verdicts,
	// outbox rows and watch entry, with w as its watch entry (nil: none),
	// in one transaction.
	ReplaceIntent(ctx context.Context, rec reconciled.IntentRecord, vs []reconciled.Verdict, w *reconciled.Watch) error
	// Watches lists every watched intent.
	Watches(ctx context.Context) ([]reconciled.Watch, error)
	// Reschedule replaces an intent's watch entry.
	Reschedule(ctx context.Context, w reconciled.Watch) error
}

// CheckRecorder is a Store that also records when the follow-up last
// checked watched intents against the ledger: a not_yet intent checked
// again without news gets no new verdict, and without this nothing would
// show that it is still being checked. Optional.
type CheckRecorder interface {
	RecordChecks(ctx context.Context, ids []string, at time.Time) error
}

// Sink publishes verdicts and rejects.
type Sink interface {
	// PublishVerdict stores v in the verdict stream; ErrHistory when the
	// stream's history of the intent refuses it.
	PublishVerdict(ctx context.Context, v reconciled.Verdict, in reconciled.IntentHeader) error
	PublishReject(ctx context.Context, intentID, code, message string) error
	// LastVerdict returns the stream's newest verdict of the intent, nil
	// when it holds none.
	LastVerdict(ctx context.Context, intentID string) (*reconciled.Verdict, error)
	// History returns every verdict the stream holds of the intent, oldest
	// first; empty when none.
	History(ctx context.Context, intentID string) ([]reconciled.StreamedVerdict, error)
}

// Decider decides intents; *Engine implements it.
type Decider interface {
	DecideMany(ctx context.Context, ins []*matcher.Intent) ([]reconciled.Verdict, error)
}
