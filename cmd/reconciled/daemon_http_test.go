package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/support"
)

// scrape reads /metrics as Prometheus does and parses it.
func scrape(t *testing.T, hs *httptest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := hs.Client().Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("/metrics content type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sample is the value of the family's sample whose labels include want;
// ok is false when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// A running daemon's /metrics: every family with its type, and the
// counters moving when an intent is handled.
func TestMetricsScrape(t *testing.T) {
	w := newWorld(t)
	alice, bob := w.user(1), w.user(2)
	l := w.ledger(ledgertest.LedgerConfig{InitialBalances: funded(alice.Principal())})
	d := w.daemon("metrics", t.TempDir(), time.Hour)
	defer stop(d, time.Second)
	hs := httptest.NewServer(d.Handler())
	defer hs.Close()

	types := map[string]dto.MetricType{
		reconcile.MetricIntentsReceived:             dto.MetricType_COUNTER,
		reconcile.MetricIntentOutcomes:              dto.MetricType_COUNTER,
		reconcile.MetricRedeliveries:                dto.MetricType_COUNTER,
		reconcile.MetricUnreadableRetries:           dto.MetricType_COUNTER,
		reconcile.MetricFollowUpRounds:              dto.MetricType_COUNTER,
		reconcile.MetricDecisionSeconds:             dto.MetricType_HISTOGRAM,
		"reconciled_watch_list_size":                dto.MetricType_GAUGE,
		"reconciled_oldest_open_intent_age_seconds": dto.MetricType_GAUGE,
		"go_goroutines":                             dto.MetricType_GAUGE,
		"go_memstats_heap_alloc_bytes":              dto.MetricType_GAUGE,
		"process_cpu_seconds_total":                 dto.MetricType_COUNTER,
		"process_resident_memory_bytes":             dto.MetricType_GAUGE,
	}
	before := scrape(t, hs)
	for name, typ := range types {
		if f := before[name]; f == nil || f.GetType() != typ {
			t.Errorf("before any intent: family %s is %v, want %v", name, f.GetType(), typ)
		}
	}
	if v, ok := sample(before, reconcile.MetricIntentsReceived, nil); !ok || v != 0 {
		t.Fatalf("intents received before any intent: %v %t", v, ok)
	}
	if v, _ := sample(before, reconcile.MetricIntentOutcomes, map[string]string{"outcome": "ack"}); v != 0 {
		t.Fatalf("acks before any intent: %v", v)
	}

	arg := transferArg(bob.Principal(), 1000, u64(w.srv.Now()), "metrics")
	if _, err := l.Transfer(alice.Principal(), arg); err != nil {
		t.Fatal(err)
	}
	if v := w.ask(toollayer.Transfer("metrics-1", l.ID(), alice.Principal(), arg), toollayer.FinalVerdict); v.Status != reconciled.StatusFound {
		t.Fatalf("verdict %+v", v)
	}
	// The verdict is published before the delivery is acked: wait for the
	// ack's count rather than assume it.
	var after map[string]*dto.MetricFamily
	testutil.Eventually(t, 30*time.Second, "the delivery is acked", func() (bool, string) {
		after = scrape(t, hs)
		v, _ := sample(after, reconcile.MetricIntentOutcomes, map[string]string{"outcome": "ack"})
		if v != 1 {
			return false, "acks"
		}
		// The decision's duration is recorded once the delivery is settled.
		f := after["reconciled_decision_seconds"]
		return f != nil && len(f.GetMetric()) == 1 && f.GetMetric()[0].GetHistogram().GetSampleCount() == 1, "decision latency sample"
	})
	types[reconcile.MetricVerdicts] = dto.MetricType_COUNTER
	types["reconciled_blocks_read_total"] = dto.MetricType_COUNTER
	types["reconciled_ic_queries_total"] = dto.MetricType_COUNTER
	types["reconciled_intents_by_status"] = dto.MetricType_GAUGE
	for name, typ := range types {
		if f := after[name]; f == nil || f.GetType() != typ {
			t.Errorf("after an intent: family %s is %v, want %v", name, f.GetType(), typ)
		}
	}
	// The ledger is not configured: its series carry the value every
	// unconfigured canister shares, not its id.
	ledger := daemon.StrangerLabel
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   func(float64) bool
	}{
		{reconcile.MetricIntentsReceived, nil, func(v float64) bool { return v == 1 }},
		{reconcile.MetricVerdicts, map[string]string{"status": "found"}, func(v float64) bool { return v == 1 }},
		{"reconciled_intents_by_status", map[string]string{"status": "found"}, func(v float64) bool { return v == 1 }},
		{"reconciled_blocks_read_total", map[string]string{"ledger": ledger}, func(v float64) bool { return v >= 1 }},
		{"reconciled_ic_queries_total", map[string]string{"ledger": ledger}, func(v float64) bool { return v >= 1 }},
		{"reconciled_watch_list_size", nil, func(v float64) bool { return v == 0 }},
	} {
		if v, ok := sample(after, c.name, c.labels); !ok || !c.want(v) {
			t.Errorf("%s%v = %v (present %t)", c.name, c.labels, v, ok)
		}
	}
	if v, ok := sample(after, reconcile.MetricVerdicts, map[string]string{"status": "absent"}); ok {
		t.Errorf("absent verdicts counted: %v", v)
	}

	// The text the tests and logs use is what the endpoint serves.
	var text strings.Builder
	if err := d.WriteMetrics(w.ctx, &text); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"# TYPE reconciled_decision_seconds histogram", "reconciled_intents_received_total 1",
		`reconciled_verdicts_total{status="found"} 1`} {
		if !strings.Contains(text.String(), line+"\n") {
			t.Errorf("writeMetrics lacks %q", line)
		}
	}
}

