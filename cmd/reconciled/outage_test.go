package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// outageSink is a verdict sink whose stream reads fail while down.
type outageSink struct {
	reconcile.Sink
	mu   sync.Mutex
	down int // LastVerdict calls still to fail
}

func (s *outageSink) LastVerdict(ctx context.Context, id string) (*reconciled.Verdict, error) {
	s.mu.Lock()
	fail := s.down > 0
	if fail {
		s.down--
	}
	s.mu.Unlock()
	if fail {
		return nil, errors.New("nats: timeout")
	}
	return s.Sink.LastVerdict(ctx, id)
}

// A verdict-stream outage that outlasts many deliveries of an intent does
// not lose it: the intake keeps giving it back (reporting it once it was
// delivered more than 5 times) and it gets its verdict once the stream
// answers again.
func TestVerdictStreamOutageDoesNotLoseTheIntent(t *testing.T) {
	w := newWorld(t)
	alice, bob := w.user(1), w.user(2)
	l := w.ledger(ledgertest.LedgerConfig{InitialBalances: funded(alice.Principal())})
	sink := &outageSink{down: 15}
	var mu sync.Mutex
	var delivered uint64
	w.rig.Start(daemontest.Options{Instance: "outage", Tune: func(_ *daemon.Config, o *daemon.Options) {
		o.Sink = func(s reconcile.Sink) reconcile.Sink { sink.Sink = s; return sink }
		o.IntakeRetryMax = 20 * time.Millisecond
		o.Intake = func(next queue.Handler) queue.Handler {
			return func(ctx context.Context, d *queue.Delivery) {
				mu.Lock()
				delivered = max(delivered, d.NumDelivered)
				mu.Unlock()
				next(ctx, d)
			}
		}
	}})

	arg := transferArg(bob.Principal(), 42, u64(w.srv.Now()), "outage")
	idx, err := l.Transfer(alice.Principal(), arg)
	if err != nil {
		t.Fatal(err)
	}
	doc := toollayer.Transfer("outage-1", l.ID(), alice.Principal(), arg)
	if _, err := w.tool.PublishIntent(w.ctx, l.ID().Encode(), "outage-1", doc.JSON(), matcher.IntentHash(doc.JSON())); err != nil {
		t.Fatal(err)
	}
	v := w.rig.Wait("outage-1", func(v reconciled.Verdict) bool { return v.Final })
	if v.Status != reconciled.StatusFound || v.Block == nil || uint64(v.Block.Index) != idx {
		t.Fatalf("verdict %+v, want found at block %d", v, idx)
	}
	mu.Lock()
	n := delivered
	mu.Unlock()
	if n <= 10 {
		t.Fatalf("decided after %d deliveries: the outage did not outlast the old bound of 10", n)
	}
	if logs := w.rig.Logs.String(); !strings.Contains(logs, "intent keeps failing") || !strings.Contains(logs, `"step":"read the stream's verdict"`) {
		t.Fatalf("no warning naming the failing step:\n%s", logs)
	}
}
