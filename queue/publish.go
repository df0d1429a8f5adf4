package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/reconciled/reconciled"
)

// PublishIntent publishes an intent body on <prefix>.intents.<canister_id>
// with Nats-Msg-Id = IntentMsgID(intent_id, intentHash), intentHash being
// the body's intent_hash (matcher.IntentHash, which the caller computes:
// this package does not parse intents). duplicate is true when
// the stream already took this very intent within its dedup window; the
// message is then not stored again. Another body under the same id is never
// a duplicate: it reaches a daemon, which refuses it (E_INTENT_CONFLICT).
func (c *Conn) PublishIntent(ctx context.Context, canisterID, intentID string, body []byte, intentHash string) (duplicate bool, err error) {
	subject, err := c.subj.Intent(canisterID)
	if err != nil {
		return false, err
	}
	if err := ValidToken(intentID); err != nil {
		return false, fmt.Errorf("queue: intent id %q: %w", intentID, err)
	}
	if len(body) > MaxIntentBytes {
		return false, fmt.Errorf("queue: publish intent %s: %d bytes are larger than the limit of %d bytes", intentID, len(body), MaxIntentBytes)
	}
	ack, err := c.js.Publish(ctx, subject, body, jetstream.WithMsgID(IntentMsgID(intentID, intentHash)), jetstream.WithExpectStream(IntentsStream))
	if err != nil {
		return false, fmt.Errorf("queue: publish intent %s on %s: %w", intentID, subject, err)
	}
	return ack.Duplicate, nil
}

// IntentMsgID is the Nats-Msg-Id of an intent: "<intent_id>:<intent_hash>",
// the hash every verdict of that body carries (matcher.IntentHash). Keyed on
// the id alone, the stream would drop a different body under a recent id
// before any daemon saw it, and its publisher would read the other body's
// verdicts as its own.
func IntentMsgID(intentID, intentHash string) string {
	return intentID + ":" + intentHash
}

// VerdictMsgID is the dedup id of a verdict: re-publishing the same seq of
// an intent (e.g. from the store after a restart) stores it once.
func VerdictMsgID(intentID string, seq uint64) string {
	return intentID + ":" + strconv.FormatUint(seq, 10)
}

// Errors of PublishVerdict that say the verdict contradicts the intent's
// history in the stream; nothing was published.
var (
	// ErrStaleVerdict: the stream already holds a later seq.
	ErrStaleVerdict = errors.New("queue: stale verdict")
	// ErrVerdictConflict: the stream holds this seq with another decision.
	ErrVerdictConflict = errors.New("queue: conflicting verdict")
	// ErrAfterFinal: the stream's last verdict is final.
	ErrAfterFinal = errors.New("queue: verdict after a final verdict")
)

// PublishVerdict publishes v as JSON on <prefix>.verdicts.<intent_id> and
// returns once the stream has stored it.
//
// The stream keeps each intent's history in seq order, because readers take
// its last message as the current verdict: v is refused when the stream
// already holds a later seq, a final verdict, or the same seq with another
// decision. The same seq with the same decision (a re-publication) is
// accepted and stored once. The check and the write are one atomic step on
// the server (expected last sequence per subject), so concurrent publishers
// of one intent cannot interleave.
func (c *Conn) PublishVerdict(ctx context.Context, v reconciled.Verdict) error {
	return c.PublishVerdictWith(ctx, v, nil)
}

