package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// StreamsConfig tunes the two streams. Zero values select the defaults.
type StreamsConfig struct {
	// Replicas of both streams (default 1; 3 in a cluster).
	Replicas int
	// IntentDuplicates is the dedup window on Nats-Msg-Id =
	// <intent_id>:<intent_hash> (default and minimum 2 min, docs/design.md#verdict-stream).
	IntentDuplicates time.Duration
	// VerdictMaxAge is how long verdicts stay in the stream (default 30 days).
	VerdictMaxAge time.Duration
	// VerdictMaxPerSubject bounds one intent's verdict history (default 1000).
	VerdictMaxPerSubject int64
	// VerdictDuplicates is the dedup window on <intent_id>:<seq>
	// (default 10 min).
	VerdictDuplicates time.Duration
}

// DefaultVerdictMaxAge is how long the verdict stream keeps a verdict
// unless StreamsConfig.VerdictMaxAge says otherwise.
const DefaultVerdictMaxAge = 30 * 24 * time.Hour

const (
	minIntentDuplicates         = 2 * time.Minute
	defaultVerdictMaxPerSubject = 1000
	defaultVerdictDuplicates    = 10 * time.Minute
)

func (s StreamsConfig) withDefaults() (StreamsConfig, error) {
	if s.Replicas == 0 {
		s.Replicas = 1
	}
	if s.Replicas < 1 || s.Replicas > 5 {
		return s, fmt.Errorf("queue: streams: replicas %d not in 1..5", s.Replicas)
	}
	if s.IntentDuplicates == 0 {
		s.IntentDuplicates = minIntentDuplicates
	}
	if s.IntentDuplicates < minIntentDuplicates {
		return s, fmt.Errorf("queue: streams: intent dedup window %s is below %s", s.IntentDuplicates, minIntentDuplicates)
	}
	if s.VerdictMaxAge == 0 {
		s.VerdictMaxAge = DefaultVerdictMaxAge
	}
	if s.VerdictMaxPerSubject == 0 {
		s.VerdictMaxPerSubject = defaultVerdictMaxPerSubject
	}
	if s.VerdictDuplicates == 0 {
		s.VerdictDuplicates = defaultVerdictDuplicates
	}
	// The server refuses a dedup window longer than MaxAge.
	if s.VerdictMaxAge < 0 || s.VerdictMaxPerSubject < 0 || s.VerdictDuplicates < 0 || s.VerdictDuplicates > s.VerdictMaxAge {
		return s, fmt.Errorf("queue: streams: bad verdict limits (max age %s, per subject %d, dedup %s)",
			s.VerdictMaxAge, s.VerdictMaxPerSubject, s.VerdictDuplicates)
	}
	return s, nil
}

// intentsConfig is the intent stream's configuration with the given
// retention. New streams get limits retention: a work queue's ack removes
// the message, and the file store writes (and with SyncAlways fsyncs) a
// tombstone for every removal, a second serialized fsync per intent beside
// the publish. Under limits retention an ack writes nothing to the stream;
// the intake purges acknowledged intents in ranges instead
// (PurgeAcknowledgedIntents).
// The server refuses to change retention to or from work queue, so an
// older stream keeps its own.
func (c *Conn) intentsConfig(retention jetstream.RetentionPolicy) jetstream.StreamConfig {
	desc := "intents to settle, shared by every reconciled instance; acknowledged ones are purged in ranges"
	if retention == jetstream.WorkQueuePolicy {
		desc = "intents to settle; one shared work queue for every reconciled instance"
	}
	return jetstream.StreamConfig{
		Name:        IntentsStream,
		Description: desc,
		Subjects:    []string{c.subj.IntentsFilter()},
		Retention:   retention,
		Storage:     jetstream.FileStorage,
		Replicas:    c.streams.Replicas,
		Duplicates:  c.streams.IntentDuplicates,
		Discard:     jetstream.DiscardOld,
		// The server refuses a larger intent at publish, so its publisher
		// learns of it at once; JetStream counts the headers too.
		MaxMsgSize: MaxIntentBytes + IntentHeaderAllowance,
	}
}

