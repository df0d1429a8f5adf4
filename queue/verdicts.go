package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/reconciled/reconciled"
)

// ErrNoVerdict: the verdict stream holds no verdict for the intent.
var ErrNoVerdict = errors.New("queue: no verdict")

// ErrStop, returned by a WatchIntent callback, ends the watch without error.
var ErrStop = errors.New("queue: stop watching")

// LastVerdict returns the newest verdict of intentID by a direct get of the
// last message on its subject.
func (c *Conn) LastVerdict(ctx context.Context, intentID string) (*reconciled.Verdict, error) {
	subject, st, err := c.verdictSubject(ctx, intentID)
	if err != nil {
		return nil, err
	}
	v, _, err := lastVerdict(ctx, st, subject)
	if err != nil {
		return nil, fmt.Errorf("queue: last verdict of %s: %w", intentID, err)
	}
	return v, nil
}

// lastVerdict returns the last verdict on subject and its stream sequence,
// or ErrNoVerdict (with sequence 0).
func lastVerdict(ctx context.Context, st jetstream.Stream, subject string) (*reconciled.Verdict, uint64, error) {
	raw, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, ErrNoVerdict
	}
	if err != nil {
		return nil, 0, err
	}
	v, err := decodeVerdict(raw.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("stream seq %d: %w", raw.Sequence, err)
	}
	return &v, raw.Sequence, nil
}

func decodeVerdict(data []byte) (reconciled.Verdict, error) {
	var v reconciled.Verdict
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("decode verdict: %w", err)
	}
	if !v.Status.Valid() {
		return v, fmt.Errorf("decode verdict: unknown status %q", v.Status)
	}
	return v, nil
}

// FollowConfig configures FollowVerdicts.
type FollowConfig struct {
	// Durable names this instance's consumer. Each instance needs its own so
	// that every local store receives every verdict.
	Durable string
	// DeliverPolicy applies when the consumer is first created (default
	// DeliverAllPolicy); an existing consumer keeps its position.
	DeliverPolicy jetstream.DeliverPolicy
	// StartTime, when set and DeliverPolicy is not, makes a consumer
	// created now start at the first verdict stored at or after it
	// (DeliverByStartTimePolicy): a store that keeps verdicts for a
	// retention period imports only those, not the whole stream. An
	// existing consumer keeps its position whatever this says.
	StartTime time.Time
	// NakDelay is the redelivery delay after fn fails (default 1 s).
	NakDelay time.Duration
	// AckWait bounds one fn call before the server redelivers (default 30 s).
	AckWait time.Duration
	// Inactive is how long the server keeps this consumer once no instance
	// reads it (default 7 days): instances named after short-lived pods
	// would otherwise leave a consumer behind each.
	Inactive time.Duration
	// SkipOrigin, when set, is the origin (HeaderOrigin) of verdicts that
	// are acked without being decoded or handed to fn: those the follower's
	// own store published (Sink.Origin).
	SkipOrigin string
	// StoreID names the store this consumer feeds, kept in the consumer's
	// metadata (FollowerInfo.StoreID): a consumer found feeding another
	// store must not resume for this one.
	StoreID string
	// StartAfter, when not 0, makes a consumer created now start after
	// this stream sequence instead of at DeliverPolicy's start: a store
	// older than its consumer's position re-reads what it lacks.
	StartAfter uint64
	// Progress, when set, is called once the consumer is set up, and for
	// each verdict when it is delivered and after it is handled (before
	// its ack), from the follower's goroutine.
	Progress func(FollowProgress)
}

// FollowProgress is how far a follower has read the verdict stream.
type FollowProgress struct {
	// Seq is the stream sequence through which every verdict has been
	// handled: at set-up the consumer's ack floor, then the verdict just
	// handled (0: none yet).
	Seq uint64
	// Pending counts the verdicts after it the follower has yet to handle,
	// as the server counted them when it delivered the latest one.
	Pending uint64
}

// MetaStoreID is the follower consumer's metadata key naming the store it
// feeds.
const MetaStoreID = "store_id"

