package reconcile

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/reconciled/reconciled"
)

// Metrics counts what the service does. Each Metrics has its own
// prometheus.Registry rather than the global default one, so several
// services (several daemons in one test process) never collide. A nil
// *Metrics records nothing.
type Metrics struct {
	reg *prometheus.Registry

	intents      prometheus.Counter
	outcomes     *prometheus.CounterVec
	verdicts     *prometheus.CounterVec
	rejects      *prometheus.CounterVec
	redeliveries prometheus.Counter
	unreadable   prometheus.Counter
	rounds       prometheus.Counter
	imports      *prometheus.CounterVec
	decisions    prometheus.Histogram
	histories    *prometheus.CounterVec
	lastRound    *prometheus.GaugeVec
	// ledgerLabel maps a ledger to its label value (LabelLedgers).
	ledgerLabel atomic.Pointer[func(string) string]
}

// LabelLedgers sets how a ledger's id becomes the value of the ledger
// label: a daemon that reads any canister maps the ones nobody configured
// to one shared value, so that publishers cannot mint label sets. Only an
// identity-mapped ledger's sample is dropped when its follow-up ends; a
// shared one keeps the last round's time of any of its ledgers.
func (m *Metrics) LabelLedgers(f func(ledger string) string) {
	if m != nil {
		m.ledgerLabel.Store(&f)
	}
}

func (m *Metrics) label(ledger string) string {
	if f := m.ledgerLabel.Load(); f != nil {
		return (*f)(ledger)
	}
	return ledger
}

// MetricKey names one sample: a metric and at most one label.
type MetricKey struct {
	Name, Label, Value string
}

// Metric names.
const (
	MetricIntentsReceived   = "reconciled_intents_received_total"
	MetricIntentOutcomes    = "reconciled_intent_outcomes_total"
	MetricVerdicts          = "reconciled_verdicts_total"
	MetricRejects           = "reconciled_rejects_total"
	MetricRedeliveries      = "reconciled_intent_redeliveries_total"
	MetricUnreadableRetries = "reconciled_unreadable_retries_total"
	MetricFollowUpRounds    = "reconciled_followup_rounds_total"
	MetricImported          = "reconciled_verdicts_imported_total"
	MetricDecisionSeconds   = "reconciled_decision_seconds"
	MetricHistoryChanges    = "reconciled_history_changes_total"
	MetricFollowUpLastRound = "reconciled_followup_last_round_timestamp_seconds"
)

// MetricHelp describes each of the service's metrics.
var MetricHelp = map[string]string{
	MetricIntentsReceived:   "Intent deliveries handled, redeliveries included.",
	MetricIntentOutcomes:    "How intent deliveries were settled (ack, nak, term).",
	MetricVerdicts:          "Verdicts decided and stored by this instance, by status.",
	MetricRejects:           "Intents refused on the rejects subject, by code.",
	MetricRedeliveries:      "Intent deliveries that were not the first.",
	MetricUnreadableRetries: "Follow-up checks of intents whose history was unreadable.",
	MetricFollowUpRounds:    "Follow-up rounds over the watch list.",
	MetricImported:          "Verdicts read from the verdict stream into the local store, by result.",
	MetricDecisionSeconds:   "Time from taking an intent delivery to settling it (decided, stored and published, or given back).",
	MetricHistoryChanges:    "Certified tips that contradicted a ledger's verified chain (a new history under the same id): the cached chain was discarded and rebuilt, by reason.",
	MetricFollowUpLastRound: "When the follow-up of each ledger whose open intents this instance follows up last completed a round, or began its first (Unix seconds): its age is how late the follow-up is.",
}

// MetricGauges are the metrics of MetricHelp that are gauges; the others
// are counters but for the histogram MetricDecisionSeconds.
var MetricGauges = map[string]bool{MetricFollowUpLastRound: true}

// DecisionBuckets spans a verdict answered from the store (milliseconds)
// to a cold scan of a day's window on a slow ledger (minutes).
var DecisionBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// NewMetrics returns a zeroed metric set on a registry of its own.
func NewMetrics() *Metrics {
	counter := func(name string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: MetricHelp[name]})
	}
	vec := func(name, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: MetricHelp[name]}, []string{label})
	}
	m := &Metrics{
		reg:          prometheus.NewPedanticRegistry(),
		intents:      counter(MetricIntentsReceived),
		outcomes:     vec(MetricIntentOutcomes, "outcome"),
		verdicts:     vec(MetricVerdicts, "status"),
		rejects:      vec(MetricRejects, "code"),
		redeliveries: counter(MetricRedeliveries),
		unreadable:   counter(MetricUnreadableRetries),
		rounds:       counter(MetricFollowUpRounds),
		imports:      vec(MetricImported, "result"),
		decisions: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricDecisionSeconds,
			Help: MetricHelp[MetricDecisionSeconds], Buckets: DecisionBuckets}),
		histories: vec(MetricHistoryChanges, "reason"),
		lastRound: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricFollowUpLastRound,
			Help: MetricHelp[MetricFollowUpLastRound]}, []string{"ledger"}),
	}
	m.reg.MustRegister(m.intents, m.outcomes, m.verdicts, m.rejects, m.redeliveries, m.unreadable,
		m.rounds, m.imports, m.decisions, m.histories, m.lastRound)
	// The outcomes are few and known: exposing them at zero lets a rate()
	// over them start from the first scrape instead of the first event.
	for _, k := range []reconciled.OutcomeKind{reconciled.Ack, reconciled.Nak, reconciled.Term} {
		m.outcomes.WithLabelValues(k.String())
	}
	return m
}

