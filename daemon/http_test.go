package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// A scrape of an idle daemon: the per-scrape registry, the runtime
// collectors, the store reads, and the text encoding.
func BenchmarkMetricsScrape(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "reconciled.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	d := &Daemon{store: st, metrics: reconcile.NewMetrics(), clients: map[string]*icrc3history.Client{}}
	h := newHTTPHandler(httpDeps{ready: func(context.Context) error { return nil }, gather: d.gatherer})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("/metrics %d", rec.Code)
		}
	}
}

func TestHTTPEndpoints(t *testing.T) {
	var notReady error = errors.New("nats not connected")
	sup := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := newHTTPHandler(httpDeps{
		ready: func(context.Context) error { return notReady },
		gather: func(context.Context) prometheus.Gatherer {
			reg := prometheus.NewRegistry()
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "reconciled_x", Help: "x"})
			c.Inc()
			reg.MustRegister(c)
			return reg
		},
		support: sup,
	})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz %d", code)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "nats not connected") {
		t.Fatalf("/readyz not ready: %d %s", code, body)
	}
	notReady = nil
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz ready: %d", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "\nreconciled_x 1\n") {
		t.Fatalf("/metrics %d %q", code, body)
	}
	for _, p := range []string{"/api/v1/intents", "/ui/"} {
		if code, _ := get(p); code != http.StatusTeapot {
			t.Fatalf("%s not routed to the support handler: %d", p, code)
		}
	}
}
