package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// fakeSink is a verdict stream in memory that can be made to fail.
type fakeSink struct {
	mu       sync.Mutex
	verdicts map[string][]reconciled.Verdict
	headers  map[string]reconciled.IntentHeader
	rejects  []string
	fail     error
	// failN fails that many publishes (after fail), one each.
	failN int
}

func newFakeSink() *fakeSink {
	return &fakeSink{verdicts: map[string][]reconciled.Verdict{}, headers: map[string]reconciled.IntentHeader{}}
}

func (f *fakeSink) PublishVerdict(_ context.Context, v reconciled.Verdict, in reconciled.IntentHeader) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if f.failN > 0 {
		f.failN--
		return errors.New("publish failed")
	}
	h := f.verdicts[v.IntentID]
	if n := len(h); n > 0 && h[n-1].Seq >= v.Seq {
		return fmt.Errorf("%w: seq %d after %d", reconciled.ErrHistory, v.Seq, h[n-1].Seq)
	}
	f.verdicts[v.IntentID] = append(h, v)
	f.headers[v.IntentID] = in
	return nil
}

func (f *fakeSink) PublishReject(_ context.Context, id, code, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rejects = append(f.rejects, id+":"+code)
	return nil
}

func (f *fakeSink) LastVerdict(_ context.Context, id string) (*reconciled.Verdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.verdicts[id]
	if len(h) == 0 {
		return nil, nil
	}
	v := h[len(h)-1]
	return &v, nil
}

func (f *fakeSink) History(_ context.Context, id string) ([]reconciled.StreamedVerdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []reconciled.StreamedVerdict
	for _, v := range f.verdicts[id] {
		sv := reconciled.StreamedVerdict{Verdict: v}
		if h, ok := f.headers[id]; ok {
			sv.Intent = &h
		}
		out = append(out, sv)
	}
	return out, nil
}

func (f *fakeSink) seqs(id string) []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []uint64
	for _, v := range f.verdicts[id] {
		out = append(out, v.Seq)
	}
	return out
}

// scriptDecider answers each intent with the status its script says,
// counting calls.
type scriptDecider struct {
	mu     sync.Mutex
	script map[string]func() reconciled.Verdict
	calls  map[string]int
	err    error
}

func (d *scriptDecider) DecideMany(ctx context.Context, ins []*matcher.Intent) ([]reconciled.Verdict, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return nil, d.err
	}
	out := make([]reconciled.Verdict, len(ins))
	for i, in := range ins {
		d.calls[in.ID]++
		v := d.script[in.ID]()
		v.IntentID, v.DecidedAt, v.Final = in.ID, time.Now().UTC(), v.Status.Final()
		out[i] = v
	}
	return out, nil
}

func (d *scriptDecider) set(id string, v reconciled.Verdict) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.script[id] = func() reconciled.Verdict { return v }
}

type svcEnv struct {
	t     *testing.T
	st    *store.Store
	sink  *fakeSink
	dec   *scriptDecider
	svc   *reconcile.Service
	clock time.Time
}

