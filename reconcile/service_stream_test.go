package reconcile_test

import (
	"context"
	"encoding/hex"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// The verdict stream is the fleet's record: every store converges on it,
// and it has no gaps that this service makes.

// openStore opens a store of its own, as another instance has.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "other.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// feed imports the stream's history of id into svc, as its follower does.
func feed(t *testing.T, svc *reconcile.Service, sink *fakeSink, id string) {
	t.Helper()
	ctx := context.Background()
	hist, err := sink.History(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, sv := range hist {
		if err := svc.ImportVerdict(ctx, sv.Verdict, sv.Intent); err != nil {
			t.Fatal(err)
		}
	}
}

func seqsOf(vs []reconciled.Verdict) []uint64 {
	var out []uint64
	for _, v := range vs {
		out = append(out, v.Seq)
	}
	return out
}

// A NATS outage across two follow-up rounds leaves seq 2 and seq 3 in the
// outbox. Once NATS is back both are published, 2 before 3, and a second
// store fed from the stream holds all three.
func TestServiceOutboxPublishesEverySeqInOrder(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	e.dec.set("g-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := e.handle(intentBody("g-1", 1)); o.Kind != reconciled.Ack {
		t.Fatalf("%+v", o)
	}
	e.sink.fail = errors.New("nats down")
	e.dec.set("g-1", reconciled.Verdict{Status: reconciled.StatusUnreadable, Reason: &reconciled.Reason{Code: "E_A", Message: "a"}})
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	e.clock = e.clock.Add(time.Hour) // the unreadable back-off has passed
	e.dec.set("g-1", reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: 3}})
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.outbox(); len(got) != 2 {
		t.Fatalf("outbox %+v, want seq 2 and 3", got)
	}
	e.sink.fail = nil
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.sink.seqs("g-1"); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("stream seqs %v, want [1 2 3]", got)
	}
	if got := e.outbox(); len(got) != 0 {
		t.Fatalf("outbox %+v", got)
	}
	other := openStore(t)
	svc2, err := reconcile.NewService(reconcile.ServiceConfig{Decider: e.dec, Store: other, Sink: e.sink})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, svc2, e.sink, "g-1")
	if vs, _ := other.Verdicts(ctx, "g-1"); len(vs) != 3 || !vs[2].Final {
		t.Fatalf("the other store holds seqs %v, want [1 2 3] ending final", seqsOf(vs))
	}
}

// A follow-up verdict is not published while the verdict before it is
// still only in the outbox (the outbox pass of its round failed): the
// earlier one goes first.
func TestServiceFollowUpPublishesTheMissingSeqFirst(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	e.dec.set("g-2", reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := e.handle(intentBody("g-2", 1)); o.Kind != reconciled.Ack {
		t.Fatalf("%+v", o)
	}
	e.sink.fail = errors.New("nats down")
	e.dec.set("g-2", reconciled.Verdict{Status: reconciled.StatusUnreadable, Reason: &reconciled.Reason{Code: "E_A", Message: "a"}})
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	// NATS comes back during the next round, after its outbox pass failed.
	e.sink.mu.Lock()
	e.sink.fail, e.sink.failN = nil, 1
	e.sink.mu.Unlock()
	e.clock = e.clock.Add(time.Hour)
	e.dec.set("g-2", reconciled.Verdict{Status: reconciled.StatusAbsent})
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.sink.seqs("g-2"); len(got) != 3 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("stream seqs %v, want [1 2 3]", got)
	}
}

// A stream written by an older release may already lack a seq. A store
// following it takes the stream's later verdicts as the fleet's record
// instead of refusing them for ever, says so, and counts it.
func TestServiceImportAcceptsTheStreamsGap(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	core, logs := observer.New(zapcore.WarnLevel)
	m := reconcile.NewMetrics()
	svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: e.dec, Store: e.st, Sink: e.sink,
		Log: zap.New(core), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	in, err := matcher.ParseIntent(intentBody("gap-1", 1))
	if err != nil {
		t.Fatal(err)
	}
	hdr := reconciled.IntentHeader{Body: in.Canonical(), Hash: in.Hash()}
	now := time.Now().UTC()
	e.sink.verdicts["gap-1"] = []reconciled.Verdict{
		{IntentID: "gap-1", Seq: 1, Status: reconciled.StatusNotYet, DecidedAt: now},
		{IntentID: "gap-1", Seq: 3, Status: reconciled.StatusAbsent, Final: true, DecidedAt: now},
	}
	e.sink.headers["gap-1"] = hdr
	feed(t, svc, e.sink, "gap-1")
	vs, _ := e.st.Verdicts(ctx, "gap-1")
	if len(vs) != 2 || vs[1].Seq != 3 || !vs[1].Final {
		t.Fatalf("stored seqs %v, want the stream's [1 3]", seqsOf(vs))
	}
	if ws, _ := e.st.Watches(ctx); len(ws) != 0 {
		t.Fatalf("watches %+v after the stream's final verdict", ws)
	}
	if n := m.Get(reconcile.MetricImported, "gap"); n != 1 {
		t.Fatalf("gap counter %d, want 1", n)
	}
	if logs.FilterMessage("verdict stream lacks seqs before this verdict; its verdict is taken as the fleet's").Len() != 1 {
		t.Fatalf("logs %+v", logs.All())
	}
}

