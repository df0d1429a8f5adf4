package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/reconciled/reconciled/reconcile"
)

// IntakeConfig configures the shared intake consumer. Every instance uses
// the same Durable, so the consumer hands each intent to one of them.
type IntakeConfig struct {
	// Durable is the consumer name shared by all instances (default
	// "reconciled").
	Durable string
	// MaxDeliver bounds deliveries of one intent (default 10), so a poison
	// intent cannot circulate forever.
	MaxDeliver int
	// BackOff, when set, is the ack timeout of each delivery in turn (the
	// last repeats); it applies to missed acks only, not to Nak.
	BackOff []time.Duration
	// AckWait is the ack timeout without BackOff (default 30 s). The
	// heartbeat keeps a running handler's delivery alive regardless.
	AckWait time.Duration
	// MaxInFlight is the number of handlers running at once in this
	// instance (default 4). Messages are pulled only for free handlers, so
	// none waits in a local buffer while its ack timer runs.
	MaxInFlight int
	// MaxAckPending bounds unacknowledged intents across all instances
	// (0 = server default).
	MaxAckPending int
	// MaxMsgBytes is the largest intent body accepted (default 32 KiB, at
	// most MaxIntentBytes); larger ones are terminated, never handed to the
	// handler.
	MaxMsgBytes int
	// PullWait is how long one pull request waits for an intent (default
	// 1 s). Stopping can take this long: the last request is watched to
	// its end so that an intent it brings is given back, not stranded.
	PullWait time.Duration
	// PurgeEvery is the shortest time between two purges of acknowledged
	// intents from a limits-retention stream (default 1 s). A purge follows
	// settles and the intake's stop; in between, acknowledged intents stay
	// on disk, and a consumer recreated meanwhile would see them again.
	PurgeEvery time.Duration
}

// MaxIntentBytes bounds IntakeConfig.MaxMsgBytes. Every verdict carries
// its intent's body base64-encoded in a header (IntentHeaders), and
// JetStream refuses messages whose headers exceed 64 KiB: 45 KiB of body
// leave room for the encoding and the other headers.
const MaxIntentBytes = 45 << 10

const (
	defaultDurable     = "reconciled"
	defaultMaxDeliver  = 10
	defaultAckWait     = 30 * time.Second
	defaultMaxInFlight = 4
	defaultMaxMsgBytes = 32 << 10
	defaultPullWait    = time.Second
)

func (cfg IntakeConfig) withDefaults() (IntakeConfig, error) {
	if cfg.Durable == "" {
		cfg.Durable = defaultDurable
	}
	if err := ValidToken(cfg.Durable); err != nil {
		return cfg, fmt.Errorf("queue: intake durable %q: %w", cfg.Durable, err)
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = defaultMaxDeliver
	}
	if cfg.MaxDeliver < 1 {
		return cfg, fmt.Errorf("queue: intake: MaxDeliver %d must be bounded (>= 1)", cfg.MaxDeliver)
	}
	if len(cfg.BackOff) > cfg.MaxDeliver {
		return cfg, fmt.Errorf("queue: intake: %d back-off steps exceed MaxDeliver %d", len(cfg.BackOff), cfg.MaxDeliver)
	}
	for _, d := range cfg.BackOff {
		if d <= 0 {
			return cfg, fmt.Errorf("queue: intake: back-off step %s is not positive", d)
		}
	}
	if len(cfg.BackOff) > 0 {
		// The server replaces AckWait with the first step anyway; setting it
		// here keeps repeated updates from differing.
		cfg.AckWait = cfg.BackOff[0]
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = defaultAckWait
	}
	if cfg.AckWait < 0 {
		return cfg, fmt.Errorf("queue: intake: AckWait %s is negative", cfg.AckWait)
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = defaultMaxInFlight
	}
	if cfg.MaxInFlight < 0 || cfg.MaxAckPending < 0 {
		return cfg, fmt.Errorf("queue: intake: MaxInFlight %d / MaxAckPending %d negative", cfg.MaxInFlight, cfg.MaxAckPending)
	}
	if cfg.MaxMsgBytes == 0 {
		cfg.MaxMsgBytes = defaultMaxMsgBytes
	}
	if cfg.MaxMsgBytes < 0 || cfg.MaxMsgBytes > MaxIntentBytes {
		return cfg, fmt.Errorf("queue: intake: MaxMsgBytes %d not in 1..%d", cfg.MaxMsgBytes, MaxIntentBytes)
	}
	if cfg.PullWait == 0 {
		cfg.PullWait = defaultPullWait
	}
	if cfg.PullWait < 0 {
		return cfg, fmt.Errorf("queue: intake: PullWait %s is negative", cfg.PullWait)
	}
	if cfg.PurgeEvery == 0 {
		cfg.PurgeEvery = defaultPurgeEvery
	}
	if cfg.PurgeEvery < 0 {
		return cfg, fmt.Errorf("queue: intake: PurgeEvery %s is negative", cfg.PurgeEvery)
	}
	return cfg, nil
}