func newSvcEnv(t *testing.T) *svcEnv {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &svcEnv{t: t, st: st, sink: newFakeSink(),
		dec: &scriptDecider{script: map[string]func() reconciled.Verdict{}, calls: map[string]int{}}, clock: time.Unix(1_800_000_000, 0)}
	e.svc, err = reconcile.NewService(reconcile.ServiceConfig{Decider: e.dec, Store: st, Sink: e.sink,
		Now: func() time.Time { return e.clock }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func intentBody(id string, amount int) []byte {
	return fmt.Appendf(nil, `{"intent_id":%q,"canister_id":"mxzaz-hqaaa-aaaar-qaada-cai","method":"icrc1_transfer",
		"caller":"2vxsx-fae","args":{"to":"aaaaa-aa","amount":"%d","created_at_time":"1791547201000000000"},"after":"unknown"}`, id, amount)
}

func (e *svcEnv) handle(body []byte) reconciled.Outcome {
	e.t.Helper()
	return e.svc.HandleIntent(context.Background(), body)
}

func TestServiceInvalidIntents(t *testing.T) {
	e := newSvcEnv(t)
	if o := e.handle([]byte(`{"no_id":1}`)); o.Kind != reconciled.Term {
		t.Fatalf("no id: %+v, want term", o)
	}
	if o := e.handle([]byte(`not json`)); o.Kind != reconciled.Term {
		t.Fatalf("not JSON: %+v, want term", o)
	}
	body := []byte(`{"intent_id":"bad-1","canister_id":"mxzaz-hqaaa-aaaar-qaada-cai","method":"icrc1_transfer","caller":"2vxsx-fae",
		"args":{"to":"aaaaa-aa","amount":"1"}}`)
	for range 2 {
		if o := e.handle(body); o.Kind != reconciled.Ack {
			t.Fatalf("invalid with id: %+v, want ack", o)
		}
	}
	vs, err := e.st.Verdicts(context.Background(), "bad-1")
	if err != nil || len(vs) != 1 || vs[0].Status != reconciled.StatusInvalid || vs[0].Reason.Code != matcher.CodeNoStamp {
		t.Fatalf("stored %+v %v", vs, err)
	}
	if got := e.sink.seqs("bad-1"); len(got) != 1 {
		t.Fatalf("published %v", got)
	}
	if string(e.sink.headers["bad-1"].Body) != string(body) {
		t.Fatal("an invalid intent's verdict must carry its body as received")
	}
	// Another body under the id of an invalid intent conflicts.
	if o := e.handle(intentBody("bad-1", 5)); o.Kind != reconciled.Ack || len(e.sink.rejects) != 1 {
		t.Fatalf("%+v rejects %v", o, e.sink.rejects)
	}
}

func TestServiceDecidesOnceAndRepublishesFromStore(t *testing.T) {
	e := newSvcEnv(t)
	e.dec.set("p-1", reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: 7}})
	e.sink.fail = errors.New("nats down")
	if o := e.handle(intentBody("p-1", 1)); o.Kind != reconciled.Nak || o.Delay == 0 {
		t.Fatalf("publish failure: %+v, want a delayed nak", o)
	}
	e.sink.fail = nil
	if o := e.handle(intentBody("p-1", 1)); o.Kind != reconciled.Ack {
		t.Fatalf("redelivery: %+v", o)
	}
	if e.dec.calls["p-1"] != 1 {
		t.Fatalf("decided %d times, want once (the redelivery re-publishes from the store)", e.dec.calls["p-1"])
	}
	if got := e.sink.seqs("p-1"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("stream seqs %v, want [1]", got)
	}
	// Conflict: refused, stored data untouched.
	if o := e.handle(intentBody("p-1", 2)); o.Kind != reconciled.Ack || len(e.sink.rejects) != 1 || e.sink.rejects[0] != "p-1:E_INTENT_CONFLICT" {
		t.Fatalf("conflict: %+v %v", o, e.sink.rejects)
	}
	vs, _ := e.st.Verdicts(context.Background(), "p-1")
	if len(vs) != 1 {
		t.Fatalf("history %+v", vs)
	}
}

func TestServiceShutdownGivesIntentBack(t *testing.T) {
	e := newSvcEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.dec.err = context.Canceled
	if o := e.svc.HandleIntent(ctx, intentBody("s-1", 1)); o.Kind != reconciled.Nak || o.Delay != 0 {
		t.Fatalf("%+v, want an immediate nak", o)
	}
	// Stored without a verdict: the next delivery decides it.
	e.dec.err = nil
	e.dec.set("s-1", reconciled.Verdict{Status: reconciled.StatusNotYet, Window: &reconciled.Window{ToTS: 5}})
	if o := e.handle(intentBody("s-1", 1)); o.Kind != reconciled.Ack {
		t.Fatalf("%+v", o)
	}
	if vs, _ := e.st.Verdicts(context.Background(), "s-1"); len(vs) != 1 || vs[0].Status != reconciled.StatusNotYet {
		t.Fatalf("history %+v", vs)
	}
}

func TestServiceFollowUp(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	unread := func(code string) reconciled.Verdict {
		return reconciled.Verdict{Status: reconciled.StatusUnreadable, Reason: &reconciled.Reason{Code: code, Message: code}}
	}
	e.dec.set("f-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	e.dec.set("f-2", unread("E_TRANSPORT"))
	for _, id := range []string{"f-1", "f-2"} {
		if o := e.handle(intentBody(id, 1)); o.Kind != reconciled.Ack {
			t.Fatalf("%s: %+v", id, o)
		}
	}
	watches := func() map[string]reconciled.Watch {
		ws, err := e.st.Watches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]reconciled.Watch{}
		for _, w := range ws {
			m[w.IntentID] = w
		}
		return m
	}
	if w := watches(); len(w) != 2 || w["f-2"].Attempts != 1 || !w["f-2"].NextCheck.Equal(e.clock.Add(2*time.Second)) {
		t.Fatalf("watches %+v", w)
	}
	// Same answers: nothing new published; the unreadable one is not due.
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if e.dec.calls["f-2"] != 1 || len(e.sink.seqs("f-1")) != 1 {
		t.Fatalf("calls %v, f-1 seqs %v", e.dec.calls, e.sink.seqs("f-1"))
	}
	// Due, still unreadable with the same code: backoff doubles, no verdict.
	e.clock = e.clock.Add(2 * time.Second)
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if w := watches()["f-2"]; w.Attempts != 2 || !w.NextCheck.Equal(e.clock.Add(4*time.Second)) || len(e.sink.seqs("f-2")) != 1 {
		t.Fatalf("after a second unreadable check: %+v, seqs %v", w, e.sink.seqs("f-2"))
	}
	// Another reason code is news: a new verdict.
	e.clock = e.clock.Add(4 * time.Second)
	e.dec.set("f-2", unread("E_CERTIFICATE"))
	e.dec.set("f-1", reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: 3}})
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.sink.seqs("f-2"); len(got) != 2 || got[1] != 2 {
		t.Fatalf("f-2 seqs %v", got)
	}
	if got := e.sink.seqs("f-1"); len(got) != 2 || got[1] != 2 {
		t.Fatalf("f-1 seqs %v", got)
	}
	if w := watches(); len(w) != 1 || w["f-2"].Attempts != 3 {
		t.Fatalf("a final verdict ends the watch: %+v", w)
	}
	// The backoff is capped at 5 min, and never gives up.
	for range 12 {
		e.clock = e.clock.Add(10 * time.Minute)
		if err := e.svc.FollowUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if w := watches()["f-2"]; w.NextCheck.Sub(e.clock) != 5*time.Minute {
		t.Fatalf("backoff after %d attempts: %s", w.Attempts, w.NextCheck.Sub(e.clock))
	}
}