// Registry is the registry the service's metrics are registered on; the
// daemon serves it (with its own collectors) on /metrics.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Snapshot returns every counter sample, sorted by name and label value.
// Histograms are left out: they are not one number.
func (m *Metrics) Snapshot() ([]MetricKey, []uint64) {
	if m == nil {
		return nil, nil
	}
	fams, err := m.reg.Gather()
	if err != nil {
		// Only collectors registered above are on this registry; a gather
		// error is a programming error in this file.
		panic("reconcile: gather service metrics: " + err.Error())
	}
	var keys []MetricKey
	var vals []uint64
	for _, f := range fams {
		if f.GetType() != dto.MetricType_COUNTER {
			continue
		}
		for _, s := range f.GetMetric() {
			k := MetricKey{Name: f.GetName()}
			if lp := s.GetLabel(); len(lp) > 0 {
				k.Label, k.Value = lp[0].GetName(), lp[0].GetValue()
			}
			keys = append(keys, k)
			vals = append(vals, uint64(s.GetCounter().GetValue()))
		}
	}
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool {
		a, b := keys[idx[i]], keys[idx[j]]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Value < b.Value
	})
	sk, sv := make([]MetricKey, len(keys)), make([]uint64, len(keys))
	for i, j := range idx {
		sk[i], sv[i] = keys[j], vals[j]
	}
	return sk, sv
}

// Get returns one counter: value is the label's value, "" for a counter
// without labels (tests, logs). A histogram's Get is its observation count.
func (m *Metrics) Get(name, value string) uint64 {
	if m == nil {
		return 0
	}
	fams, err := m.reg.Gather()
	if err != nil {
		panic("reconcile: gather service metrics: " + err.Error())
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			v := ""
			if lp := s.GetLabel(); len(lp) > 0 {
				v = lp[0].GetValue()
			}
			if v != value {
				continue
			}
			if h := s.GetHistogram(); h != nil {
				return h.GetSampleCount()
			}
			return uint64(s.GetCounter().GetValue())
		}
	}
	return 0
}

// Gauge returns one gauge sample: value is the label's value; 0 when the
// sample does not exist.
func (m *Metrics) Gauge(name, value string) float64 {
	if m == nil {
		return 0
	}
	fams, err := m.reg.Gather()
	if err != nil {
		panic("reconcile: gather service metrics: " + err.Error())
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if lp := s.GetLabel(); len(lp) > 0 && lp[0].GetValue() == value {
				return s.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// followUpDone records that the ledger's follow-up completed a round at t.
func (m *Metrics) followUpDone(ledger string, t time.Time) {
	if m != nil {
		m.lastRound.WithLabelValues(m.label(ledger)).Set(float64(t.UnixNano()) / 1e9)
	}
}

// followUpBegun records that this instance began following the ledger up
// at t, before its first round completed.
func (m *Metrics) followUpBegun(ledger string, t time.Time) { m.followUpDone(ledger, t) }

// followUpGone drops the ledger's sample once this instance no longer
// follows it up, so that no stale time stays exposed.
func (m *Metrics) followUpGone(ledger string) {
	if m != nil && m.label(ledger) == ledger {
		m.lastRound.DeleteLabelValues(ledger)
	}
}

func (m *Metrics) received() {
	if m != nil {
		m.intents.Inc()
	}
}

func (m *Metrics) outcome(o reconciled.Outcome) {
	if m != nil {
		m.outcomes.WithLabelValues(o.Kind.String()).Inc()
	}
}

func (m *Metrics) verdict(s reconciled.Status) {
	if m != nil {
		m.verdicts.WithLabelValues(string(s)).Inc()
	}
}

func (m *Metrics) reject(code string) {
	if m != nil {
		m.rejects.WithLabelValues(code).Inc()
	}
}

func (m *Metrics) unreadableRetry() {
	if m != nil {
		m.unreadable.Inc()
	}
}

func (m *Metrics) round() {
	if m != nil {
		m.rounds.Inc()
	}
}

func (m *Metrics) imported(result string) {
	if m != nil {
		m.imports.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) historyChanged(reason string) {
	if m != nil {
		m.histories.WithLabelValues(reason).Inc()
	}
}

// Redelivered counts a delivery that was not the first; the intake knows.
func (m *Metrics) Redelivered() {
	if m != nil {
		m.redeliveries.Inc()
	}
}

// Decided records how long one intent delivery took from being taken to
// being settled; the caller that takes deliveries measures it.
func (m *Metrics) Decided(took time.Duration) {
	if m != nil {
		m.decisions.Observe(took.Seconds())
	}
}