// hookSink runs before, once, ahead of the next publish of a verdict: the
// moment between a store's commit and its publish.
type hookSink struct {
	*fakeSink
	before func()
}

func (h *hookSink) PublishVerdict(ctx context.Context, v reconciled.Verdict, in reconciled.IntentHeader) error {
	if f := h.before; f != nil {
		h.before = nil
		f()
	}
	return h.fakeSink.PublishVerdict(ctx, v, in)
}

// Two bodies under one id reach two instances at about the same time: A
// publishes seq 1 for body 1 while B has committed body 2 and not yet
// published. B refuses body 2 and takes the stream's body 1, its verdicts
// and its watch in place of its own; a re-publish of body 1 landing on B
// is answered from B's store, and B follows body 1 up.
func TestServiceConflictRaceTakesTheStreamsBody(t *testing.T) {
	a := newSvcEnv(t)
	ctx := context.Background()
	const id = "race-1"
	body1, body2 := intentBody(id, 1), intentBody(id, 2)
	in1, err := matcher.ParseIntent(body1)
	if err != nil {
		t.Fatal(err)
	}
	a.dec.set(id, reconciled.Verdict{Status: reconciled.StatusNotYet})

	bst := openStore(t)
	hs := &hookSink{fakeSink: a.sink}
	b, err := reconcile.NewService(reconcile.ServiceConfig{Decider: a.dec, Store: bst, Sink: hs,
		Now: func() time.Time { return a.clock }})
	if err != nil {
		t.Fatal(err)
	}
	hs.before = func() {
		if o := a.handle(body1); o.Kind != reconciled.Ack {
			t.Errorf("A: %+v", o)
		}
	}
	if o := b.HandleIntent(ctx, body2); o.Kind != reconciled.Ack {
		t.Fatalf("B: %+v", o)
	}
	if len(a.sink.rejects) != 1 || a.sink.rejects[0] != id+":E_INTENT_CONFLICT" {
		t.Fatalf("rejects %v, want body 2 refused", a.sink.rejects)
	}
	h1 := in1.Hash()
	want := hex.EncodeToString(h1[:])
	rec, err := bst.Intent(ctx, id)
	if err != nil || hex.EncodeToString(rec.Hash[:]) != want {
		t.Fatalf("B stores the body with hash %x (%v), want the stream's body 1 (%s)", rec.Hash, err, want)
	}
	vs, _ := bst.Verdicts(ctx, id)
	if len(vs) != 1 || vs[0].IntentHash != want || vs[0].Status != reconciled.StatusNotYet {
		t.Fatalf("B stores verdicts %+v, want the stream's seq 1", vs)
	}
	if es, _ := bst.Outbox(ctx); len(es) != 0 {
		t.Fatalf("B's outbox %+v", es)
	}
	if ws, _ := bst.Watches(ctx); len(ws) != 1 || ws[0].IntentID != id || ws[0].CanisterID != in1.Canister.Encode() {
		t.Fatalf("B watches %+v, want body 1", ws)
	}

	// A re-publish of body 1 lands on B.
	calls := a.dec.calls[id]
	if o := b.HandleIntent(ctx, body1); o.Kind != reconciled.Ack {
		t.Fatalf("B, body 1: %+v", o)
	}
	if len(a.sink.rejects) != 1 {
		t.Fatalf("rejects %v: body 1 is the fleet's intent", a.sink.rejects)
	}
	if a.dec.calls[id] != calls {
		t.Fatal("body 1 decided again; the store answers it")
	}
	// B holds the ledger's lease: it follows body 1 up.
	a.dec.set(id, reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: 5}})
	if err := b.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if last, _ := a.sink.LastVerdict(ctx, id); last == nil || last.Seq != 2 || last.Status != reconciled.StatusFound || last.IntentHash != want {
		t.Fatalf("stream's last verdict %+v, want B's found for body 1 at seq 2", last)
	}
}