func TestServiceImportSkipsContradictions(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	body := intentBody("i-1", 1)
	in, err := matcher.ParseIntent(body)
	if err != nil {
		t.Fatal(err)
	}
	hdr := &reconciled.IntentHeader{Body: in.Canonical(), Hash: in.Hash()}
	v := reconciled.Verdict{IntentID: "i-1", Seq: 1, Status: reconciled.StatusNotYet, DecidedAt: time.Now().UTC()}
	if err := e.svc.ImportVerdict(ctx, v, hdr); err != nil {
		t.Fatal(err)
	}
	rec, err := e.st.Intent(ctx, "i-1")
	if err != nil || string(rec.Body) != string(in.Canonical()) {
		t.Fatalf("imported intent %+v %v", rec, err)
	}
	// The stream holds no seq 2: its seq 3 is the fleet's record, stored
	// after the same gap rather than retried for ever.
	gap := v
	gap.Seq = 3
	if err := e.svc.ImportVerdict(ctx, gap, hdr); err != nil {
		t.Fatalf("a seq gap must be taken, not retried: %v", err)
	}
	other := v
	other.Status = reconciled.StatusUnreadable
	other.Reason = &reconciled.Reason{Code: "E_X", Message: "x"}
	if err := e.svc.ImportVerdict(ctx, other, hdr); err != nil {
		t.Fatalf("a conflicting seq must be skipped: %v", err)
	}
	if vs, _ := e.st.Verdicts(ctx, "i-1"); len(vs) != 2 || vs[0].Status != reconciled.StatusNotYet || vs[1].Seq != 3 {
		t.Fatalf("history %+v", vs)
	}
}