// heartbeatEvery is a third of the shortest ack timeout any delivery can
// get, so two heartbeats may be lost before the server redelivers.
func (cfg IntakeConfig) heartbeatEvery() time.Duration {
	shortest := cfg.AckWait
	for _, d := range cfg.BackOff {
		shortest = min(shortest, d)
	}
	return max(shortest/3, time.Millisecond)
}

func (cfg IntakeConfig) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		Description:   "intake shared by every reconciled instance",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    cfg.MaxDeliver,
		BackOff:       cfg.BackOff,
		MaxAckPending: cfg.MaxAckPending,
	}
}

// Handler processes one delivery. It must settle it (Ack, Nak or Term); a
// handler that returns without doing so gets its delivery Nak'd. ctx is
// cancelled only when Intake.Wait's deadline passes: the handler should then
// Nak and return.
type Handler func(ctx context.Context, d *Delivery)

// Intake is a running intake consumer.
type Intake struct {
	conn       *Conn
	cfg        IntakeConfig
	handler    Handler
	cons       jetstream.Consumer
	log        *zap.Logger // the connection's, naming the consumer
	stopPull   context.CancelFunc
	pullCtx    context.Context
	handlerCtx context.Context
	abort      context.CancelFunc
	pulling    sync.WaitGroup
	handlers   sync.WaitGroup
	slots      chan struct{}
	// acked holds one signal that an intent was settled since the last
	// purge.
	acked   chan struct{}
	purging sync.WaitGroup
	// heldWarned is when another consumer holding the purge was last
	// warned about (purge loop only).
	heldWarned time.Time
}

// ConsumeIntents creates or updates the shared durable consumer and starts
// pulling intents into handler. Pulling stops when ctx ends or Stop is
// called; running handlers continue until they return (see Wait).
func (c *Conn) ConsumeIntents(ctx context.Context, cfg IntakeConfig, handler Handler) (*Intake, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cons, err := c.js.CreateOrUpdateConsumer(ctx, IntentsStream, cfg.consumerConfig())
	if err != nil {
		return nil, fmt.Errorf("queue: intake consumer %s on %s: %w", cfg.Durable, IntentsStream, err)
	}
	pullCtx, stopPull := context.WithCancel(ctx)
	handlerCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	in := &Intake{
		conn: c, cfg: cfg, handler: handler, cons: cons,
		log:     c.log.With(zap.String("consumer", cfg.Durable)),
		pullCtx: pullCtx, stopPull: stopPull,
		handlerCtx: handlerCtx, abort: abort,
		slots: make(chan struct{}, cfg.MaxInFlight),
		acked: make(chan struct{}, 1),
	}
	// A first purge removes what instances before this one acknowledged
	// and could not purge (e.g. killed right after their last ack).
	in.purge(ctx)
	in.pulling.Add(1)
	go in.pull()
	in.purging.Add(1)
	go in.purgeLoop(handlerCtx)
	return in, nil
}

// Stop stops pulling new intents. Running handlers are not interrupted.
func (in *Intake) Stop() { in.stopPull() }

