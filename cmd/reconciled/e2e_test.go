package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// Re-publishing an intent (same id and body, even re-encoded) gives one
// verdict history and scans nothing; a different body under the same id is
// refused on the rejects subject and changes nothing stored.
func TestDuplicateAndConflictingIntents(t *testing.T) {
	w := newWorld(t)
	alice, bob := w.user(1), w.user(2)
	l := w.ledger(ledgertest.LedgerConfig{InitialBalances: funded(alice.Principal())})
	d := w.daemon("solo", t.TempDir(), time.Hour)
	defer stop(d, time.Second)

	arg := transferArg(bob.Principal(), 1234, u64(w.srv.Now()), "dup")
	if _, err := l.Transfer(alice.Principal(), arg); err != nil {
		t.Fatal(err)
	}
	doc := toollayer.Transfer("dup-1", l.ID(), alice.Principal(), arg)
	first := w.ask(doc, toollayer.FinalVerdict)
	if first.Status != reconciled.StatusFound || first.Seq != 1 {
		t.Fatalf("first verdict %+v", first)
	}
	served := l.Counters().BlocksServed

	// Past the stream's dedup window a publisher would send it again: a
	// different message id gets it past JetStream's deduplication, and the
	// body is re-encoded (other key order, "after" changed).
	var m map[string]any
	_ = json.Unmarshal(doc.JSON(), &m)
	m["after"] = "unknown"
	again, _ := json.Marshal(m)
	republish := func(body []byte, msgID string) {
		t.Helper()
		if _, err := w.tool.JetStream().Publish(w.ctx, "reconcile.intents."+doc.Canister, body, jetstream.WithMsgID(msgID)); err != nil {
			t.Fatal(err)
		}
	}
	republish(again, "dup-1-again")

	// A conflicting body: another amount under the same id.
	rejects := make(chan queue.Reject, 1)
	if err := w.tool.SubscribeRejects(w.ctx, "dup-1", func(r queue.Reject) { rejects <- r }); err != nil {
		t.Fatal(err)
	}
	other := doc
	other.Args = map[string]any{}
	for k, v := range doc.Args {
		other.Args[k] = v
	}
	other.Args["amount"] = "4321"
	republish(other.JSON(), "dup-1-conflict")
	select {
	case r := <-rejects:
		if r.Code != "E_INTENT_CONFLICT" {
			t.Fatalf("reject %+v", r)
		}
	case <-w.ctx.Done():
		t.Fatal("no reject for the conflicting body")
	}
	// The re-publication was handled before the conflict (one stream, in
	// order, and the reject proves the conflict was handled).
	testutil.Eventually(t, 30*time.Second, "both re-publications settled", func() (bool, string) {
		n := d.Metrics().Get(reconcile.MetricIntentOutcomes, "ack")
		return n >= 3, fmt.Sprint(n, " acks")
	})
	if vs := history(t, d.Store(), "dup-1"); len(vs) != 1 || vs[0].Status != reconciled.StatusFound {
		t.Fatalf("history after duplicates: %s", describe(vs))
	}
	if n := w.streamCount("dup-1"); n != 1 {
		t.Fatalf("verdict stream holds %d verdicts of dup-1, want 1", n)
	}
	if got := l.Counters().BlocksServed; got != served {
		t.Fatalf("a known intent was scanned again: %d blocks served, was %d", got, served)
	}
	rec, err := d.Store().Intent(w.ctx, "dup-1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rec.Body), "4321") || !strings.Contains(string(rec.Body), "1234") {
		t.Fatalf("stored body changed: %s", rec.Body)
	}
}