func (c *Conn) streamConfigs() []jetstream.StreamConfig {
	s := c.streams
	return []jetstream.StreamConfig{c.intentsConfig(jetstream.LimitsPolicy), {
		Name:              VerdictsStream,
		Description:       "every verdict of every intent, newest last per subject",
		Subjects:          []string{c.subj.VerdictsFilter()},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          s.Replicas,
		MaxAge:            s.VerdictMaxAge,
		MaxMsgsPerSubject: s.VerdictMaxPerSubject,
		Duplicates:        s.VerdictDuplicates,
		Discard:           jetstream.DiscardOld,
		AllowDirect:       true,
		// First verdicts are published in atomic batches (verdictbatch.go).
		AllowAtomicPublish: true,
	}}
}

// EnsureStreams creates both streams or brings an existing one to this
// configuration. Every instance calls it at start, concurrently with
// others; incompatible differences (storage, a subject another stream
// owns) are reported, not forced. An existing intent stream keeps its
// retention (see intentsConfig); a work queue is logged as such.
func (c *Conn) EnsureStreams(ctx context.Context) error {
	for _, cfg := range c.streamConfigs() {
		st, err := c.ensureStream(ctx, cfg)
		if err != nil {
			return err
		}
		if cfg.Name == VerdictsStream {
			c.setVerdictStream(st)
		}
	}
	return nil
}

// errCodeNoPeers is JetStream's "no suitable peers for placement".
const errCodeNoPeers jetstream.ErrorCode = 10005

func (c *Conn) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	// Create is idempotent for an identical config; a differing one is
	// updated. Two instances racing on a missing stream both end here with
	// one create winning, so the loser's update is the only retry needed.
	// A cluster whose servers are up but whose meta leader has not yet
	// seen every peer refuses placement (no suitable peers); that passes,
	// so it is retried while ctx lasts rather than failing the start.
	delay := newRetryDelay(50*time.Millisecond, time.Second)
	var st jetstream.Stream
	var err error
	for {
		st, err = c.js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = c.updateStream(ctx, cfg)
		}
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeNoPeers || !delay.wait(ctx) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("queue: ensure stream %s on %v: %w", cfg.Name, cfg.Subjects, err)
	}
	return st, nil
}

// updateStream brings an existing stream to cfg, keeping the existing intent
// stream's retention: the server refuses to change it to or from work queue,
// and a fleet must not fail to start because its stream predates limits
// retention.
func (c *Conn) updateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if cfg.Name == IntentsStream {
		old, err := c.js.Stream(ctx, cfg.Name)
		if err != nil {
			return nil, err
		}
		if c.isParked(old.CachedInfo().Config) {
			return nil, ErrIntentsMoving
		}
		if r := old.CachedInfo().Config.Retention; r != cfg.Retention {
			cfg = c.intentsConfig(r)
		}
		if cfg.Retention == jetstream.WorkQueuePolicy {
			c.log.Warn("intent stream has work-queue retention: every acknowledged intent costs one fsync more than under limits retention; "+
				"to move to limits retention, wait until no intent is pending or unacknowledged, stop the fleet, delete the stream "+
				"(reconciled migrate-intents, or nats stream rm "+IntentsStream+") and start the fleet",
				zap.String("stream", cfg.Name))
		}
	}
	return c.js.UpdateStream(ctx, cfg)
}

// verdictStream returns the verdict stream handle, looking it up if
// EnsureStreams was not called on this connection (e.g. the ask command).
func (c *Conn) verdictStream(ctx context.Context) (jetstream.Stream, error) {
	c.mu.Lock()
	st := c.verdicts
	c.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := c.js.Stream(ctx, VerdictsStream)
	if err != nil {
		return nil, fmt.Errorf("queue: stream %s: %w", VerdictsStream, err)
	}
	c.setVerdictStream(st)
	return st, nil
}

// setVerdictStream caches the verdict stream's handle, and turns verdict
// batches on when its configuration, as the server returned it, allows
// them.
func (c *Conn) setVerdictStream(st jetstream.Stream) {
	c.mu.Lock()
	c.verdicts = st
	c.mu.Unlock()
	c.batches.on.Store(st.CachedInfo().Config.AllowAtomicPublish)
}
