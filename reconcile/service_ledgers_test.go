package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
)

const (
	hungLedger = "mxzaz-hqaaa-aaaar-qaada-cai"
	liveLedger = "ryjl3-tyaaa-aaaaa-aaaba-cai"
)

func intentOn(id, ledger string) []byte {
	return fmt.Appendf(nil, `{"intent_id":%q,"canister_id":%q,"method":"icrc1_transfer",
		"caller":"2vxsx-fae","args":{"to":"aaaaa-aa","amount":"1","created_at_time":"1791547201000000000"},"after":"unknown"}`, id, ledger)
}

// hangingDecider is a scriptDecider whose decisions of one ledger, once
// armed, hang until released (a ledger whose reads never answer), and
// which reports every decision it makes.
type hangingDecider struct {
	*scriptDecider
	ledger  string
	mu      sync.Mutex
	armed   bool
	hung    chan struct{} // closed when a decision of ledger hangs
	release chan struct{}
	decided chan string // the ids of each finished decision
}

func (d *hangingDecider) DecideMany(ctx context.Context, ins []*matcher.Intent) ([]reconciled.Verdict, error) {
	d.mu.Lock()
	hang := d.armed && ins[0].Canister.Encode() == d.ledger
	if hang {
		d.armed = false
		close(d.hung)
	}
	d.mu.Unlock()
	if hang {
		select {
		case <-d.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	vs, err := d.scriptDecider.DecideMany(ctx, ins)
	for _, in := range ins {
		select {
		case d.decided <- in.ID:
		default:
		}
	}
	return vs, err
}

// publishedSink reports each final verdict it takes.
type publishedSink struct {
	*fakeSink
	finals chan string
}

func (s publishedSink) PublishVerdict(ctx context.Context, v reconciled.Verdict, in reconciled.IntentHeader) error {
	err := s.fakeSink.PublishVerdict(ctx, v, in)
	if err == nil && v.Final {
		s.finals <- v.IntentID
	}
	return err
}

// lockedClock is a wall clock the test moves while the service reads it.
type lockedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *lockedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *lockedClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// One ledger whose reads hang holds up only its own follow-up: the other
// ledger's open intent reaches its final verdict meanwhile, its completed
// round is exposed, and the hung ledger's round is reported late.
func TestServiceFollowUpLedgerDoesNotWaitForAnother(t *testing.T) {
	e := newSvcEnv(t)
	dec := &hangingDecider{scriptDecider: e.dec, ledger: hungLedger, hung: make(chan struct{}),
		release: make(chan struct{}), decided: make(chan string, 16)}
	sink := publishedSink{fakeSink: e.sink, finals: make(chan string, 4)}
	clock := &lockedClock{t: e.clock}
	core, logs := observer.New(zapcore.WarnLevel)
	m := reconcile.NewMetrics()
	svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: dec, Store: e.st, Sink: sink,
		Log: zap.New(core), Metrics: m, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.dec.set("hung-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	e.dec.set("live-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	for _, b := range [][]byte{intentOn("hung-1", hungLedger), intentOn("live-1", liveLedger)} {
		if o := svc.HandleIntent(ctx, b); o.Kind != reconciled.Ack {
			t.Fatalf("%+v", o)
		}
	}
	for range 2 {
		<-dec.decided
	}

	dec.mu.Lock()
	dec.armed = true
	dec.mu.Unlock()
	const interval = time.Hour // rounds start only when triggered
	trigger := make(chan struct{}, 1)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunFollowUp(rctx, interval, trigger)
	}()
	released := false
	stop := func() {
		if !released {
			released = true
			close(dec.release)
		}
		cancel()
		<-done
	}
	defer stop()
	<-dec.hung
	begun := clock.now()
	// The live ledger's first round: not_yet again.
	for id := range dec.decided {
		if id == "live-1" {
			break
		}
	}
	e.dec.set("live-1", reconciled.Verdict{Status: reconciled.StatusAbsent})
	clock.add(4 * interval)
	trigger <- struct{}{}
	select {
	case id := <-sink.finals:
		if id != "live-1" {
			t.Fatalf("final verdict of %s", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the live ledger's intent got no final verdict while the other ledger's round hung")
	}
	// The tick that started it found the hung ledger's round 4 intervals
	// old, before starting the live one.
	if logs.FilterMessage("follow-up round of a ledger is late").FilterField(zap.String("canister_id", hungLedger)).Len() == 0 {
		t.Fatalf("no late warning for the hung ledger; logs %+v", logs.All())
	}
	// The hung ledger's sample is when its first round began: its age is
	// how late it is.
	if ts, want := m.Gauge(reconcile.MetricFollowUpLastRound, hungLedger), float64(begun.UnixNano())/1e9; ts != want {
		t.Fatalf("the hung ledger's last round at %v, want when its first began, %v", ts, want)
	}
	// RunFollowUp returns once every round has ended.
	stop()
	if ts, want := m.Gauge(reconcile.MetricFollowUpLastRound, liveLedger), float64(clock.now().Unix()); ts != want {
		t.Fatalf("live ledger's last round at %v, want %v", ts, want)
	}
}

// The verdict follower imports the fleet's verdicts one at a time: a
// verdict of an intent this instance is deciding must not wait for that
// decision, which may read a slow ledger for minutes.
func TestServiceImportDoesNotWaitForADecision(t *testing.T) {
	e := newSvcEnv(t)
	dec := &hangingDecider{scriptDecider: e.dec, ledger: hungLedger, armed: true, hung: make(chan struct{}),
		release: make(chan struct{}), decided: make(chan string, 16)}
	svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: dec, Store: e.st, Sink: e.sink,
		Now: func() time.Time { return e.clock }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body := intentOn("slow-1", hungLedger)
	in, err := matcher.ParseIntent(body)
	if err != nil {
		t.Fatal(err)
	}
	e.dec.set("slow-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	handled := make(chan reconciled.Outcome, 1)
	go func() { handled <- svc.HandleIntent(ctx, body) }()
	<-dec.hung
	released := false
	defer func() {
		if !released {
			close(dec.release)
			<-handled
		}
	}()

	// Another instance decided it meanwhile; its verdict reaches the
	// stream and this instance's follower.
	fleet := reconciled.Verdict{IntentID: "slow-1", Seq: 1, Status: reconciled.StatusFound, Final: true,
		Block: &reconciled.BlockRef{Index: 4}, DecidedAt: time.Now().UTC()}
	hdr := reconciled.IntentHeader{Body: in.Canonical(), Hash: in.Hash()}
	if err := e.sink.PublishVerdict(ctx, fleet, hdr); err != nil {
		t.Fatal(err)
	}
	imported := make(chan error, 1)
	go func() { imported <- svc.ImportVerdict(ctx, fleet, &hdr) }()
	select {
	case err := <-imported:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the import waited for the intent's decision")
	}
	released = true
	close(dec.release)
	if o := <-handled; o.Kind != reconciled.Ack {
		t.Fatalf("%+v", o)
	}
	if vs, _ := e.st.Verdicts(ctx, "slow-1"); len(vs) != 1 || vs[0].Status != reconciled.StatusFound {
		t.Fatalf("stored %+v, want the fleet's found", vs)
	}
	if got := e.sink.seqs("slow-1"); len(got) != 1 {
		t.Fatalf("stream seqs %v", got)
	}
	if es := e.outbox(); len(es) != 0 {
		t.Fatalf("outbox %+v", es)
	}
}
