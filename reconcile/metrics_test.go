package reconcile

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/reconciled/reconciled"
)

func TestMetricsCount(t *testing.T) {
	m := NewMetrics()
	m.received()
	m.received()
	m.outcome(reconciled.Outcome{Kind: reconciled.Ack})
	m.outcome(reconciled.Outcome{Kind: reconciled.Nak})
	m.outcome(reconciled.Outcome{Kind: reconciled.Ack})
	m.verdict(reconciled.StatusFound)
	m.verdict(reconciled.StatusNotYet)
	m.verdict(reconciled.StatusFound)
	m.reject("E_INTENT_CONFLICT")
	m.unreadableRetry()
	m.round()
	m.imported("stored")
	m.Redelivered()
	m.Decided(30 * time.Millisecond)
	m.Decided(3 * time.Second)
	m.followUpDone("ledger-a", time.Unix(1_800_000_000, 500_000_000))
	m.followUpDone("ledger-b", time.Unix(1, 0))
	m.followUpGone("ledger-b")

	for _, c := range []struct {
		name, value string
		want        uint64
	}{
		{MetricIntentsReceived, "", 2},
		{MetricIntentOutcomes, "ack", 2},
		{MetricIntentOutcomes, "nak", 1},
		{MetricIntentOutcomes, "term", 0},
		{MetricVerdicts, "found", 2},
		{MetricVerdicts, "not_yet", 1},
		{MetricVerdicts, "absent", 0},
		{MetricRejects, "E_INTENT_CONFLICT", 1},
		{MetricUnreadableRetries, "", 1},
		{MetricFollowUpRounds, "", 1},
		{MetricImported, "stored", 1},
		{MetricRedeliveries, "", 1},
		{MetricDecisionSeconds, "", 2},
	} {
		if got := m.Get(c.name, c.value); got != c.want {
			t.Errorf("%s{%q} = %d, want %d", c.name, c.value, got, c.want)
		}
	}

	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]dto.MetricType{}
	for _, f := range fams {
		types[f.GetName()] = f.GetType()
		if f.GetHelp() != MetricHelp[f.GetName()] {
			t.Errorf("%s: help %q", f.GetName(), f.GetHelp())
		}
		if f.GetName() == MetricDecisionSeconds {
			h := f.GetMetric()[0].GetHistogram()
			// 30 ms falls in the 0.05 s bucket, 3 s in the 5 s one.
			for _, b := range h.GetBucket() {
				want := uint64(0)
				if b.GetUpperBound() >= 0.05 {
					want++
				}
				if b.GetUpperBound() >= 5 {
					want++
				}
				if b.GetCumulativeCount() != want {
					t.Errorf("bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
				}
			}
			if s := h.GetSampleSum(); s < 3.029 || s > 3.031 {
				t.Errorf("sum %v", s)
			}
		}
	}
	for name := range MetricHelp {
		want := dto.MetricType_COUNTER
		switch {
		case name == MetricDecisionSeconds:
			want = dto.MetricType_HISTOGRAM
		case MetricGauges[name]:
			want = dto.MetricType_GAUGE
		}
		if types[name] != want {
			t.Errorf("%s: type %v, want %v", name, types[name], want)
		}
	}

	if got := m.Gauge(MetricFollowUpLastRound, "ledger-a"); got != 1_800_000_000.5 {
		t.Errorf("last round of ledger-a %v", got)
	}
	if got := m.Gauge(MetricFollowUpLastRound, "ledger-b"); got != 0 {
		t.Errorf("ledger-b no longer followed up, still exposed at %v", got)
	}

	keys, vals := m.Snapshot()
	found := false
	for i, k := range keys {
		if i > 0 && (keys[i-1].Name > k.Name || keys[i-1].Name == k.Name && keys[i-1].Value > k.Value) {
			t.Errorf("snapshot unsorted at %v", k)
		}
		if k == (MetricKey{MetricVerdicts, "status", "found"}) {
			found = vals[i] == 2
		}
		if k.Name == MetricDecisionSeconds {
			t.Errorf("histogram in the counter snapshot")
		}
	}
	if !found {
		t.Errorf("snapshot lacks verdicts{status=found}=2: %v %v", keys, vals)
	}
}

// Each Metrics is independent: a second one neither panics on
// registration nor sees the first one's counts.
func TestMetricsIndependent(t *testing.T) {
	a, b := NewMetrics(), NewMetrics()
	a.received()
	if a.Get(MetricIntentsReceived, "") != 1 || b.Get(MetricIntentsReceived, "") != 0 {
		t.Fatal("metric sets share counts")
	}
}

func TestMetricsNil(t *testing.T) {
	var m *Metrics
	m.received()
	m.outcome(reconciled.Outcome{Kind: reconciled.Ack})
	m.verdict(reconciled.StatusFound)
	m.reject("x")
	m.unreadableRetry()
	m.round()
	m.imported("stored")
	m.Redelivered()
	m.Decided(time.Second)
	if m.Get(MetricIntentsReceived, "") != 0 || m.Registry() != nil {
		t.Fatal("a nil Metrics holds something")
	}
	if k, v := m.Snapshot(); k != nil || v != nil {
		t.Fatal("a nil Metrics has a snapshot")
	}
}
