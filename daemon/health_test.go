package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// openIntent stores and watches an intent of ledger first seen at seen.
func openIntent(t *testing.T, st *store.Store, id, ledger string, seen time.Time) {
	t.Helper()
	ctx := context.Background()
	body := fmt.Sprintf(`{"intent_id":%q,"canister_id":%q,"method":"icrc1_transfer"}`, id, ledger)
	if _, err := st.PutIntent(ctx, reconciled.IntentRecord{IntentID: id, CanisterID: ledger, Method: "icrc1_transfer",
		Body: []byte(body), Hash: sha256.Sum256([]byte(body)), FirstSeen: seen}); err != nil {
		t.Fatal(err)
	}
	if err := st.Watch(ctx, reconciled.Watch{IntentID: id, CanisterID: ledger, NextCheck: seen}); err != nil {
		t.Fatal(err)
	}
}

func gaugeByLabel(t *testing.T, d *Daemon, family, label string) map[string]float64 {
	t.Helper()
	fams, err := d.gatherer(context.Background()).Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			out[labelOf(m, label)] = value(m)
		}
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}

// TestOpenAgeGaugeAndAlert: the per-ledger gauge has a series per
// configured ledger (0 without open intents) and per other ledger with
// open intents, and the log warns once when a ledger's oldest open intent
// passes the threshold, again an hour later, and says when it is back
// under.
func TestOpenAgeGaugeAndAlert(t *testing.T) {
	ctx := context.Background()
	const quiet, busy, other = "quiet-ledger", "busy-ledger", "other-ledger"
	d, logs := bareDaemon(t, Config{OpenAgeAlert: 25 * time.Hour, Ledgers: map[string]reconcile.LedgerConfig{quiet: {}, busy: {}}})
	st := d.store
	now := time.Now()
	openIntent(t, st, "busy-old", busy, now.Add(-26*time.Hour))
	openIntent(t, st, "busy-new", busy, now.Add(-time.Hour))
	openIntent(t, st, "other-1", other, now.Add(-2*time.Hour))

	ages := gaugeByLabel(t, d, "reconciled_ledger_oldest_open_intent_age_seconds", "ledger")
	if len(ages) != 3 || ages[quiet] != 0 || ages[busy] < 26*3600 || ages[other] < 2*3600 || ages[other] > 3*3600 {
		t.Fatalf("oldest open intent ages: %v", ages)
	}
	if errs := gaugeByLabel(t, d, "reconciled_store_write_errors_total", "path"); len(errs) != len(store.WritePaths) {
		t.Fatalf("store write errors: %v", errs)
	}

	logged := map[string]time.Time{}
	warned := func() []string {
		var ids []string
		for _, e := range logs.TakeAll() {
			if e.Level == zap.WarnLevel {
				ids = append(ids, e.ContextMap()["intent_id"].(string))
			} else {
				ids = append(ids, "under:"+e.ContextMap()["canister_id"].(string))
			}
		}
		return ids
	}
	for _, step := range []struct {
		at   time.Duration
		want string
	}{
		{0, "busy-old"}, {30 * time.Minute, ""}, {61 * time.Minute, "busy-old"},
	} {
		if err := d.checkOpenAges(ctx, now.Add(step.at), logged); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(warned(), ","); got != step.want {
			t.Fatalf("at +%s: logged %q, want %q", step.at, got, step.want)
		}
	}
	if err := st.Unwatch(ctx, "busy-old"); err != nil {
		t.Fatal(err)
	}
	if err := d.checkOpenAges(ctx, now.Add(2*time.Hour), logged); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(warned(), ","); got != "under:"+busy {
		t.Fatalf("once the old intent is settled: logged %q", got)
	}
}

// TestLedgerAgesBounded: however many ledgers have open intents, the gauge
// has at most maxLedgerSeries series; the oldest keep their own.
func TestLedgerAgesBounded(t *testing.T) {
	now := time.Now()
	var oldest []store.OldestOpen
	for i := range 40 {
		oldest = append(oldest, store.OldestOpen{CanisterID: fmt.Sprintf("l%02d", i), FirstSeen: now.Add(-time.Duration(i+1) * time.Hour)})
	}
	got := ledgerAges(map[string]reconcile.LedgerConfig{"configured": {}}, oldest, now)
	if len(got) != maxLedgerSeries || got["configured"] != 0 || got["l39"] < 40*3600 || got["other"] < 9*3600 {
		t.Fatalf("%d series: %v", len(got), got)
	}
	if _, ok := got["l00"]; ok {
		t.Fatalf("the youngest ledger has its own series: %v", got)
	}
}

func TestHealthzFailed(t *testing.T) {
	gaveUp := errors.New("daemon: embedded NATS server: restart: not ready")
	h := newHTTPHandler(httpDeps{ready: func(context.Context) error { return nil }, alive: func() error { return gaveUp }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "restart: not ready") {
		t.Fatalf("/healthz of a daemon that gave up: %d %s", rec.Code, rec.Body)
	}
}

// bareDaemon is a Daemon with a store in a temp dir, cfg, and a log
// whose entries the test reads: enough for the store-driven loops and
// gauges, with no NATS and no ledger.
func bareDaemon(t *testing.T, cfg Config) (*Daemon, *observer.ObservedLogs) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "reconciled.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	core, logs := observer.New(zap.InfoLevel)
	return &Daemon{store: st, log: zap.New(core), metrics: reconcile.NewMetrics(), clients: map[string]*icrc3history.Client{}, cfg: cfg}, logs
}