// Wait returns when pulling has stopped (Stop or the consume context) and
// every handler has returned, after a last purge of acknowledged intents.
// If ctx ends first, the handlers' context is cancelled so they Nak and
// return, Wait waits for that, and returns ctx's error without purging.
// This is the SIGTERM drain: Stop, then Wait(grace).
func (in *Intake) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		in.pulling.Wait()
		in.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		in.abort()
		in.purging.Wait()
		in.purge(ctx)
		return nil
	case <-ctx.Done():
		in.stopPull()
		in.abort()
		<-done
		in.purging.Wait()
		return fmt.Errorf("queue: intake drain: %w", ctx.Err())
	}
}

func (in *Intake) pull() {
	defer in.pulling.Done()
	log := in.log
	retry := newRetryDelay(100*time.Millisecond, 5*time.Second)
	busy := false
	for {
		select {
		case in.slots <- struct{}{}:
		case <-in.pullCtx.Done():
			return
		}
		// While intents are coming, one request asks for as many as there
		// are free handlers and takes only those already waiting: a burst
		// is drained in requests of many messages, not a round trip per
		// intent, and no request is left open on the server for more
		// (after a stop it would take the very intents the stop gives
		// back). When none is waiting, a single-message request waits for
		// the next.
		n, got := 1, 0
		var err error
		if busy {
			n += in.takeFreeSlots()
			got, err = in.fetch(n, false, log)
			if got == 0 && in.pullCtx.Err() == nil {
				// E.g. the consumer's ack-pending limit, which a waiting
				// request waits out: the request below reports whatever
				// persists.
				err = nil
			}
		}
		if err == nil && got == 0 {
			for range n - 1 {
				<-in.slots
			}
			n = 1
			got, err = in.fetch(1, true, log)
		}
		busy = got > 0
		for range n - got {
			<-in.slots
		}
		if err != nil {
			if in.pullCtx.Err() != nil {
				return
			}
			if in.conn.nc.IsClosed() {
				log.Error("intake stopped: connection closed", zap.Error(err))
				return
			}
			log.Warn("intake pull failed", zap.Error(err))
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
				in.recreate(log)
			}
			if !retry.wait(in.pullCtx) {
				return
			}
			continue
		}
		retry.reset()
	}
}

// takeFreeSlots takes every handler slot that is free right now, without
// waiting, and returns how many it took.
func (in *Intake) takeFreeSlots() int {
	for n := 0; ; n++ {
		select {
		case in.slots <- struct{}{}:
		default:
			return n
		}
	}
}

// fetch asks for up to n messages, waiting up to PullWait for them when
// wait is set and taking only those already waiting otherwise, and starts a
// handler (on one of the n slots taken) for each message as it arrives; it
// returns how many came. When the intake stops meanwhile, the open pull
// request can still bring messages (the server only learns of the stop
// later); a watcher gives such messages back at once instead of leaving
// them to their ack timeout, and Wait waits for the watcher.
func (in *Intake) fetch(n int, wait bool, log *zap.Logger) (int, error) {
	var batch jetstream.MessageBatch
	var err error
	if wait {
		batch, err = in.cons.Fetch(n, jetstream.FetchMaxWait(in.cfg.PullWait))
	} else {
		batch, err = in.cons.FetchNoWait(n)
	}
	if err != nil {
		return 0, err
	}
	got := 0
	for {
		select {
		case msg, ok := <-batch.Messages():
			if !ok {
				return got, batch.Error()
			}
			got++
			in.handlers.Add(1)
			go func() {
				defer in.handlers.Done()
				defer func() { <-in.slots }()
				in.deliver(msg, log)
			}()
		case <-in.pullCtx.Done():
			in.handlers.Add(1)
			go func() {
				defer in.handlers.Done()
				for msg := range batch.Messages() {
					if err := msg.Nak(); err != nil {
						log.Warn("give back intent on stop", zap.Error(err))
					}
				}
			}()
			return got, in.pullCtx.Err()
		}
	}
}

func (in *Intake) recreate(log *zap.Logger) {
	cons, err := in.conn.js.CreateOrUpdateConsumer(in.pullCtx, IntentsStream, in.cfg.consumerConfig())
	if err != nil {
		log.Warn("intake consumer recreate failed", zap.Error(err))
		return
	}
	in.cons = cons
}