// Concurrent intents of one ledger are decided in shared batches; each
// still gets its own verdict.
func TestServiceBatchesKeepVerdictsApart(t *testing.T) {
	e := newSvcEnv(t)
	const n = 40
	for i := range n {
		e.dec.set(fmt.Sprint("b-", i), reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: reconciled.U64(1000 + i)}})
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o := e.handle(intentBody(fmt.Sprint("b-", i), i+1)); o.Kind != reconciled.Ack {
				t.Errorf("b-%d: %+v", i, o)
			}
		}()
	}
	wg.Wait()
	for i := range n {
		id := fmt.Sprint("b-", i)
		v, err := e.st.LatestVerdict(context.Background(), id)
		if err != nil || v.IntentID != id || v.Block == nil || uint64(v.Block.Index) != uint64(1000+i) {
			t.Fatalf("%s: %+v %v", id, v, err)
		}
		if e.dec.calls[id] != 1 {
			t.Fatalf("%s decided %d times", id, e.dec.calls[id])
		}
	}
}

// joinDecider decides the first intent only once the test lets it, after
// every later intent of the ledger has joined and been answered.
type joinDecider struct {
	once    sync.Once // a failed decision's intents come back as the next batch
	started chan struct{}
	release chan struct{}
	joined  chan string
}

func (d *joinDecider) DecideMany(context.Context, []*matcher.Intent) ([]reconciled.Verdict, error) {
	return nil, errors.New("joinDecider: DecideMany called; the service should join")
}

func (d *joinDecider) DecideJoining(ctx context.Context, ledger string, ins []*matcher.Intent, join reconcile.Joins, done func(int, reconciled.Verdict)) error {
	found := func(in *matcher.Intent, at uint64) reconciled.Verdict {
		return reconciled.Verdict{IntentID: in.ID, Status: reconciled.StatusFound, Final: true,
			Block: &reconciled.BlockRef{Index: reconciled.U64(at)}, DecidedAt: time.Now().UTC()}
	}
	d.once.Do(func() { close(d.started) })
	k := len(ins)
	for {
		select {
		case <-d.release:
			for i, in := range ins {
				done(i, found(in, 100+uint64(i)))
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case id := <-d.joined:
			// The intent is on its way into the batch: the batch's wake
			// says when it is there (a stale wake finds nothing).
			for {
				select {
				case <-join.Arrived:
				case <-time.After(time.Minute):
					return fmt.Errorf("%s: no wake from the batch it joined", id)
				case <-ctx.Done():
					return ctx.Err()
				}
				more := join.Take()
				if len(more) == 0 {
					continue
				}
				for _, in := range more {
					if in.ID != id {
						return fmt.Errorf("joined %s, want %s", in.ID, id)
					}
					done(k, found(in, 200+uint64(k)))
					k++
				}
				break
			}
		}
	}
}

// An intent arriving while a decision of its ledger runs joins it and is
// stored, published and acked as soon as its verdict is known, while the
// decision it joined goes on.
func TestServiceJoinsRunningDecision(t *testing.T) {
	e := newSvcEnv(t)
	d := &joinDecider{started: make(chan struct{}), release: make(chan struct{}), joined: make(chan string)}
	svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: d, Store: e.st, Sink: e.sink,
		Now: func() time.Time { return e.clock }})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan reconciled.Outcome, 1)
	go func() { first <- svc.HandleIntent(context.Background(), intentBody("j-0", 1)) }()
	<-d.started
	for i := 1; i <= 3; i++ {
		id := fmt.Sprint("j-", i)
		out := make(chan reconciled.Outcome, 1)
		go func() { out <- svc.HandleIntent(context.Background(), intentBody(id, i+1)) }()
		d.joined <- id
		select {
		case o := <-out:
			if o.Kind != reconciled.Ack {
				t.Fatalf("%s: %+v", id, o)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s: not answered while the decision it joined ran", id)
		}
		v, err := e.st.LatestVerdict(context.Background(), id)
		if err != nil || v.Block == nil || uint64(v.Block.Index) != uint64(200+i) {
			t.Fatalf("%s stored %+v %v", id, v, err)
		}
		select {
		case o := <-first:
			t.Fatalf("the first intent settled (%+v) before its decision was released", o)
		default:
		}
	}
	close(d.release)
	if o := <-first; o.Kind != reconciled.Ack {
		t.Fatalf("first: %+v", o)
	}
	if v, err := e.st.LatestVerdict(context.Background(), "j-0"); err != nil || v.Block == nil || v.Block.Index != 100 {
		t.Fatalf("first stored %+v %v", v, err)
	}
}

