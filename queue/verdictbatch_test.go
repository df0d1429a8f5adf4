package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/reconciled/reconciled"
)

// holdBatches makes the next first verdicts queue behind a batch that runs
// until the returned release is called, once want callers wait.
func holdBatches(t *testing.T, c *Conn) (waitFor func(want int), release func()) {
	t.Helper()
	entered, gate, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		c.batches.q.Do(&firstVerdict{ctx: context.Background()}, func([]*firstVerdict) {
			close(entered)
			<-gate
		})
	}()
	<-entered
	waitFor = func(want int) {
		for c.batches.q.Waiting() < want {
			runtime.Gosched() // the queue is polled; this only lets the publishers run
		}
	}
	var once sync.Once
	release = func() {
		once.Do(func() { close(gate) })
		<-done
	}
	t.Cleanup(release)
	return waitFor, release
}

// publishQueued publishes vs side by side while a held batch runs, so that
// every one of them queues before the next batch, and returns each
// intent's error.
func publishQueued(t *testing.T, c *Conn, vs ...reconciled.Verdict) map[string]error {
	t.Helper()
	ctx := testCtx(t)
	waitFor, release := holdBatches(t, c)
	errs := make(map[string]error, len(vs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, v := range vs {
		wg.Go(func() {
			err := c.PublishVerdict(ctx, v)
			mu.Lock()
			errs[v.IntentID] = err
			mu.Unlock()
		})
	}
	waitFor(len(vs))
	release()
	wg.Wait()
	return errs
}

// firsts are first verdicts of intents prefix-from … prefix-(from+n-1).
func firsts(prefix string, from, n int, st reconciled.Status) []reconciled.Verdict {
	vs := make([]reconciled.Verdict, n)
	for i := range vs {
		vs[i] = verdict(fmt.Sprintf("%s-%d", prefix, from+i), 1, st)
	}
	return vs
}

func noErrors(t *testing.T, errs map[string]error) {
	t.Helper()
	for id, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

func subjectMsgs(t *testing.T, c *Conn, intentID string) int {
	t.Helper()
	h, err := c.VerdictHistory(testCtx(t), intentID)
	if err != nil {
		t.Fatal(err)
	}
	return len(h)
}

// TestFirstVerdictsShareOneBatch: first verdicts that queue together are
// stored by one atomic batch, each once, each readable as its intent's
// last verdict, and a second offer of one is a duplicate that changes
// nothing.
func TestFirstVerdictsShareOneBatch(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	if !c.batches.on.Load() {
		t.Fatal("the embedded server's verdict stream does not allow atomic batches")
	}
	const n = 40
	noErrors(t, publishQueued(t, c, firsts("fb", 0, n, reconciled.StatusAbsent)...))
	if got := c.batches.batches.Load(); got != 1 {
		t.Fatalf("%d batches stored, want the %d queued verdicts in one", got, n)
	}
	if got := streamInfo(t, c, VerdictsStream).State.Msgs; got != n {
		t.Fatalf("the stream holds %d verdicts, want %d", got, n)
	}
	for i := range n {
		id := fmt.Sprintf("fb-%d", i)
		v, err := c.LastVerdict(ctx, id)
		if err != nil || v.Seq != 1 || v.Status != reconciled.StatusAbsent {
			t.Fatalf("%s: last verdict %+v, %v", id, v, err)
		}
	}
	if err := c.PublishVerdict(ctx, verdict("fb-3", 1, reconciled.StatusAbsent)); err != nil {
		t.Fatalf("the same first verdict again: %v", err)
	}
	if err := c.PublishVerdict(ctx, verdict("fb-4", 1, reconciled.StatusFound)); !errors.Is(err, ErrVerdictConflict) {
		t.Fatalf("another decision at seq 1 after the batch: %v, want ErrVerdictConflict", err)
	}
	if got := streamInfo(t, c, VerdictsStream).State.Msgs; got != n {
		t.Fatalf("the stream holds %d verdicts after the second offers, want %d", got, n)
	}

	// More than a batch holds are split between batches.
	noErrors(t, publishQueued(t, c, firsts("fbx", 0, maxVerdictBatch+10, reconciled.StatusAbsent)...))
	if got := c.batches.batches.Load(); got != 3 {
		t.Fatalf("%d batches stored in all, want 3: %d queued verdicts in two more", got, maxVerdictBatch+10)
	}
	if got := streamInfo(t, c, VerdictsStream).State.Msgs; got != n+maxVerdictBatch+10 {
		t.Fatalf("the stream holds %d verdicts, want %d", got, n+maxVerdictBatch+10)
	}
}

// TestRefusedBatchGoesOneByOne: a batch holding one verdict whose subject
// already has one is refused whole; every verdict of it is then judged on
// its own, as without batches.
func TestRefusedBatchGoesOneByOne(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	if err := c.PublishVerdict(ctx, verdict("rb-same", 1, reconciled.StatusAbsent)); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishVerdict(ctx, verdict("rb-other", 1, reconciled.StatusAbsent)); err != nil {
		t.Fatal(err)
	}
	want := map[string]error{
		"rb-new-1": nil, "rb-new-2": nil, "rb-new-3": nil,
		"rb-same":  nil,                // the same decision again
		"rb-other": ErrVerdictConflict, // another decision at the stored seq
	}
	var vs []reconciled.Verdict
	for id := range want {
		st := reconciled.StatusAbsent
		if id == "rb-other" {
			st = reconciled.StatusFound
		}
		vs = append(vs, verdict(id, 1, st))
	}
	got := publishQueued(t, c, vs...)
	if n := c.batches.batches.Load(); n != 0 {
		t.Fatalf("%d batches stored, want the batch refused", n)
	}
	for id, w := range want {
		if err := got[id]; (w == nil) != (err == nil) || w != nil && !errors.Is(err, w) {
			t.Errorf("%s: %v, want %v", id, err, w)
		}
		if n := subjectMsgs(t, c, id); n != 1 {
			t.Errorf("%s: %d verdicts on its subject, want 1", id, n)
		}
	}
}

// TestBatchesFollowTheStreamsConfiguration: a verdict stream that does not
// allow atomic batches (made by an older release, or changed by one while
// this connection runs) gets its verdicts one by one, until an instance of
// this release updates it.
func TestBatchesFollowTheStreamsConfiguration(t *testing.T) {
	e, c := setup(t)
	ctx := testCtx(t)
	cfg := streamInfo(t, c, VerdictsStream).Config
	cfg.AllowAtomicPublish = false
	if _, err := c.JetStream().UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	// A connection that looks the stream up reads its configuration.
	late := connect(t, e)
	if err := late.PublishVerdict(ctx, verdict("sc-0", 1, reconciled.StatusAbsent)); err != nil {
		t.Fatal(err)
	}
	if late.batches.on.Load() {
		t.Fatal("batches on for a stream that does not allow them")
	}

	// c read the configuration before it changed: its batch is refused,
	// it stops batching and its verdicts go one by one.
	const n = 5
	noErrors(t, publishQueued(t, c, firsts("sc", 1, n, reconciled.StatusAbsent)...))
	if c.batches.on.Load() {
		t.Fatal("batches still on after the stream refused one as disabled")
	}
	if got := streamInfo(t, c, VerdictsStream).State.Msgs; got != n+1 {
		t.Fatalf("the stream holds %d verdicts, want %d", got, n+1)
	}

	// An instance of this release starting again updates the stream to
	// allow them, and batches once more.
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	if !streamInfo(t, c, VerdictsStream).Config.AllowAtomicPublish || !c.batches.on.Load() {
		t.Fatal("batches still off after the stream was brought to this release's configuration")
	}
}