func (in *Intake) deliver(msg jetstream.Msg, log *zap.Logger) {
	d, err := newDelivery(msg, in.cfg, log)
	if err != nil {
		// Without metadata the message cannot be acked either; the server
		// redelivers it up to MaxDeliver.
		log.Error("intake message without JetStream metadata", zap.String("subject", msg.Subject()), zap.Error(err))
		return
	}
	d.onSettled = in.settled
	if len(d.Data) > in.cfg.MaxMsgBytes {
		reason := fmt.Sprintf("intent of %d bytes exceeds %d", len(d.Data), in.cfg.MaxMsgBytes)
		log.Error("intake message too large, terminated",
			zap.String("subject", d.Subject), zap.String("msg_id", d.MsgID),
			zap.Int("bytes", len(d.Data)), zap.Int("max_bytes", in.cfg.MaxMsgBytes))
		if err := d.Term(reason); err != nil {
			log.Warn("terminate oversized intent", zap.Error(err))
		}
		return
	}
	d.stopping = func() bool { return in.pullCtx.Err() != nil }
	d.startHeartbeat()
	defer d.stopHeartbeat()
	in.handler(in.handlerCtx, d)
	if d.settledState() {
		return
	}
	// Stopping: return it at once so another instance takes it. Otherwise
	// a handler bug: back off as for a missed ack, bounded by MaxDeliver.
	var delay time.Duration
	if in.pullCtx.Err() == nil {
		delay = in.cfg.ackTimeout(d.NumDelivered)
		log.Warn("intake handler returned without settling; nak", zap.String("msg_id", d.MsgID),
			zap.Uint64("delivered", d.NumDelivered), zap.Duration("delay", delay))
	}
	if err := d.Nak(delay); err != nil {
		log.Warn("nak unsettled intent", zap.String("msg_id", d.MsgID), zap.Error(err))
	}
}

// ackTimeout is the server's ack timeout for the n-th delivery.
func (cfg IntakeConfig) ackTimeout(n uint64) time.Duration {
	if len(cfg.BackOff) == 0 {
		return cfg.AckWait
	}
	return cfg.BackOff[min(max(n, 1), uint64(len(cfg.BackOff)))-1]
}

// Delivery is one delivery of an intent message.
type Delivery struct {
	// Subject is <prefix>.intents.<canister_id>.
	Subject string
	Data    []byte
	// MsgID is the Nats-Msg-Id header as published: IntentMsgID, i.e.
	// "<intent_id>:<intent_hash>".
	MsgID string
	// NumDelivered counts deliveries of this message, this one included.
	NumDelivered uint64
	// StreamSeq is the message's sequence in the intents stream.
	StreamSeq uint64
	// MaxDeliver is the consumer's delivery bound.
	MaxDeliver int

	msg   jetstream.Msg
	every time.Duration
	log   *zap.Logger
	// stopping reports that the intake is stopping (nil: never).
	stopping func() bool
	// onSettled tells the intake that the delivery was settled (nil: no
	// one to tell).
	onSettled func()

	mu      sync.Mutex
	settled bool
	hb      *time.Timer
}

func newDelivery(msg jetstream.Msg, cfg IntakeConfig, log *zap.Logger) (*Delivery, error) {
	md, err := msg.Metadata()
	if err != nil {
		return nil, err
	}
	return &Delivery{
		Subject:      msg.Subject(),
		Data:         msg.Data(),
		MsgID:        msg.Headers().Get(jetstream.MsgIDHeader),
		NumDelivered: md.NumDelivered,
		StreamSeq:    md.Sequence.Stream,
		MaxDeliver:   cfg.MaxDeliver,
		msg:          msg,
		every:        cfg.heartbeatEvery(),
		log:          log,
	}, nil
}

// IntentID is the intent id part of MsgID (intent ids hold no ':').
func (d *Delivery) IntentID() string {
	id, _, _ := strings.Cut(d.MsgID, ":")
	return id
}

