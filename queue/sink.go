package queue

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/reconciled/reconciled"
)

// Headers of a verdict message that carry the intent it decides, so an
// instance consuming the verdict stream into its own store learns the
// intent too. The body is base64 (standard encoding): an invalid intent's
// body is kept as received and may hold bytes a header line cannot.
const (
	HeaderIntent     = "Reconcile-Intent"
	HeaderIntentHash = "Reconcile-Intent-Hash"
)

// HeaderOrigin names the store a verdict was published from (Sink.Origin).
// The instance that holds that store skips the verdict when it follows the
// stream (FollowConfig.SkipOrigin): its store committed the verdict before
// publishing it, so reading it back would only confirm it.
const HeaderOrigin = "Reconcile-Origin"

// IntentHeaders encodes an intent for a verdict message.
func IntentHeaders(in reconciled.IntentHeader) nats.Header {
	h := nats.Header{}
	h.Set(HeaderIntent, base64.StdEncoding.EncodeToString(in.Body))
	h.Set(HeaderIntentHash, hex.EncodeToString(in.Hash[:]))
	return h
}

// DecodeIntentHeaders reads IntentHeaders; nil (no error) when the message
// carries none.
func DecodeIntentHeaders(h nats.Header) (*reconciled.IntentHeader, error) {
	b64, hx := h.Get(HeaderIntent), h.Get(HeaderIntentHash)
	if b64 == "" && hx == "" {
		return nil, nil
	}
	body, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("queue: header %s: %w", HeaderIntent, err)
	}
	sum, err := hex.DecodeString(hx)
	if err != nil || len(sum) != 32 {
		return nil, fmt.Errorf("queue: header %s: want 64 hex digits, got %q", HeaderIntentHash, hx)
	}
	out := &reconciled.IntentHeader{Body: body}
	copy(out.Hash[:], sum)
	return out, nil
}

// Sink adapts a Conn to the service's verdict sink (reconcile.Sink).
type Sink struct {
	C *Conn
	// Origin, when set, goes with every verdict as HeaderOrigin. It must
	// name one opening of one store, whose service publishes only verdicts
	// that store has committed: an instance restored from a backup of its
	// store lacks verdicts its previous opening published, so each opening
	// needs a new origin.
	Origin string
}

func (s Sink) PublishVerdict(ctx context.Context, v reconciled.Verdict, in reconciled.IntentHeader) error {
	h := IntentHeaders(in)
	if s.Origin != "" {
		h.Set(HeaderOrigin, s.Origin)
	}
	err := s.C.PublishVerdictWith(ctx, v, h)
	if errors.Is(err, ErrStaleVerdict) || errors.Is(err, ErrVerdictConflict) || errors.Is(err, ErrAfterFinal) {
		return fmt.Errorf("%w: %w", reconciled.ErrHistory, err)
	}
	return err
}

func (s Sink) PublishReject(ctx context.Context, intentID, code, message string) error {
	return s.C.PublishReject(ctx, intentID, code, message)
}

func (s Sink) LastVerdict(ctx context.Context, intentID string) (*reconciled.Verdict, error) {
	v, err := s.C.LastVerdict(ctx, intentID)
	if errors.Is(err, ErrNoVerdict) {
		return nil, nil
	}
	return v, err
}

func (s Sink) History(ctx context.Context, intentID string) ([]reconciled.StreamedVerdict, error) {
	return s.C.VerdictHistory(ctx, intentID)
}
