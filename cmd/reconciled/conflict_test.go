package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

// conflictPair starts a daemon, pays one intent, asks for it until found,
// and returns it with a second body under the same id (another amount)
// that never executed.
func conflictPair(t *testing.T, id string) (w *world, paid, other toollayer.Intent) {
	t.Helper()
	w = newWorld(t)
	alice, bob := w.user(1), w.user(2)
	l := w.ledger(ledgertest.LedgerConfig{InitialBalances: funded(alice.Principal())})
	d := w.daemon(id, t.TempDir(), time.Hour)
	t.Cleanup(func() { stop(d, time.Second) })
	arg := transferArg(bob.Principal(), 1234, u64(w.srv.Now()), "conflict")
	if _, err := l.Transfer(alice.Principal(), arg); err != nil {
		t.Fatal(err)
	}
	paid = toollayer.Transfer(id, l.ID(), alice.Principal(), arg)
	if v := w.ask(paid, toollayer.FinalVerdict); v.Status != reconciled.StatusFound {
		t.Fatalf("paid intent: %+v", v)
	}
	other = paid
	other.Args = map[string]any{}
	for k, v := range paid.Args {
		other.Args[k] = v
	}
	other.Args["amount"] = "4321"
	return w, paid, other
}

// A different body under an id the stream took moments ago (well inside
// its 2-minute dedup window) reaches a daemon and is refused.
func TestConflictingBodyReachesDaemonWithinDedupWindow(t *testing.T) {
	w, _, other := conflictPair(t, "conflict-1")

	rejects := make(chan queue.Reject, 1)
	if err := w.tool.SubscribeRejects(w.ctx, "conflict-1", func(r queue.Reject) { rejects <- r }); err != nil {
		t.Fatal(err)
	}
	if dup, err := w.tool.PublishIntent(w.ctx, other.Canister, other.ID, other.JSON(), matcher.IntentHash(other.JSON())); err != nil || dup {
		t.Fatalf("conflicting body published: duplicate=%v err=%v", dup, err)
	}
	ctx, cancel := context.WithTimeout(w.ctx, 20*time.Second)
	defer cancel()
	select {
	case r := <-rejects:
		if r.Code != "E_INTENT_CONFLICT" {
			t.Fatalf("reject %+v", r)
		}
	case <-ctx.Done():
		t.Fatal("no E_INTENT_CONFLICT reject: the conflicting body never reached a daemon")
	}
}

// `reconciled ask` with a body whose id is taken by another body must not
// print the other body's verdict as its answer: it refuses it, reports the
// conflict reject and fails.
func TestAskRefusesForeignVerdictOfAnotherBody(t *testing.T) {
	w, paid, other := conflictPair(t, "foreign-1")

	in, err := matcher.ParseIntent(other.JSON())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(w.ctx, 20*time.Second)
	defer cancel()
	err = askAndPrint(ctx, w.tool, in, other.JSON(), &out)
	t.Logf("ask output:\n%s", out.String())
	if err == nil {
		t.Fatalf("ask of a conflicting body succeeded; output %q", out.String())
	}
	if strings.Contains(out.String(), "status=found") && !strings.Contains(out.String(), "foreign") {
		t.Fatalf("the other body's found verdict was printed as this body's answer: %q", out.String())
	}
	if !strings.Contains(out.String(), "E_INTENT_CONFLICT") {
		t.Fatalf("the conflict reject was not reported: %q (err %v)", out.String(), err)
	}
	// The body the verdict belongs to is still answered.
	pin, err := matcher.ParseIntent(paid.JSON())
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := askAndPrint(w.ctx, w.tool, pin, paid.JSON(), &out); err != nil || !strings.Contains(out.String(), "status=found") {
		t.Fatalf("ask of the stored body: %v, output %q", err, out.String())
	}
}