// not_yet intents settle by themselves through the follow-up: one is found
// when a retry executes inside its window, another is absent once the
// ledger's certified time passes its window.
func TestFollowUpSettlesNotYet(t *testing.T) {
	w := newWorld(t)
	alice, bob := w.user(1), w.user(2)
	l := w.ledger(ledgertest.LedgerConfig{InitialBalances: funded(alice.Principal())})
	d := w.daemon("follow", t.TempDir(), 50*time.Millisecond)
	defer stop(d, time.Second)

	retryArg := transferArg(bob.Principal(), 500, u64(w.srv.Now()), "retry-later")
	neverArg := transferArg(bob.Principal(), 600, u64(w.srv.Now()), "never")
	retried := toollayer.Transfer("will-retry", l.ID(), alice.Principal(), retryArg)
	never := toollayer.Transfer("never-sent", l.ID(), alice.Principal(), neverArg)
	for _, doc := range []toollayer.Intent{retried, never} {
		if v := w.ask(doc, toollayer.AnyVerdict); v.Status != reconciled.StatusNotYet || v.Seq != 1 {
			t.Fatalf("%s: first verdict %+v, want not_yet", doc.ID, v)
		}
	}
	// The tool layer's retry (same bytes) executes inside the window.
	idx, err := l.Transfer(alice.Principal(), retryArg)
	if err != nil {
		t.Fatal(err)
	}
	v := w.wait(retried.ID, toollayer.FinalVerdict)
	if v.Status != reconciled.StatusFound || v.Block == nil || uint64(v.Block.Index) != idx || v.Seq != 2 {
		t.Fatalf("retried: %+v, want found at %d with seq 2", v, idx)
	}
	w.srv.Advance(24*time.Hour + 3*time.Minute)
	v = w.wait(never.ID, toollayer.FinalVerdict)
	if v.Status != reconciled.StatusAbsent || v.Seq != 2 {
		t.Fatalf("never sent: %+v, want absent with seq 2", v)
	}
	for _, id := range []string{retried.ID, never.ID} {
		if vs := history(t, d.Store(), id); len(vs) != 2 {
			t.Fatalf("%s: %s", id, describe(vs))
		}
	}
	ws, err := d.Store().Watches(w.ctx)
	if err != nil || len(ws) != 0 {
		t.Fatalf("watch list after final verdicts: %v %v", ws, err)
	}
}

// Two instances share the intake consumer; each decides a share, and both
// stores end up with every verdict (and the intent bodies) through the
// verdict stream.
func TestTwoInstancesShareWorkAndVerdicts(t *testing.T) {
	w := newWorld(t)
	alice, bob := w.user(1), w.user(2)
	l := w.ledger(ledgertest.LedgerConfig{InitialBalances: funded(alice.Principal())})
	a := w.daemon("a", t.TempDir(), time.Hour)
	defer stop(a, time.Second)
	b := w.daemon("b", t.TempDir(), time.Hour)
	defer stop(b, time.Second)

	const n = 16
	var docs []toollayer.Intent
	for i := range n {
		arg := transferArg(bob.Principal(), uint64(100+i), u64(w.srv.Now()), fmt.Sprint("pair-", i))
		if i%2 == 0 {
			if _, err := l.Transfer(alice.Principal(), arg); err != nil {
				t.Fatal(err)
			}
		}
		docs = append(docs, toollayer.Transfer(fmt.Sprint("pair-", i), l.ID(), alice.Principal(), arg))
	}
	for _, doc := range docs {
		if _, err := w.tool.PublishIntent(w.ctx, doc.Canister, doc.ID, doc.JSON(), matcher.IntentHash(doc.JSON())); err != nil {
			t.Fatal(err)
		}
	}
	for i, doc := range docs {
		v := w.wait(doc.ID, toollayer.AnyVerdict)
		want := reconciled.StatusNotYet
		if i%2 == 0 {
			want = reconciled.StatusFound
		}
		if v.Status != want {
			t.Fatalf("%s: %s, want %s", doc.ID, v.Status, want)
		}
	}
	decided := func(d *daemon.Daemon) uint64 {
		return d.Metrics().Get(reconcile.MetricVerdicts, "found") + d.Metrics().Get(reconcile.MetricVerdicts, "not_yet")
	}
	if da, db := decided(a), decided(b); da+db != n {
		t.Fatalf("decided %d + %d verdicts, want %d in all (each intent once)", da, db, n)
	} else {
		t.Logf("instance a decided %d, b decided %d", da, db)
	}
	for _, d := range []*daemon.Daemon{a, b} {
		testutil.Eventually(t, 30*time.Second, "every verdict in "+d.Config().Instance+"'s store", func() (bool, string) {
			missing := 0
			for _, doc := range docs {
				vs, err := d.Store().Verdicts(w.ctx, doc.ID)
				if err != nil || len(vs) != 1 {
					missing++
					continue
				}
				if _, err := d.Store().Intent(w.ctx, doc.ID); err != nil {
					missing++
				}
			}
			return missing == 0, fmt.Sprint(missing, " missing")
		})
	}
	// The metrics endpoint renders what happened.
	var buf bytes.Buffer
	if err := a.WriteMetrics(w.ctx, &buf); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"reconciled_intents_received_total", "reconciled_verdicts_imported_total",
		"reconciled_watch_list_size", "reconciled_intents_by_status", "reconciled_oldest_open_intent_age_seconds"} {
		if !strings.Contains(buf.String(), name) {
			t.Errorf("metrics lack %s:\n%s", name, buf.String())
		}
	}
}

