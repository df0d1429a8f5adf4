package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/reconciled/reconciled/reconcile"
)

// PublishIntent publishes an intent body on <prefix>.intents.<canister_id>
// with Nats-Msg-Id = intent_id. duplicate is true when the stream already
// took this id within its dedup window; the message is then not stored again.
func (c *Conn) PublishIntent(ctx context.Context, canisterID, intentID string, body []byte) (duplicate bool, err error) {
	subject, err := c.subj.Intent(canisterID)
	if err != nil {
		return false, err
	}
	if err := ValidToken(intentID); err != nil {
		return false, fmt.Errorf("queue: intent id %q: %w", intentID, err)
	}
	ack, err := c.js.Publish(ctx, subject, body, jetstream.WithMsgID(intentID), jetstream.WithExpectStream(IntentsStream))
	if err != nil {
		return false, fmt.Errorf("queue: publish intent %s on %s: %w", intentID, subject, err)
	}
	return ack.Duplicate, nil
}

// VerdictMsgID is the dedup id of a verdict: re-publishing the same seq of
// an intent (e.g. from the store after a restart) stores it once.
func VerdictMsgID(intentID string, seq uint64) string {
	return intentID + ":" + strconv.FormatUint(seq, 10)
}

// PublishVerdict publishes v as JSON on <prefix>.verdicts.<intent_id> and
// returns once the stream has stored it (or recognised it as a duplicate).
func (c *Conn) PublishVerdict(ctx context.Context, v reconcile.Verdict) error {
	subject, err := c.subj.Verdict(v.IntentID)
	if err != nil {
		return err
	}
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("queue: encode verdict %s: %w", VerdictMsgID(v.IntentID, v.Seq), err)
	}
	id := VerdictMsgID(v.IntentID, v.Seq)
	if _, err := c.js.Publish(ctx, subject, body, jetstream.WithMsgID(id), jetstream.WithExpectStream(VerdictsStream)); err != nil {
		return fmt.Errorf("queue: publish verdict %s: %w", id, err)
	}
	return nil
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