// FollowerInfo is the state of a durable verdict follower.
type FollowerInfo struct {
	// Exists is false when there is no such consumer (never created,
	// deleted, or expired after FollowConfig.Inactive).
	Exists bool
	// StoreID is the store it feeds ("" for a consumer created before
	// consumers named their store).
	StoreID string
	// AckFloor is the stream sequence through which it has acked every
	// verdict.
	AckFloor uint64
	// Pending counts the verdicts it has yet to handle: not delivered, or
	// delivered and not acked.
	Pending uint64
	// Stream identifies the verdict stream (its creation time): sequences
	// of another stream, even of the same name, mean nothing in this one.
	Stream string
}

// FollowerInfo reads the durable verdict follower's state, and the
// verdict stream's identity.
func (c *Conn) FollowerInfo(ctx context.Context, durable string) (FollowerInfo, error) {
	if err := ValidToken(durable); err != nil {
		return FollowerInfo{}, fmt.Errorf("queue: verdict follower %q: %w", durable, err)
	}
	st, err := c.js.Stream(ctx, VerdictsStream)
	if err != nil {
		return FollowerInfo{}, fmt.Errorf("queue: verdict follower %s: stream: %w", durable, err)
	}
	fi := FollowerInfo{Stream: st.CachedInfo().Created.UTC().Format(time.RFC3339Nano)}
	cons, err := st.Consumer(ctx, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fi, nil
	}
	if err != nil {
		return FollowerInfo{}, fmt.Errorf("queue: verdict follower %s: %w", durable, err)
	}
	info := cons.CachedInfo()
	fi.Exists, fi.StoreID, fi.AckFloor = true, info.Config.Metadata[MetaStoreID], info.AckFloor.Stream
	fi.Pending = info.NumPending + uint64(max(info.NumAckPending, 0))
	return fi, nil
}

// start is where a consumer created now for cfg begins reading: the one
// place that choice is made. A store that holds the stream up to a
// sequence resumes after it (StartAfter); otherwise a new store starts at
// what retention keeps (StartTime); otherwise at DeliverPolicy's start.
func (cfg FollowConfig) start() (policy jetstream.DeliverPolicy, seq uint64, at *time.Time) {
	switch {
	case cfg.StartAfter > 0:
		return jetstream.DeliverByStartSequencePolicy, cfg.StartAfter + 1, nil
	case cfg.DeliverPolicy == jetstream.DeliverAllPolicy && !cfg.StartTime.IsZero():
		t := cfg.StartTime.UTC()
		return jetstream.DeliverByStartTimePolicy, 0, &t
	}
	return cfg.DeliverPolicy, 0, nil
}

// FollowVerdicts calls fn for every verdict in stream order, at least once:
// a verdict is acked after fn returns nil and redelivered after NakDelay
// when fn fails. One verdict is outstanding at a time, so a failed verdict
// is retried before any later one is seen. It blocks until ctx ends (then
// returns nil, after the running fn has returned) or the consumer cannot
// be set up.
func (c *Conn) FollowVerdicts(ctx context.Context, cfg FollowConfig, fn func(v reconciled.Verdict) error) error {
	return c.FollowVerdictMsgs(ctx, cfg, func(v reconciled.Verdict, _ nats.Header) error { return fn(v) })
}

// ForgetFollower deletes the durable verdict follower, if there is one, so
// that the next FollowVerdicts under that name starts where a new follower
// starts (FollowConfig.start): for a store that must import the stream again
// under a name that followed before.
func (c *Conn) ForgetFollower(ctx context.Context, durable string) error {
	if err := ValidToken(durable); err != nil {
		return fmt.Errorf("queue: forget verdict follower %q: %w", durable, err)
	}
	if err := c.js.DeleteConsumer(ctx, VerdictsStream, durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("queue: forget verdict follower %s: %w", durable, err)
	}
	return nil
}

