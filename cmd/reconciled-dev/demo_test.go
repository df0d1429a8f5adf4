package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/queue"
)

// The demo is the tour of every status: it must run and print them all,
// and with --serve keep serving them on its support page.
func TestDemoPrintsEveryStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errOut daemontest.LogBuffer
	done := make(chan error, 1)
	go func() { done <- runDemo(ctx, nil, &out, &errOut, &demoServe{addr: "127.0.0.1:0"}) }()
	pageRE := regexp.MustCompile(`support page: (http://127\.0\.0\.1:\d+)/ui/#token=([0-9a-f]{32})\n`)
	var m []string
	for m == nil {
		select {
		case err := <-done:
			t.Fatalf("demo ended before serving: %v\n%s\n%s", err, out.String(), errOut.String())
		case <-time.After(20 * time.Millisecond):
			m = pageRE.FindStringSubmatch(out.String())
		}
	}
	// intent is the served detail of one demo intent.
	intent := func(id string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, "GET", m[1]+"/api/v1/intents/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+m[2])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, body
	}
	if code, body := intent("demo-lost-reply"); code != 200 || !strings.Contains(string(body), `"status":"found"`) {
		t.Errorf("served detail: %d %s", code, body)
	}
	// Served, the follow-ups go on: the unreadable intent is tried again,
	// as its support page says.
	attempts := func() int {
		var d struct {
			Watch *struct{ Attempts int } `json:"watch"`
		}
		_, body := intent("demo-forged-cert")
		if err := json.Unmarshal(body, &d); err != nil || d.Watch == nil {
			t.Fatalf("demo-forged-cert: %v, watch %+v: %s", err, d.Watch, body)
		}
		return d.Watch.Attempts
	}
	// Two more than first: the scenario's own retry may still be landing.
	first := attempts()
	for deadline := time.Now().Add(45 * time.Second); attempts() < first+2; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("demo-forged-cert at %d attempts after 45 s of serving (%d when the page was up): the follow-ups stopped", attempts(), first)
		}
	}
	// The NATS address it prints serves the daemon's streams: a tool layer
	// (or nats, or reconciled ask) can publish to the demo.
	natsRE := regexp.MustCompile(`\nNATS: (nats://127\.0\.0\.1:\d+) `)
	if nm := natsRE.FindStringSubmatch(out.String()); nm == nil {
		t.Errorf("the served demo prints no NATS address:\n%s", out.String())
	} else if nc, err := nats.Connect(nm[1], nats.Name("demo-test")); err != nil {
		t.Errorf("connect to the printed NATS address %s: %v", nm[1], err)
	} else {
		js, err := jetstream.New(nc)
		if err == nil {
			_, err = js.Stream(ctx, queue.VerdictsStream)
		}
		if err != nil {
			t.Errorf("the verdict stream at %s: %v", nm[1], err)
		}
		nc.Close()
	}
	// What a tool layer does with each status.
	for _, want := range []string{
		"\n  found       ", "never send it again", "\n  absent      ", "new created_at_time",
		"\n  not_yet     ", "\n  unreadable  ", "never treat it as absent", "\n  invalid     ", "new intent_id",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo does not say what a tool layer does with each status (%q):\n%s", want, out.String())
			break
		}
	}
	// The open payment is checked at every round without news: its last
	// check moves on, and its next check is one interval after it, not a
	// time in the past.
	checks := func() (last, next time.Time) {
		var d struct {
			Watch *struct {
				LastCheck *time.Time `json:"last_check"`
				NextCheck time.Time  `json:"next_check"`
			} `json:"watch"`
		}
		_, body := intent("demo-window-open")
		if err := json.Unmarshal(body, &d); err != nil || d.Watch == nil || d.Watch.LastCheck == nil {
			t.Fatalf("demo-window-open: %v: %s", err, body)
		}
		return *d.Watch.LastCheck, d.Watch.NextCheck
	}
	firstCheck, next := checks()
	if !next.After(firstCheck) {
		t.Errorf("demo-window-open: next check %v is not after its last check %v", next, firstCheck)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if last, _ := checks(); last.After(firstCheck) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo-window-open: last check still %v after 30 s of serving", firstCheck)
		}
	}
	if res, err := http.Get(m[1] + "/ui/"); err != nil || res.StatusCode != 200 {
		t.Errorf("served page: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	got := map[string]int{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && strings.HasPrefix(f[0], "demo-") {
			got[f[2]]++
		}
	}
	want := map[string]int{"found": 3, "absent": 1, "not_yet": 1, "unreadable": 1, "invalid": 1}
	for s, n := range want {
		if got[s] != n {
			t.Errorf("status %s: %d rows, want %d", s, got[s], n)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", out.String())
	}
}