// An instance stopped in the middle of a slow scan gives the intent back;
// a new instance on the same store and NATS finishes it exactly once, and
// resumes the watch list.
func TestRestartMidScan(t *testing.T) {
	w := newWorld(t)
	alice, bob := w.user(1), w.user(2)
	// No initial balance: its block would carry the creation time, and the
	// generated history must spread over the past hour.
	l := w.ledger(ledgertest.LedgerConfig{})
	if err := l.GenerateHistory(3000, 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Small pages, so the scan takes many slow requests.
	small := func(c *icrc3history.ClientConfig) { c.Endpoint = icrc3.EndpointICRC3 }
	d1 := w.daemonWith("one", dir, time.Hour, small)

	// Watched before the restart: a not_yet intent.
	watched := toollayer.Transfer("watched", l.ID(), alice.Principal(), transferArg(bob.Principal(), 7, u64(w.srv.Now()), "w"))
	if v := w.ask(watched, toollayer.AnyVerdict); v.Status != reconciled.StatusNotYet {
		t.Fatalf("watched: %+v", v)
	}
	// An intent stamped an hour back, behind 3000 blocks read slowly.
	old := u64(w.srv.Now() - uint64(time.Hour))
	slow := toollayer.Transfer("slow", l.ID(), alice.Principal(), transferArg(bob.Principal(), 9, old, "s"))
	w.srv.SetFaults(l.ID(), ledgertest.Faults{Latency: 20 * time.Millisecond})
	before := l.Counters().BlocksServed
	if _, err := w.tool.PublishIntent(w.ctx, slow.Canister, slow.ID, slow.JSON(), matcher.IntentHash(slow.JSON())); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the slow scan under way", func() (bool, string) {
		got := l.Counters().BlocksServed - before
		return got > 0, fmt.Sprint(got, " blocks")
	})
	t0 := time.Now()
	stop(d1, 0) // no grace: the in-flight intent is given back mid-scan
	t.Logf("stopped in %s", time.Since(t0))
	if n := w.streamCount("slow"); n != 0 {
		t.Fatalf("%d verdicts published before the restart; the scan was not interrupted", n)
	}
	w.srv.SetFaults(l.ID(), ledgertest.Faults{})

	d2 := w.daemonWith("one", dir, time.Hour, small)
	defer stop(d2, time.Second)
	v := w.wait(slow.ID, toollayer.AnyVerdict)
	t.Logf("decided after restart in %s", time.Since(t0))
	if v.Status != reconciled.StatusNotYet || v.Seq != 1 {
		t.Fatalf("slow after restart: %+v", v)
	}
	ws, err := d2.Store().Watches(w.ctx)
	if err != nil || len(ws) != 2 {
		t.Fatalf("watch list after restart: %+v %v", ws, err)
	}
	w.srv.Advance(24*time.Hour + 3*time.Minute)
	d2.FollowUpNow()
	for _, id := range []string{watched.ID, slow.ID} {
		v := w.wait(id, toollayer.FinalVerdict)
		if v.Status != reconciled.StatusAbsent || v.Seq != 2 {
			t.Fatalf("%s: %+v, want absent seq 2", id, v)
		}
		if vs := history(t, d2.Store(), id); len(vs) != 2 {
			t.Fatalf("%s: %s", id, describe(vs))
		}
		if n := w.streamCount(id); n != 2 {
			t.Fatalf("%s: %d verdicts in the stream, want 2", id, n)
		}
	}
}

