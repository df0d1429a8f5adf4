package reconciled

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// Errors the store and the verdict stream wrap so the service can tell
// what happened without knowing the implementations.
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
	// ErrBlockConflict: a BlockCache refused verified blocks that contradict a
	// block it holds inside the recorded verified range. The cached chain is
	// then not the ledger's history any more: the chain is rebuilt.
	ErrBlockConflict = errors.New("verified block contradicts the cached chain")
)

// ValidIntentID reports whether s is a valid intent_id: [A-Za-z0-9_-]{1,128}.
// It is the one definition: the matcher refuses intents, the intake
// subjects, the store and the support API refuse ids by it.
func ValidIntentID(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// IntentRecord is an intent as first received, as the service stores it
// and support staff read it.
type IntentRecord struct {
	IntentID   string
	CanisterID string
	Caller     string
	Method     string
	// Body is the canonical JSON of a valid intent, or the body as received
	// for an invalid one.
	Body json.RawMessage
	// Hash identifies the content (the intent_hash every verdict carries,
	// in bytes): the matcher's canonical hash for a valid intent, SHA-256
	// of Body for an invalid one. Two bodies with the same hash are the
	// same intent. The caller computes it (the store does not know the
	// canonical form); it must not be all zero.
	Hash [32]byte
	// FirstSeen is when the intent was first received; zero means now. It
	// orders listings and never changes once stored.
	FirstSeen time.Time
	// Parsed, when the caller has it, is what Body parses to (the matcher's
	// *Intent, nil otherwise): a store reads what it indexes from it
	// instead of parsing Body once more. It is typed any so that this
	// package stays free of the matcher.
	Parsed any
}

// PutResult says what putting an intent did.
type PutResult int

const (
	// PutCreated: the id was new; the record is stored.
	PutCreated PutResult = iota + 1
	// PutExisting: the id was stored with the same hash; nothing changed.
	PutExisting
	// PutConflict: the id was stored with a different hash; nothing
	// changed (E_INTENT_CONFLICT).
	PutConflict
	// PutAdopted: the id was known only from verdicts decided elsewhere;
	// the body is now recorded. The store cannot tell whether those
	// verdicts were decided for this body or for a conflicting one.
	PutAdopted
)

func (r PutResult) String() string {
	switch r {
	case PutCreated:
		return "created"
	case PutExisting:
		return "existing"
	case PutConflict:
		return "conflict"
	case PutAdopted:
		return "adopted"
	}
	return "PutResult(" + strconv.Itoa(int(r)) + ")"
}

// Watch is a non-final intent and when to look at it again.
type Watch struct {
	IntentID   string
	CanisterID string
	NextCheck  time.Time
	// Attempts counts consecutive unreadable checks, for backoff.
	Attempts int
	// WindowToTS is the window's end in ledger ns (0: not known yet).
	WindowToTS uint64
	// LastStatus is the status of the intent's latest stored verdict as
	// the watch list knows it ("" when unknown): a follow-up decision with
	// the same not_yet says nothing new and needs no further read.
	LastStatus Status
	// CheckedAt is when this instance last checked the intent against the
	// ledger; zero when it has not since the store kept it.
	CheckedAt time.Time
}

// IntentHeader travels with every verdict message so that other instances,
// consuming the verdict stream into their own stores, learn the intent too.
type IntentHeader struct {
	Body []byte
	// Hash is the intent's IntentRecord.Hash.
	Hash [32]byte
}

// StreamedVerdict is a verdict as the verdict stream holds it, with the
// intent its message carries (nil when it carries none).
type StreamedVerdict struct {
	Verdict Verdict
	Intent  *IntentHeader
}
