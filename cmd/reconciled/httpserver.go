package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// httpDeps is what the HTTP server exposes.
type httpDeps struct {
	// ready returns nil when the daemon can take work.
	ready func(ctx context.Context) error
	// metrics writes the Prometheus text exposition.
	metrics func(ctx context.Context, w io.Writer) error
	// support is mounted at /api/v1/ and /ui/ (the support API and page);
	// nil answers 404 there.
	support http.Handler
}

func newHTTPHandler(d httpDeps) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := d.ready(ctx); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		var b strings.Builder
		if err := d.metrics(r.Context(), &b); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, b.String())
	})
	if d.support != nil {
		mux.Handle("/api/v1/", d.support)
		mux.Handle("/ui/", d.support)
	} else {
		none := func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "the support API is not built into this binary"})
		}
		mux.HandleFunc("/api/v1/", none)
		mux.HandleFunc("/ui/", none)
	}
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// promWriter writes the Prometheus text format; each metric family's HELP
// and TYPE come once, before its first sample.
type promWriter struct {
	w    io.Writer
	seen map[string]bool
	err  error
}

func (p *promWriter) sample(name, typ, help string, labels map[string]string, v float64) {
	if p.err != nil {
		return
	}
	if !p.seen[name] {
		p.seen[name] = true
		_, p.err = fmt.Fprintf(p.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	var lb strings.Builder
	if len(labels) > 0 {
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		lb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				lb.WriteByte(',')
			}
			fmt.Fprintf(&lb, "%s=%s", k, strconv.Quote(labels[k]))
		}
		lb.WriteByte('}')
	}
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, "%s%s %s\n", name, lb.String(), strconv.FormatFloat(v, 'g', -1, 64))
	}
}

// writeMetrics renders the service's counters, the clients' query and
// block counts, and gauges read from the store at scrape time.
func (d *daemon) writeMetrics(ctx context.Context, w io.Writer) error {
	p := &promWriter{w: w, seen: map[string]bool{}}
	keys, vals := d.metrics.Snapshot()
	for i, k := range keys {
		var labels map[string]string
		if k.Label != "" {
			labels = map[string]string{k.Label: k.Value}
		}
		p.sample(k.Name, "counter", reconcile.MetricHelp[k.Name], labels, float64(vals[i]))
	}
	stats := d.clientStats()
	ledgers := make([]string, 0, len(stats))
	for l := range stats {
		ledgers = append(ledgers, l)
	}
	sort.Strings(ledgers)
	for _, l := range ledgers {
		s := stats[l]
		p.sample("reconciled_blocks_read_total", "counter",
			"Blocks received in block pages (the scan rate is its rate); every one is verified before use.",
			map[string]string{"ledger": l}, float64(s.Blocks))
		eps := make([]string, 0, len(s.Queries))
		for e := range s.Queries {
			eps = append(eps, e)
		}
		sort.Strings(eps)
		for _, e := range eps {
			p.sample("reconciled_ic_queries_total", "counter", "IC queries by ledger and endpoint.",
				map[string]string{"ledger": l, "endpoint": e}, float64(s.Queries[e]))
		}
	}
	ws, err := d.store.Watches(ctx)
	if err != nil {
		return err
	}
	p.sample("reconciled_watch_list_size", "gauge", "Intents without a final verdict that this instance follows up.", nil, float64(len(ws)))
	counts, err := d.store.CountByStatus(ctx)
	if err != nil {
		return err
	}
	sts := make([]string, 0, len(counts))
	for s := range counts {
		sts = append(sts, string(s))
	}
	sort.Strings(sts)
	for _, s := range sts {
		label := s
		if label == "" {
			label = "none"
		}
		p.sample("reconciled_intents_by_status", "gauge", "Stored intents by their latest verdict's status.",
			map[string]string{"status": label}, float64(counts[reconcile.Status(s)]))
	}
	open, _, err := d.store.ListIntents(ctx, store.ListFilter{Open: true, Limit: 1})
	if err != nil {
		return err
	}
	age := 0.0
	if len(open) > 0 {
		age = time.Since(open[0].FirstSeen).Seconds()
	}
	p.sample("reconciled_oldest_open_intent_age_seconds", "gauge", "Age of the oldest intent without a final verdict.", nil, age)
	return p.err
}