// Many intents of one ledger with overlapping windows share one verified
// chain: they fetch about the blocks of one scan.
func TestManyIntentsShareOneScan(t *testing.T) {
	const intents = 1000
	w := newWorld(t)
	alice, bob := w.user(1), w.user(2)
	one, many := w.ledger(ledgertest.LedgerConfig{}), w.ledger(ledgertest.LedgerConfig{})
	for _, l := range []*ledgertest.Ledger{one, many} {
		if err := l.GenerateHistory(4000, 5, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	d := w.daemon("many", t.TempDir(), time.Hour)
	defer stop(d, time.Second)

	now := w.srv.Now()
	stamp := func(i int) uint64 { return now - uint64(time.Hour) + uint64(i)*uint64(time.Hour)/intents }
	// One scan: the intent with the earliest window, alone.
	w.ask(toollayer.Transfer("single", one.ID(), alice.Principal(), transferArg(bob.Principal(), 1, u64(stamp(0)), "x")), toollayer.AnyVerdict)
	single := one.Counters().BlocksServed

	start := time.Now()
	// Published asynchronously, as a busy tool layer would: each publish
	// waits for the server's fsync otherwise.
	js := w.tool.JetStream()
	for i := range intents {
		doc := toollayer.Transfer(fmt.Sprint("many-", i), many.ID(), alice.Principal(), transferArg(bob.Principal(), uint64(i+1), u64(stamp(i)), "x"))
		if _, err := js.PublishAsync("reconcile.intents."+doc.Canister, doc.JSON(), jetstream.WithMsgID(queue.IntentMsgID(doc.ID, matcher.IntentHash(doc.JSON())))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-w.ctx.Done():
		t.Fatal("intents not acknowledged by the stream")
	}
	t.Logf("published %d intents in %s", intents, time.Since(start).Round(time.Millisecond))
	// One consumer over every verdict subject: 1000 watchers would exceed
	// the server's consumer limit.
	cons, err := w.tool.JetStream().OrderedConsumer(w.ctx, queue.VerdictsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"reconcile.verdicts.>"}})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	seen := map[string]bool{}
	for len(seen) < intents {
		msg, err := it.Next(jetstream.NextContext(w.ctx))
		if err != nil {
			t.Fatalf("after %d verdicts: %v", len(seen), err)
		}
		if id := strings.TrimPrefix(msg.Subject(), "reconcile.verdicts."); strings.HasPrefix(id, "many-") {
			seen[id] = true
		}
	}
	served := many.Counters().BlocksServed
	t.Logf("%d intents: %d blocks served (one scan: %d, ratio %.3f) in %s", intents, served, single,
		float64(served)/float64(single), time.Since(start).Round(time.Millisecond))
	if float64(served) > 1.2*float64(single) {
		t.Fatalf("%d intents fetched %d blocks, more than 1.2 × one scan (%d)", intents, served, single)
	}
}