// B committed body 2 and could not publish it (NATS down); its follower
// then brings A's verdict of body 1. B takes the stream's body, and its
// outbox no longer offers body 2's verdict.
func TestServiceImportOfAnotherBodyTakesTheStreams(t *testing.T) {
	a := newSvcEnv(t)
	ctx := context.Background()
	const id = "race-2"
	body1, body2 := intentBody(id, 1), intentBody(id, 2)
	in1, _ := matcher.ParseIntent(body1)
	a.dec.set(id, reconciled.Verdict{Status: reconciled.StatusNotYet})

	bst := openStore(t)
	down := &hookSink{fakeSink: newFakeSink()}
	down.fakeSink.fail = errors.New("nats down")
	b, err := reconcile.NewService(reconcile.ServiceConfig{Decider: a.dec, Store: bst, Sink: down,
		Now: func() time.Time { return a.clock }})
	if err != nil {
		t.Fatal(err)
	}
	if o := b.HandleIntent(ctx, body2); o.Kind != reconciled.Nak {
		t.Fatalf("B: %+v, want a nak (not published)", o)
	}
	if o := a.handle(body1); o.Kind != reconciled.Ack {
		t.Fatalf("A: %+v", o)
	}
	b2, err := reconcile.NewService(reconcile.ServiceConfig{Decider: a.dec, Store: bst, Sink: a.sink,
		Now: func() time.Time { return a.clock }})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, b2, a.sink, id)
	rec, err := bst.Intent(ctx, id)
	if err != nil || rec.Hash != in1.Hash() {
		t.Fatalf("B stores hash %x (%v), want body 1's", rec.Hash, err)
	}
	if es, _ := bst.Outbox(ctx); len(es) != 0 {
		t.Fatalf("B's outbox %+v still offers body 2's verdict", es)
	}
	if err := b2.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if got := a.sink.seqs(id); len(got) != 1 {
		t.Fatalf("stream seqs %v", got)
	}
}

// jsSink is a queue.Sink on an embedded JetStream server of the test's,
// whose publishes can be made to fail or to run a hook first.
type jsSink struct {
	queue.Sink
	mu     sync.Mutex
	fail   error
	before func()
}

func (s *jsSink) PublishVerdict(ctx context.Context, v reconciled.Verdict, in reconciled.IntentHeader) error {
	s.mu.Lock()
	fail, f := s.fail, s.before
	s.before = nil
	s.mu.Unlock()
	if fail != nil {
		return fail
	}
	if f != nil {
		f()
	}
	return s.Sink.PublishVerdict(ctx, v, in)
}

func jetStream(t *testing.T) *queue.Conn {
	t.Helper()
	return jetStreamIn(t, filepath.Join(t.TempDir(), "nats"))
}