// FollowVerdictMsgs is FollowVerdicts that also hands fn each message's
// headers (see IntentHeaders).
func (c *Conn) FollowVerdictMsgs(ctx context.Context, cfg FollowConfig, fn func(v reconciled.Verdict, hdr nats.Header) error) error {
	if err := ValidToken(cfg.Durable); err != nil {
		return fmt.Errorf("queue: follow verdicts durable %q: %w", cfg.Durable, err)
	}
	if cfg.NakDelay <= 0 {
		cfg.NakDelay = time.Second
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = defaultAckWait
	}
	if cfg.Inactive <= 0 {
		cfg.Inactive = 7 * 24 * time.Hour
	}
	ccfg := jetstream.ConsumerConfig{
		Durable:           cfg.Durable,
		InactiveThreshold: cfg.Inactive,
		Description:       "verdicts into one instance's store",
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           cfg.AckWait,
		// Unbounded: a store must not silently miss a verdict because it
		// was down for a while; a poison message is terminated instead.
		MaxDeliver:    -1,
		MaxAckPending: 1,
		FilterSubject: c.subj.VerdictsFilter(),
	}
	ccfg.DeliverPolicy, ccfg.OptStartSeq, ccfg.OptStartTime = cfg.start()
	if cfg.StoreID != "" {
		ccfg.Metadata = map[string]string{MetaStoreID: cfg.StoreID}
	}
	// The server refuses to change the deliver policy of an existing
	// consumer, and its position is what matters then.
	if info, err := c.js.Consumer(ctx, VerdictsStream, cfg.Durable); err == nil {
		ccfg.DeliverPolicy = info.CachedInfo().Config.DeliverPolicy
		ccfg.OptStartSeq = info.CachedInfo().Config.OptStartSeq
		ccfg.OptStartTime = info.CachedInfo().Config.OptStartTime
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("queue: follow verdicts %s: %w", cfg.Durable, err)
	}
	cons, err := c.js.CreateOrUpdateConsumer(ctx, VerdictsStream, ccfg)
	if err != nil {
		return fmt.Errorf("queue: follow verdicts %s: %w", cfg.Durable, err)
	}
	log := c.log.With(zap.String("consumer", cfg.Durable))
	progress := func(msg jetstream.Msg, handled bool) {
		if cfg.Progress == nil {
			return
		}
		meta, err := msg.Metadata()
		if err != nil {
			return
		}
		p := FollowProgress{Pending: meta.NumPending}
		if handled {
			p.Seq = meta.Sequence.Stream
		} else {
			p.Pending++ // this one is still to be handled
		}
		cfg.Progress(p)
	}
	if cfg.Progress != nil {
		info := cons.CachedInfo()
		cfg.Progress(FollowProgress{Seq: info.AckFloor.Stream, Pending: info.NumPending + uint64(max(info.NumAckPending, 0))})
	}
	return c.iterate(ctx, cons, log, true, func(msg jetstream.Msg) error {
		// Reported on delivery too: a handler that does not return must not
		// leave the last lag standing.
		progress(msg, false)
		if cfg.SkipOrigin != "" && msg.Headers().Get(HeaderOrigin) == cfg.SkipOrigin {
			progress(msg, true)
			return msg.Ack()
		}
		v, err := decodeVerdict(msg.Data())
		if err != nil {
			// Redelivery cannot make it decodable.
			log.Error("undecodable verdict terminated", zap.String("subject", msg.Subject()), zap.Error(err))
			progress(msg, true)
			return msg.TermWithReason(err.Error())
		}
		if err := fn(v, msg.Headers()); err != nil {
			log.Warn("verdict handler failed; will retry", zap.String("intent_id", v.IntentID),
				zap.Uint64("seq", v.Seq), zap.Duration("delay", cfg.NakDelay), zap.Error(err))
			progress(msg, false)
			return msg.NakWithDelay(cfg.NakDelay)
		}
		progress(msg, true)
		return msg.Ack()
	})
}

