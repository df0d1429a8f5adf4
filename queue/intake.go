package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/reconciled/reconciled"
)

// IntakeConfig configures the shared intake consumer. Every instance uses
// the same Durable, so the consumer hands each intent to one of them.
type IntakeConfig struct {
	// Durable is the consumer name shared by all instances (default
	// "reconciled").
	Durable string
	// BackOff, when set, is the ack timeout of each delivery in turn (the
	// last repeats); it applies to missed acks only, not to Nak.
	BackOff []time.Duration
	// AckWait is the ack timeout without BackOff (default 10 s). The
	// heartbeat keeps a running handler's delivery alive regardless. It is
	// also what a delivery this instance never saw costs (a killed
	// instance's, or one the client dropped on the way): under load some
	// redeliveries that a Nak delay made due are lost that way, and come
	// back only after it, so it bounds how late a recovered intent is.
	AckWait time.Duration
	// MaxInFlight is the number of handlers running at once in this
	// instance (default 4). Messages are pulled only for free handlers, so
	// none waits in a local buffer while its ack timer runs.
	MaxInFlight int
	// MaxAckPending bounds unacknowledged intents across all instances
	// (0 = server default).
	MaxAckPending int
	// MaxMsgBytes is the largest intent body accepted (default and at
	// most MaxIntentBytes); a larger one is never handed to the handler: it
	// is refused with RejectTooLarge on its rejects subject, when its id is
	// readable, and terminated.
	MaxMsgBytes int
	// RetryMax caps the delay before an intent given back after a failure
	// is delivered again (default 10 s). Deliveries are never bounded: an
	// intent whose handling fails (the verdict stream, the store or NATS
	// down) is retried until the failure ends, with the delay the handler
	// asks for doubled at each delivery up to RetryMax. So once a fault
	// ends, every intent waiting on it is retried within RetryMax.
	RetryMax time.Duration
	// StuckAfter is the number of deliveries after which an intent given
	// back for a failure is reported (default 5): a warning naming the
	// intent and the failing step, at most once a minute per intent, and
	// the metrics MetricStuckRetries and MetricStuckIntents.
	StuckAfter int
	// Metrics, when set, registers the intake's metrics.
	Metrics prometheus.Registerer
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

// MaxIntentBytes is the fleet's one limit on an intent's body: publishers
// refuse larger bodies (PublishIntent, the ask command, the TypeScript
// client), the intent stream refuses them at publish (its max_msg_size is
// this plus IntentHeaderAllowance), and the intake refuses, with a reject,
// any that still arrive. Every verdict carries its intent's body
// base64-encoded in a header (IntentHeaders), and JetStream refuses
// messages whose headers exceed 64 KiB: 32 KiB of body encode to under
// 44 KiB, leaving room for the other headers.
const MaxIntentBytes = 32 << 10

// IntentHeaderAllowance is the room the intent stream's max_msg_size
// leaves for an intent's headers, which JetStream counts with the body:
// Nats-Msg-Id (an id of up to 256 bytes, ':', a 64-digit hash) and
// Nats-Expected-Stream take under 400 bytes.
const IntentHeaderAllowance = 1 << 10

// RejectTooLarge is the reject code of an intent over the size limit (the
// daemon's parser uses the same code).
const RejectTooLarge = "E_TOO_LARGE"

const (
	defaultDurable     = "reconciled"
	defaultAckWait     = 10 * time.Second
	defaultMaxInFlight = 4
	defaultPullWait    = time.Second
	defaultRetryMax    = 10 * time.Second
	defaultStuckAfter  = 5
)

func (cfg IntakeConfig) withDefaults() (IntakeConfig, error) {
	if cfg.Durable == "" {
		cfg.Durable = defaultDurable
	}
	if err := ValidToken(cfg.Durable); err != nil {
		return cfg, fmt.Errorf("queue: intake durable %q: %w", cfg.Durable, err)
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
		cfg.MaxMsgBytes = MaxIntentBytes
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
	if cfg.RetryMax == 0 {
		cfg.RetryMax = defaultRetryMax
	}
	if cfg.RetryMax < 0 {
		return cfg, fmt.Errorf("queue: intake: RetryMax %s is negative", cfg.RetryMax)
	}
	if cfg.StuckAfter == 0 {
		cfg.StuckAfter = defaultStuckAfter
	}
	if cfg.StuckAfter < 0 {
		return cfg, fmt.Errorf("queue: intake: StuckAfter %d is negative", cfg.StuckAfter)
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
		// Unbounded: a bound would end, unsettled, an intent whose
		// handling failed for a reason of the daemon's own (the purge then
		// deletes it); bad input is terminated or answered instead.
		MaxDeliver:    -1,
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
	// stuck reports intents that keep being given back.
	stuck *stuckIntents
}

// ConsumeIntents creates or updates the shared durable consumer and starts
// pulling intents into handler. Pulling stops when ctx ends or Stop is
// called; running handlers continue until they return (see Wait).
func (c *Conn) ConsumeIntents(ctx context.Context, cfg IntakeConfig, handler Handler) (*Intake, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	stuck := newStuckIntents(cfg)
	if cfg.Metrics != nil {
		if err := stuck.register(cfg.Metrics); err != nil {
			return nil, fmt.Errorf("queue: intake metrics: %w", err)
		}
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
		stuck: stuck,
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
		// delivers it again after its ack timeout.
		log.Error("intake message without JetStream metadata", zap.String("subject", msg.Subject()), zap.Error(err))
		return
	}
	d.onSettled = in.settled
	d.stuck = in.stuck
	if len(d.Data) > in.cfg.MaxMsgBytes {
		in.refuseOversized(d, log)
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
	// a handler bug: back off as for a missed ack, at most RetryMax.
	var delay time.Duration
	if in.pullCtx.Err() == nil {
		delay = min(in.cfg.ackTimeout(d.NumDelivered), in.cfg.RetryMax)
		log.Warn("intake handler returned without settling; nak", zap.String("msg_id", d.MsgID),
			zap.Uint64("delivered", d.NumDelivered), zap.Duration("delay", delay))
		d.stuck.failed(d, stepUnsettled, "handler returned without settling", delay)
	}
	if err := d.Nak(delay); err != nil {
		log.Warn("nak unsettled intent", zap.String("msg_id", d.MsgID), zap.Error(err))
	}
}

// refuseOversized answers an intent over MaxMsgBytes without handling it:
// a reject on its id when the id is readable, then Term. The stream
// refuses such intents at publish; this one came through a stream made
// without that limit, or an instance with a lower one. When the reject
// cannot be published the intent is given back: its publisher would
// otherwise wait for an answer that never comes.
func (in *Intake) refuseOversized(d *Delivery, log *zap.Logger) {
	in.stuck.oversized.Inc()
	reason := fmt.Sprintf("intent of %d bytes exceeds %d", len(d.Data), in.cfg.MaxMsgBytes)
	id := d.IntentID()
	fields := []zap.Field{zap.String("subject", d.Subject), zap.String("msg_id", d.MsgID),
		zap.Int("bytes", len(d.Data)), zap.Int("max_bytes", in.cfg.MaxMsgBytes)}
	if reconciled.ValidIntentID(id) {
		msg := fmt.Sprintf("intent of %d bytes is larger than the limit of %d bytes", len(d.Data), in.cfg.MaxMsgBytes)
		if err := in.conn.PublishReject(in.handlerCtx, id, RejectTooLarge, msg); err != nil {
			delay := d.retryDelay(time.Second)
			log.Warn("reject of an oversized intent not published; given back", append(fields, zap.Duration("delay", delay), zap.Error(err))...)
			d.stuck.failed(d, "publish reject", err.Error(), delay)
			if err := d.Nak(delay); err != nil {
				log.Warn("nak oversized intent", zap.String("msg_id", d.MsgID), zap.Error(err))
			}
			return
		}
		fields = append(fields, zap.String("intent_id", id), zap.String("rejected", RejectTooLarge))
	}
	log.Warn("intake message too large, terminated", fields...)
	if err := d.Term(reason); err != nil {
		log.Warn("terminate oversized intent", zap.String("msg_id", d.MsgID), zap.Error(err))
	}
}

// ackTimeout is the server's ack timeout for the n-th delivery.
func (cfg IntakeConfig) ackTimeout(n uint64) time.Duration {
	if len(cfg.BackOff) == 0 {
		return cfg.AckWait
	}
	return cfg.BackOff[min(max(n, 1), uint64(len(cfg.BackOff)))-1]
}

// retryDelay is the delay before the next delivery of an intent given back
// after a failure: base (what the handler asked for) doubled at each
// delivery after the first, at most RetryMax. A base of zero stays zero.
func (d *Delivery) retryDelay(base time.Duration) time.Duration {
	if base <= 0 {
		return 0
	}
	if base >= d.retryMax {
		return d.retryMax
	}
	delay := base
	for n := uint64(1); n < d.NumDelivered && delay < d.retryMax; n++ {
		delay *= 2
	}
	return min(delay, d.retryMax)
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

	msg      jetstream.Msg
	every    time.Duration
	retryMax time.Duration
	log      *zap.Logger
	// stuck reports an intent that keeps being given back (nil: nobody).
	stuck *stuckIntents
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
		msg:          msg,
		every:        cfg.heartbeatEvery(),
		retryMax:     cfg.RetryMax,
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
	if err := d.settle("ack", func() error { return d.msg.DoubleAck(ctx) }); err != nil {
		return err
	}
	d.stuck.settled(d)
	return nil
}

// Nak asks for redelivery after delay (0: at once, possibly to another
// instance). Deliveries are not bounded: a Nak'd intent always comes back.
func (d *Delivery) Nak(delay time.Duration) error {
	return d.settle("nak", func() error {
		if delay <= 0 {
			return d.msg.Nak()
		}
		return d.msg.NakWithDelay(delay)
	})
}

// Term removes the intent from further delivery for good; reason appears in
// the server's termination advisory. Only for bad input: the purge
// removes a terminated intent like an acknowledged one.
func (d *Delivery) Term(reason string) error {
	if err := d.settle("term", func() error { return d.msg.TermWithReason(reason) }); err != nil {
		return err
	}
	d.stuck.settled(d)
	return nil
}

// Settle ends the delivery as the service's outcome says: Ack (waiting for
// the server's confirmation), Term, or Nak. A Nak is a failure to retry: its
// delay is the outcome's, doubled at each delivery after the first, at most
// IntakeConfig.RetryMax, and an intent given back more than StuckAfter times
// is reported. While the intake is stopping, a Nak is immediate whatever its
// delay: the intent goes straight to another instance (or to this one
// restarted) instead of waiting out a delay meant for a live instance's
// retry.
func (d *Delivery) Settle(ctx context.Context, o reconciled.Outcome) error {
	switch o.Kind {
	case reconciled.Ack:
		return d.Ack(context.WithoutCancel(ctx))
	case reconciled.Term:
		return d.Term(o.Reason)
	}
	delay := d.retryDelay(o.Delay)
	if ctx.Err() != nil || (d.stopping != nil && d.stopping()) {
		delay = 0
	} else {
		d.stuck.failed(d, failingStep(o.Reason), o.Reason, delay)
	}
	return d.Nak(delay)
}