// jetStreamIn is jetStream with the embedded server's store under dir.
func jetStreamIn(t *testing.T, dir string) *queue.Conn {
	t.Helper()
	ctx := context.Background()
	emb, err := queue.StartEmbedded(queue.EmbeddedConfig{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	c, err := queue.Connect(ctx, queue.ConnConfig{Embedded: emb, Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// The conflict race and the outage across two rounds on the real verdict
// stream: its refusal of B's seq 1, the intent headers its verdicts carry,
// and its per-subject history.
func TestServiceStreamConvergesOnJetStream(t *testing.T) {
	ctx := context.Background()
	c := jetStream(t)
	dec := &scriptDecider{script: map[string]func() reconciled.Verdict{}, calls: map[string]int{}}
	clock := time.Unix(1_800_000_000, 0)
	newSvc := func(st *store.Store, sink reconcile.Sink) *reconcile.Service {
		svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: dec, Store: st, Sink: sink,
			Now: func() time.Time { return clock }})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	ast, bst := openStore(t), openStore(t)
	a := newSvc(ast, queue.Sink{C: c, Origin: "a"})
	bs := &jsSink{Sink: queue.Sink{C: c, Origin: "b"}}
	b := newSvc(bst, bs)

	const id = "js-race"
	body1, body2 := intentBody(id, 1), intentBody(id, 2)
	in1, _ := matcher.ParseIntent(body1)
	dec.set(id, reconciled.Verdict{Status: reconciled.StatusNotYet})
	bs.before = func() {
		if o := a.HandleIntent(ctx, body1); o.Kind != reconciled.Ack {
			t.Errorf("A: %+v", o)
		}
	}
	if o := b.HandleIntent(ctx, body2); o.Kind != reconciled.Ack {
		t.Fatalf("B: %+v", o)
	}
	if rec, err := bst.Intent(ctx, id); err != nil || rec.Hash != in1.Hash() {
		t.Fatalf("B stores hash %x (%v), want the stream's body 1", rec.Hash, err)
	}
	if ws, _ := bst.Watches(ctx); len(ws) != 1 {
		t.Fatalf("B watches %+v", ws)
	}

	// B's NATS is down for two rounds: seq 2 and 3 of body 1 wait in its
	// outbox; then they reach the stream in order.
	bs.mu.Lock()
	bs.fail = errors.New("nats down")
	bs.mu.Unlock()
	dec.set(id, reconciled.Verdict{Status: reconciled.StatusUnreadable, Reason: &reconciled.Reason{Code: "E_A", Message: "a"}})
	if err := b.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Hour)
	dec.set(id, reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: 3}})
	if err := b.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	bs.mu.Lock()
	bs.fail = nil
	bs.mu.Unlock()
	if err := b.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	hist, err := c.VerdictHistory(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, sv := range hist {
		seqs = append(seqs, sv.Verdict.Seq)
		if sv.Intent == nil || sv.Intent.Hash != in1.Hash() {
			t.Fatalf("stream verdict %d carries %+v, want body 1", sv.Verdict.Seq, sv.Intent)
		}
	}
	if len(seqs) != 3 || seqs[1] != 2 || seqs[2] != 3 {
		t.Fatalf("stream seqs %v, want [1 2 3]", seqs)
	}
	// A, following the stream, holds all three.
	for _, sv := range hist {
		if err := a.ImportVerdict(ctx, sv.Verdict, sv.Intent); err != nil {
			t.Fatal(err)
		}
	}
	if vs, _ := ast.Verdicts(ctx, id); len(vs) != 3 || !vs[2].Final {
		t.Fatalf("A holds seqs %v, want [1 2 3] ending final", seqsOf(vs))
	}
}

// A stream that skips a seq (an older release) after which this store
// decided that seq itself: the stream can never take it, so the store
// drops it for the stream's later verdicts instead of keeping a verdict
// no other store has.
func TestServiceDropsAVerdictTheStreamSkipped(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	e.dec.set("sk-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := e.handle(intentBody("sk-1", 1)); o.Kind != reconciled.Ack {
		t.Fatalf("%+v", o)
	}
	e.sink.fail = errors.New("nats down")
	e.dec.set("sk-1", reconciled.Verdict{Status: reconciled.StatusUnreadable, Reason: &reconciled.Reason{Code: "E_A", Message: "a"}})
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	e.sink.mu.Lock()
	e.sink.fail = nil
	e.sink.verdicts["sk-1"] = append(e.sink.verdicts["sk-1"], reconciled.Verdict{IntentID: "sk-1", Seq: 3,
		Status: reconciled.StatusAbsent, Final: true, DecidedAt: time.Now().UTC()})
	e.sink.mu.Unlock()
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if vs, _ := e.st.Verdicts(ctx, "sk-1"); len(vs) != 2 || vs[1].Seq != 3 || !vs[1].Final {
		t.Fatalf("stored seqs %v, want the stream's [1 3]", seqsOf(vs))
	}
	if got := e.outbox(); len(got) != 0 {
		t.Fatalf("outbox %+v", got)
	}
	if ws, _ := e.st.Watches(ctx); len(ws) != 0 {
		t.Fatalf("watches %+v", ws)
	}
}

// A follow-up decision of body 2 whose store takes the stream's body 1
// while it is decided is dropped: it must never be recorded, or published,
// as a verdict of body 1.
func TestServiceFollowUpDropsADecisionOfAReplacedBody(t *testing.T) {
	a := newSvcEnv(t)
	ctx := context.Background()
	const id = "stale-1"
	body1, body2 := intentBody(id, 1), intentBody(id, 2)
	in1, _ := matcher.ParseIntent(body1)
	in2, _ := matcher.ParseIntent(body2)
	a.dec.set(id, reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := a.handle(body1); o.Kind != reconciled.Ack {
		t.Fatalf("A: %+v", o)
	}
	bst := openStore(t)
	b, err := reconcile.NewService(reconcile.ServiceConfig{Decider: a.dec, Store: bst, Sink: a.sink,
		Now: func() time.Time { return a.clock }})
	if err != nil {
		t.Fatal(err)
	}
	// B's store took body 2 (from a stream it followed before).
	v2 := reconciled.Verdict{IntentID: id, Seq: 1, Status: reconciled.StatusNotYet, DecidedAt: time.Now().UTC()}
	if err := b.ImportVerdict(ctx, v2, &reconciled.IntentHeader{Body: in2.Canonical(), Hash: in2.Hash()}); err != nil {
		t.Fatal(err)
	}
	hist, _ := a.sink.History(ctx, id)
	a.dec.mu.Lock()
	a.dec.script[id] = func() reconciled.Verdict {
		// While body 2 is decided, B's follower brings the stream's body 1.
		if err := b.ImportVerdict(ctx, hist[0].Verdict, hist[0].Intent); err != nil {
			t.Error(err)
		}
		return reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: 8}}
	}
	a.dec.mu.Unlock()
	if err := b.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, err := bst.Intent(ctx, id); err != nil || rec.Hash != in1.Hash() {
		t.Fatalf("B stores hash %x (%v), want body 1's", rec.Hash, err)
	}
	if vs, _ := bst.Verdicts(ctx, id); len(vs) != 1 || vs[0].Status != reconciled.StatusNotYet {
		t.Fatalf("B stores %+v, want only the stream's not_yet of body 1", vs)
	}
	if got := a.sink.seqs(id); len(got) != 1 {
		t.Fatalf("stream seqs %v: body 2's found reached body 1's history", got)
	}
}

// As TestServiceImportOfAnotherBodyTakesTheStreams, but B learns it from
// its outbox pass: its seq 1 of body 2 is refused, and B takes body 1.
func TestServiceOutboxOfAnotherBodyTakesTheStreams(t *testing.T) {
	a := newSvcEnv(t)
	ctx := context.Background()
	const id = "race-3"
	body1, body2 := intentBody(id, 1), intentBody(id, 2)
	in1, _ := matcher.ParseIntent(body1)
	a.dec.set(id, reconciled.Verdict{Status: reconciled.StatusNotYet})
	bst := openStore(t)
	down := newFakeSink()
	down.fail = errors.New("nats down")
	b, err := reconcile.NewService(reconcile.ServiceConfig{Decider: a.dec, Store: bst, Sink: down,
		Now: func() time.Time { return a.clock }})
	if err != nil {
		t.Fatal(err)
	}
	if o := b.HandleIntent(ctx, body2); o.Kind != reconciled.Nak {
		t.Fatalf("B: %+v, want a nak (not published)", o)
	}
	if o := a.handle(body1); o.Kind != reconciled.Ack {
		t.Fatalf("A: %+v", o)
	}
	b2, err := reconcile.NewService(reconcile.ServiceConfig{Decider: a.dec, Store: bst, Sink: a.sink,
		Now: func() time.Time { return a.clock }})
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, err := bst.Intent(ctx, id); err != nil || rec.Hash != in1.Hash() {
		t.Fatalf("B stores hash %x (%v), want body 1's", rec.Hash, err)
	}
	if es, _ := bst.Outbox(ctx); len(es) != 0 {
		t.Fatalf("B's outbox %+v", es)
	}
	if ws, _ := bst.Watches(ctx); len(ws) != 1 || ws[0].IntentID != id {
		t.Fatalf("B watches %+v, want body 1", ws)
	}
	if got := a.sink.seqs(id); len(got) != 1 {
		t.Fatalf("stream seqs %v", got)
	}
	// Body 2 delivered again to B is refused; body 1 is answered.
	if o := b2.HandleIntent(ctx, body2); o.Kind != reconciled.Ack || len(a.sink.rejects) != 1 {
		t.Fatalf("body 2 again: %+v, rejects %v", o, a.sink.rejects)
	}
	if o := b2.HandleIntent(ctx, body1); o.Kind != reconciled.Ack || len(a.sink.rejects) != 1 {
		t.Fatalf("body 1: %+v, rejects %v", o, a.sink.rejects)
	}
}