// Two daemons in one process keep their own service metrics.
func TestMetricsPerDaemon(t *testing.T) {
	w := newWorld(t)
	a := w.daemon("a", t.TempDir(), time.Hour)
	defer stop(a, time.Second)
	b := w.daemon("b", t.TempDir(), time.Hour)
	defer stop(b, time.Second)
	a.Metrics().Redelivered()
	if ga, gb := a.Metrics().Get(reconcile.MetricRedeliveries, ""), b.Metrics().Get(reconcile.MetricRedeliveries, ""); ga != 1 || gb != 0 {
		t.Fatalf("redeliveries a=%v b=%v, want 1 and 0", ga, gb)
	}
	var text strings.Builder
	if err := b.WriteMetrics(w.ctx, &text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), reconcile.MetricRedeliveries+" 0\n") {
		t.Fatalf("b's /metrics does not show its own zero redeliveries:\n%s", text.String())
	}
}

// The daemon's support API shows the test ledger's units next to an
// intent it decided.
func TestSupportShowsLedgerUnits(t *testing.T) {
	w := newWorld(t)
	alice, bob := w.user(1), w.user(2)
	l := w.ledger(ledgertest.LedgerConfig{InitialBalances: funded(alice.Principal())})
	d := w.rig.Start(daemontest.Options{Instance: "units",
		Tune: func(c *daemon.Config, _ *daemon.Options) { c.SupportToken = "s3cret" }})
	defer stop(d, time.Second)
	hs := httptest.NewServer(d.Handler())
	defer hs.Close()

	arg := transferArg(bob.Principal(), 150_000_000, u64(w.srv.Now()), "units")
	if _, err := l.Transfer(alice.Principal(), arg); err != nil {
		t.Fatal(err)
	}
	if v := w.ask(toollayer.Transfer("units-1", l.ID(), alice.Principal(), arg), toollayer.FinalVerdict); v.Status != reconciled.StatusFound {
		t.Fatalf("verdict %+v", v)
	}
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/api/v1/intents/units-1", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Ledger *support.Ledger `json:"ledger"`
		Amount *support.Amount `json:"amount"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, decode: %v", resp.StatusCode, err)
	}
	if body.Ledger == nil || body.Ledger.Decimals != 8 || body.Ledger.Symbol != "TST" {
		t.Fatalf("ledger units %+v, want 8 TST", body.Ledger)
	}
	if body.Amount == nil || body.Amount.Display != "1.5 TST" || body.Amount.Units != "150000000" {
		t.Fatalf("amount %+v, want 1.5 TST", body.Amount)
	}
}
