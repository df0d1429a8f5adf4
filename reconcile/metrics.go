package reconcile

import (
	"sort"
	"sync"
)

// Metrics counts what the service does, for the daemon's /metrics. It is a
// plain counter set rather than Prometheus collectors because the module's
// dependency set does not carry client_golang's transitive modules; the
// daemon renders these in the Prometheus text format. A nil *Metrics
// records nothing.
type Metrics struct {
	mu       sync.Mutex
	counters map[MetricKey]uint64
}

// MetricKey names one counter: a metric and at most one label.
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
)

// MetricHelp describes each counter.
var MetricHelp = map[string]string{
	MetricIntentsReceived:   "Intent deliveries handled, redeliveries included.",
	MetricIntentOutcomes:    "How intent deliveries were settled (ack, nak, term).",
	MetricVerdicts:          "Verdicts decided and stored by this instance, by status.",
	MetricRejects:           "Intents refused on the rejects subject, by code.",
	MetricRedeliveries:      "Intent deliveries that were not the first.",
	MetricUnreadableRetries: "Follow-up checks of intents whose history was unreadable.",
	MetricFollowUpRounds:    "Follow-up rounds over the watch list.",
	MetricImported:          "Verdicts read from the verdict stream into the local store, by result.",
}

// NewMetrics returns an empty counter set.
func NewMetrics() *Metrics { return &Metrics{counters: map[MetricKey]uint64{}} }

func (m *Metrics) add(name, label, value string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.counters[MetricKey{name, label, value}]++
	m.mu.Unlock()
}

// Snapshot returns every counter, sorted by key.
func (m *Metrics) Snapshot() ([]MetricKey, []uint64) {
	if m == nil {
		return nil, nil
	}
	m.mu.Lock()
	keys := make([]MetricKey, 0, len(m.counters))
	for k := range m.counters {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Value < b.Value
	})
	vals := make([]uint64, len(keys))
	m.mu.Lock()
	for i, k := range keys {
		vals[i] = m.counters[k]
	}
	m.mu.Unlock()
	return keys, vals
}

// Get returns one counter (tests, logs).
func (m *Metrics) Get(name, value string) uint64 {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.counters {
		if k.Name == name && k.Value == value {
			return v
		}
	}
	return 0
}

func (m *Metrics) received()              { m.add(MetricIntentsReceived, "", "") }
func (m *Metrics) outcome(o Outcome)      { m.add(MetricIntentOutcomes, "outcome", o.Kind.String()) }
func (m *Metrics) verdict(s Status)       { m.add(MetricVerdicts, "status", string(s)) }
func (m *Metrics) reject(code string)     { m.add(MetricRejects, "code", code) }
func (m *Metrics) unreadableRetry()       { m.add(MetricUnreadableRetries, "", "") }
func (m *Metrics) round()                 { m.add(MetricFollowUpRounds, "", "") }
func (m *Metrics) imported(result string) { m.add(MetricImported, "result", result) }

// Redelivered counts a delivery that was not the first; the intake knows.
func (m *Metrics) Redelivered() { m.add(MetricRedeliveries, "", "") }