// CanisterID is the last token of the subject.
func (d *Delivery) CanisterID() string {
	return d.Subject[strings.LastIndexByte(d.Subject, '.')+1:]
}

// LastAttempt reports whether the server will not deliver this message again
// if it is not acked: the handler should settle it for good (e.g. publish an
// unreadable verdict and Ack, or Term).
func (d *Delivery) LastAttempt() bool {
	return d.NumDelivered >= uint64(d.MaxDeliver)
}

func (d *Delivery) startHeartbeat() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hb = time.AfterFunc(d.every, d.beat)
}

func (d *Delivery) beat() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled || d.hb == nil {
		return
	}
	if err := d.msg.InProgress(); err != nil {
		d.log.Warn("intake heartbeat failed", zap.String("msg_id", d.MsgID), zap.Error(err))
	}
	d.hb.Reset(d.every)
}

func (d *Delivery) stopHeartbeat() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hb != nil {
		d.hb.Stop()
		d.hb = nil
	}
}

func (d *Delivery) settledState() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.settled
}

// InProgress resets the server's ack timer. The intake already sends it
// periodically while the handler runs; calling it is only useful for a
// delivery handed to another goroutine after the handler returned.
func (d *Delivery) InProgress() error {
	if err := d.msg.InProgress(); err != nil {
		return fmt.Errorf("queue: in-progress %s: %w", d.MsgID, err)
	}
	return nil
}

// settle marks the delivery settled while op runs, so the heartbeat stops
// touching it; a failed op un-settles it so the caller can try again.
func (d *Delivery) settle(what string, op func() error) error {
	d.mu.Lock()
	if d.settled {
		d.mu.Unlock()
		return fmt.Errorf("queue: %s %s: already settled", what, d.MsgID)
	}
	d.settled = true
	d.mu.Unlock()
	if err := op(); err != nil {
		d.mu.Lock()
		d.settled = false
		d.mu.Unlock()
		return fmt.Errorf("queue: %s %s: %w", what, d.MsgID, err)
	}
	if d.onSettled != nil {
		d.onSettled()
	}
	return nil
}

// Ack settles the intent for good (a work-queue stream removes it; under
// limits retention the intake purges it later) and waits for the server to
// confirm, so a verdict is never followed by a redelivery the caller
// believed impossible.
func (d *Delivery) Ack(ctx context.Context) error {
	return d.settle("ack", func() error { return d.msg.DoubleAck(ctx) })
}

// Nak asks for redelivery after delay (0: at once, possibly to another
// instance). It counts towards MaxDeliver.
func (d *Delivery) Nak(delay time.Duration) error {
	return d.settle("nak", func() error {
		if delay <= 0 {
			return d.msg.Nak()
		}
		return d.msg.NakWithDelay(delay)
	})
}

// Term removes the intent from further delivery for good; reason appears in
// the server's termination advisory.
func (d *Delivery) Term(reason string) error {
	return d.settle("term", func() error { return d.msg.TermWithReason(reason) })
}

// Settle ends the delivery as the service's outcome says: Ack (waiting for
// the server's confirmation), Term, or Nak after the outcome's delay. While
// the intake is stopping, a Nak is immediate whatever its delay: the
// intent goes straight to another instance (or to this one restarted)
// instead of waiting out a delay meant for a live instance's retry.
func (d *Delivery) Settle(ctx context.Context, o reconcile.Outcome) error {
	switch o.Kind {
	case reconcile.Ack:
		return d.Ack(context.WithoutCancel(ctx))
	case reconcile.Term:
		return d.Term(o.Reason)
	}
	delay := o.Delay
	if ctx.Err() != nil || (d.stopping != nil && d.stopping()) {
		delay = 0
	} else if d.LastAttempt() {
		// The server will not deliver it again: say so loudly, the tool
		// layer must re-publish it.
		d.log.Error("intent given up after its last delivery", zap.String("msg_id", d.MsgID),
			zap.Uint64("delivered", d.NumDelivered), zap.String("reason", o.Reason))
	}
	return d.Nak(delay)
}