// TestFollowUpRecordsCheckTimes: a not_yet intent checked again without
// news gets no verdict, yet the store learns that it was checked, and when;
// so does an unreadable one retried.
func TestFollowUpRecordsCheckTimes(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	e.dec.set("c-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	e.dec.set("c-2", reconciled.Verdict{Status: reconciled.StatusUnreadable, Reason: &reconciled.Reason{Code: "E_TRANSPORT", Message: "x"}})
	for _, id := range []string{"c-1", "c-2"} {
		if o := e.handle(intentBody(id, 1)); o.Kind != reconciled.Ack {
			t.Fatalf("%s: %+v", id, o)
		}
	}
	for round := range 3 {
		e.clock = e.clock.Add(time.Minute)
		if err := e.svc.FollowUp(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"c-1", "c-2"} {
			w, err := e.st.WatchOf(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !w.CheckedAt.Equal(e.clock) {
				t.Errorf("round %d: %s last checked at %v, want %v", round, id, w.CheckedAt, e.clock)
			}
		}
	}
	if got := e.sink.seqs("c-1"); len(got) != 1 {
		t.Errorf("c-1 seqs %v: a not_yet again is no verdict", got)
	}
}

// countingStore counts the service's reads of an intent's latest verdict.
type countingStore struct {
	*store.Store
	mu     sync.Mutex
	latest int
}

func (s *countingStore) LatestVerdict(ctx context.Context, id string) (reconciled.Verdict, error) {
	s.mu.Lock()
	s.latest++
	s.mu.Unlock()
	return s.Store.LatestVerdict(ctx, id)
}

// TestServiceKnownIntentReadsItsVerdictsOnce: a redelivered intent the
// store holds is answered from one read of its verdicts (the latest, to
// find it known; its list, to hold the stream to it), not from a read
// before and after each step.
func TestServiceKnownIntentReadsItsVerdictsOnce(t *testing.T) {
	e := newSvcEnv(t)
	cs := &countingStore{Store: e.st}
	svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: e.dec, Store: cs, Sink: e.sink,
		Now: func() time.Time { return e.clock }})
	if err != nil {
		t.Fatal(err)
	}
	e.dec.set("k-1", reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: 7}})
	body := intentBody("k-1", 1)
	if o := svc.HandleIntent(context.Background(), body); o.Kind != reconciled.Ack {
		t.Fatalf("first delivery: %+v", o)
	}
	cs.mu.Lock()
	cs.latest = 0
	cs.mu.Unlock()
	if o := svc.HandleIntent(context.Background(), body); o.Kind != reconciled.Ack {
		t.Fatalf("redelivery: %+v", o)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.latest != 1 {
		t.Fatalf("a known intent's latest verdict read %d times, want 1", cs.latest)
	}
	if got := e.sink.seqs("k-1"); len(got) != 1 {
		t.Fatalf("published %v, want seq 1 once", got)
	}
}