// WatchIntent calls fn with the intent's latest verdict (if any) and then
// every new one, in order. It returns nil when fn returns ErrStop, fn's
// error when it returns another, and ctx's error when ctx ends. A verdict
// published between the subscription and the first read is not missed: the
// consumer starts from the stream's last message per subject.
func (c *Conn) WatchIntent(ctx context.Context, intentID string, fn func(v reconciled.Verdict) error) error {
	subject, err := c.subj.Verdict(intentID)
	if err != nil {
		return err
	}
	cons, err := c.js.OrderedConsumer(ctx, VerdictsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
		// A watcher that vanished leaves nothing behind for long.
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("queue: watch intent %s: %w", intentID, err)
	}
	log := c.log.With(zap.String("intent_id", intentID))
	var result error
	err = c.iterate(ctx, cons, log, false, func(msg jetstream.Msg) error {
		v, err := decodeVerdict(msg.Data())
		if err != nil {
			log.Warn("undecodable verdict skipped", zap.Error(err))
			return nil
		}
		if err := fn(v); err != nil {
			result = err
			return errStopIterate
		}
		return nil
	})
	switch {
	case errors.Is(result, ErrStop):
		return nil
	case result != nil:
		return result
	case err != nil:
		return err
	}
	return fmt.Errorf("queue: watch intent %s: %w", intentID, ctx.Err())
}

var errStopIterate = errors.New("stop iterating")

// iterate feeds messages of cons to handle until ctx ends or handle returns
// errStopIterate. Other handle errors (failed acks) are logged: the server
// redelivers. Transient pull errors are retried with backoff. With
// nakOnStop, a message that arrives as ctx ends is returned at once rather
// than left to its ack timeout, which would stall a restarted durable.
func (c *Conn) iterate(ctx context.Context, cons jetstream.Consumer, log *zap.Logger, nakOnStop bool, handle func(jetstream.Msg) error) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(64))
	if err != nil {
		return fmt.Errorf("queue: pull messages: %w", err)
	}
	defer func() {
		if !nakOnStop {
			it.Stop()
			return
		}
		// Stop unsubscribes asynchronously, so the server can still hand
		// this iterator a message that nobody would ack: with one message
		// outstanding that stalls the durable for a whole AckWait. Drain
		// instead and give back whatever arrives until the server has seen
		// the unsubscribe.
		it.Drain()
		for {
			msg, err := it.Next(jetstream.NextMaxWait(2 * time.Second))
			if err != nil {
				return
			}
			_ = msg.Nak()
		}
	}()
	retry := newRetryDelay(100*time.Millisecond, 5*time.Second)
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			if msg != nil && nakOnStop {
				_ = msg.Nak()
			}
			return nil
		}
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return fmt.Errorf("queue: pull messages: %w", err)
		}
		if err != nil {
			log.Warn("pull failed", zap.Error(err))
			if !retry.wait(ctx) {
				return nil
			}
			continue
		}
		retry.reset()
		if err := handle(msg); err != nil {
			if errors.Is(err, errStopIterate) {
				return errStopIterate
			}
			log.Warn("settle message failed", zap.String("subject", msg.Subject()), zap.Error(err))
		}
	}
}

// VerdictHistory returns every verdict of intentID the stream holds, oldest
// first, each with the intent its message carries: what an instance
// imports when the stream refused a verdict it decided, or when it meets
// an intent the fleet decided before its store learnt of it.
func (c *Conn) VerdictHistory(ctx context.Context, intentID string) ([]reconciled.StreamedVerdict, error) {
	subject, st, err := c.verdictSubject(ctx, intentID)
	if err != nil {
		return nil, err
	}
	var out []reconciled.StreamedVerdict
	// One direct get per verdict, each the next message of the subject: an
	// intent's history is a handful of messages.
	for seq := uint64(1); ; {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("queue: verdict history of %s: %w", intentID, err)
		}
		v, err := decodeVerdict(raw.Data)
		if err != nil {
			return nil, fmt.Errorf("queue: verdict history of %s: stream seq %d: %w", intentID, raw.Sequence, err)
		}
		hdr, err := DecodeIntentHeaders(raw.Header)
		if err != nil {
			c.log.Warn("streamed verdict with unreadable intent headers", zap.String("intent_id", intentID), zap.Error(err))
		}
		out = append(out, reconciled.StreamedVerdict{Verdict: v, Intent: hdr})
		seq = raw.Sequence + 1
	}
}

// verdictSubject returns the intent's verdict subject and the stream
// holding it.
func (c *Conn) verdictSubject(ctx context.Context, intentID string) (string, jetstream.Stream, error) {
	subject, err := c.subj.Verdict(intentID)
	if err != nil {
		return "", nil, err
	}
	st, err := c.verdictStream(ctx)
	if err != nil {
		return "", nil, err
	}
	return subject, st, nil
}
