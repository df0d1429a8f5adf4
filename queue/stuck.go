package queue

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Metric names of the intake.
const (
	// MetricStuckRetries counts deliveries given back for a failure after
	// an intent was delivered more than StuckAfter times (the warning names
	// the intent and the failing step).
	MetricStuckRetries = "reconciled_intent_stuck_retries_total"
	// MetricStuckIntents is the number of intents this instance last gave
	// back for a failure after more than StuckAfter deliveries, and has not
	// seen settled since (forgotten after a few minutes without a delivery
	// here: another instance may have settled it).
	MetricStuckIntents = "reconciled_intents_stuck"
	// MetricOversized counts intent deliveries over the size limit.
	MetricOversized = "reconciled_intents_oversized_total"
)

// stepUnsettled is the failing step of a handler that returned without
// settling its delivery.
const stepUnsettled = "settle"

// stuckWarnEvery is the shortest time between two warnings about one intent.
var stuckWarnEvery = time.Minute

// stuckIntents reports intents that keep being given back. An intent is
// reported by the instance it is delivered to; its entry here is dropped
// when this instance settles it, or forgotten once it has not been
// delivered here for forgetAfter.
type stuckIntents struct {
	after       uint64
	forgetAfter time.Duration
	retries     prometheus.Counter
	oversized   prometheus.Counter
	gauge       prometheus.GaugeFunc

	mu sync.Mutex
	// intents maps an intent's message id to its report.
	intents map[string]*stuckIntent
}

type stuckIntent struct {
	first, seen, warned time.Time
}

func newStuckIntents(cfg IntakeConfig) *stuckIntents {
	s := &stuckIntents{
		after:       uint64(cfg.StuckAfter),
		forgetAfter: max(3*cfg.RetryMax, 5*time.Minute),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricStuckRetries,
			Help: "Intent deliveries given back for a failure after more than the reporting threshold of deliveries."}),
		oversized: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricOversized,
			Help: "Intent deliveries over the size limit, refused without handling."}),
		intents: map[string]*stuckIntent{},
	}
	s.gauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricStuckIntents,
		Help: "Intents this instance last gave back for a failure after more than the reporting threshold of deliveries, not settled since."},
		func() float64 { return float64(s.count(time.Now())) })
	return s
}

func (s *stuckIntents) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{s.retries, s.oversized, s.gauge} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// failed records that d is given back for a failure at step (why: the
// error), to be delivered again after delay; past the threshold it counts
// and warns, at most once per stuckWarnEvery for one intent.
func (s *stuckIntents) failed(d *Delivery, step, why string, delay time.Duration) {
	if s == nil || d.NumDelivered <= s.after {
		return
	}
	s.retries.Inc()
	now := time.Now()
	s.mu.Lock()
	s.forget(now)
	e := s.intents[d.MsgID]
	if e == nil {
		e = &stuckIntent{first: now}
		s.intents[d.MsgID] = e
	}
	e.seen = now
	warn := e.warned.IsZero() || now.Sub(e.warned) >= stuckWarnEvery
	if warn {
		e.warned = now
	}
	s.mu.Unlock()
	if warn {
		d.log.Warn("intent keeps failing; retried until it succeeds",
			zap.String("intent_id", d.IntentID()), zap.String("msg_id", d.MsgID),
			zap.Uint64("delivered", d.NumDelivered), zap.String("step", step), zap.String("error", why),
			zap.Duration("retry_in", delay))
	}
}

// settled drops d's intent: this instance settled it.
func (s *stuckIntents) settled(d *Delivery) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.intents[d.MsgID]; ok {
		delete(s.intents, d.MsgID)
		d.log.Info("intent settled after failing", zap.String("intent_id", d.IntentID()), zap.String("msg_id", d.MsgID),
			zap.Uint64("delivered", d.NumDelivered), zap.Duration("reported_for", time.Since(e.first)))
	}
}

func (s *stuckIntents) count(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(now)
	return len(s.intents)
}

// forget drops the intents not delivered here for forgetAfter (s.mu held).
func (s *stuckIntents) forget(now time.Time) {
	for id, e := range s.intents {
		if now.Sub(e.seen) >= s.forgetAfter {
			delete(s.intents, id)
		}
	}
}

// failingStep is the step of a Nak's reason, "<step>: <error>" as the
// service gives it.
func failingStep(reason string) string {
	step, _, ok := strings.Cut(reason, ": ")
	if !ok || step == "" || len(step) > 64 {
		return "other"
	}
	return step
}