// PublishVerdictWith is PublishVerdict with message headers (e.g. the
// intent's body, see IntentHeaders); the body stays the verdict JSON.
func (c *Conn) PublishVerdictWith(ctx context.Context, v reconciled.Verdict, hdr nats.Header) error {
	subject, err := c.subj.Verdict(v.IntentID)
	if err != nil {
		return err
	}
	id := VerdictMsgID(v.IntentID, v.Seq)
	if !v.Status.Valid() {
		return fmt.Errorf("queue: publish verdict %s: unknown status %q", id, v.Status)
	}
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("queue: encode verdict %s: %w", id, err)
	}
	st, err := c.verdictStream(ctx)
	if err != nil {
		return err
	}
	if v.Seq == 1 {
		// A first verdict is almost always new to the stream: it is offered
		// on the condition that the subject holds no message, which the
		// server checks atomically, saving the read; with other first
		// verdicts in one batch when it can (verdictbatch.go). Anything
		// else (the subject holds a verdict, or the message id is a
		// duplicate whose decision must be compared) is judged by the loop
		// below.
		ack, err := c.publishFirst(ctx, firstVerdictMsg(subject, body, hdr, id))
		switch {
		case err == nil && !ack.Duplicate:
			return nil
		case err != nil && !wrongLastSequence(err):
			return fmt.Errorf("queue: publish verdict %s: %w", id, err)
		}
	}
	const attempts = 8
	for range attempts {
		last, lastSeq, err := lastVerdict(ctx, st, subject)
		if err != nil && !errors.Is(err, ErrNoVerdict) {
			return fmt.Errorf("queue: publish verdict %s: %w", id, err)
		}
		if last != nil {
			switch {
			case last.Seq == v.Seq && reconciled.SameDecision(*last, v):
				return nil
			case last.Seq == v.Seq:
				return fmt.Errorf("%w: %s is stored as %s, not %s", ErrVerdictConflict, id, last.Status, v.Status)
			case last.Seq > v.Seq:
				return fmt.Errorf("%w: %s, the stream holds seq %d", ErrStaleVerdict, id, last.Seq)
			case last.Final:
				return fmt.Errorf("%w: %s after final seq %d (%s)", ErrAfterFinal, id, last.Seq, last.Status)
			}
		}
		_, err = c.js.PublishMsg(ctx, verdictMsg(subject, body, hdr),
			jetstream.WithMsgID(id),
			jetstream.WithExpectStream(VerdictsStream),
			jetstream.WithExpectLastSequencePerSubject(lastSeq))
		if err == nil {
			return nil
		}
		if wrongLastSequence(err) {
			continue // another verdict of this intent landed first: judge again
		}
		return fmt.Errorf("queue: publish verdict %s: %w", id, err)
	}
	return fmt.Errorf("queue: publish verdict %s: history kept changing over %d attempts", id, attempts)
}

// firstVerdictMsg is the message of a first verdict with the headers of
// its conditions: what jetstream.WithMsgID, WithExpectStream and
// WithExpectLastSequencePerSubject(0) would set.
func firstVerdictMsg(subject string, body []byte, hdr nats.Header, id string) *nats.Msg {
	m := verdictMsg(subject, body, hdr)
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Header.Set(jetstream.ExpectedStreamHeader, VerdictsStream)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	return m
}

func verdictMsg(subject string, body []byte, hdr nats.Header) *nats.Msg {
	msg := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{}}
	for k, vs := range hdr {
		msg.Header[k] = append([]string(nil), vs...)
	}
	return msg
}

// wrongLastSequence: the stream refused a publish because the subject's
// last message was not the one expected.
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Reject is the message on <prefix>.rejects.<intent_id> (core NATS).
type Reject struct {
	IntentID string `json:"intent_id"`
	Code     string `json:"code"`
	Message  string `json:"message"`
}

// PublishReject tells the intent's publisher that it was refused (e.g.
// E_INTENT_CONFLICT). Core NATS: nobody may be listening, and that is fine;
// the flush only proves the server received it.
func (c *Conn) PublishReject(ctx context.Context, intentID, code, message string) error {
	subject, err := c.subj.Reject(intentID)
	if err != nil {
		return err
	}
	body, err := json.Marshal(Reject{IntentID: intentID, Code: code, Message: message})
	if err != nil {
		return fmt.Errorf("queue: encode reject %s: %w", intentID, err)
	}
	if err := c.nc.Publish(subject, body); err != nil {
		return fmt.Errorf("queue: publish reject %s: %w", intentID, err)
	}
	// nats.go refuses to flush under a context without a deadline, and the
	// intake's handler context has none.
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("queue: publish reject %s: flush: %w", intentID, err)
	}
	return nil
}

// SubscribeRejects calls fn for each reject of intentID until ctx ends.
// It returns once the subscription is registered with the server, so a
// caller can subscribe, then publish the intent, without missing a reject.
func (c *Conn) SubscribeRejects(ctx context.Context, intentID string, fn func(Reject)) error {
	subject, err := c.subj.Reject(intentID)
	if err != nil {
		return err
	}
	sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) {
		var r Reject
		if err := json.Unmarshal(m.Data, &r); err != nil {
			c.log.Warn("undecodable reject", zap.String("subject", m.Subject), zap.Error(err))
			return
		}
		fn(r)
	})
	if err != nil {
		return fmt.Errorf("queue: subscribe rejects %s: %w", intentID, err)
	}
	if err := c.nc.FlushWithContext(ctx); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("queue: subscribe rejects %s: flush: %w", intentID, err)
	}
	go func() {
		select {
		case <-ctx.Done():
			_ = sub.Unsubscribe()
		case <-c.closed:
		}
	}()
	return nil
}
