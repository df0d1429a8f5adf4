package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
)

func verdict(id string, seq uint64, status reconciled.Status) reconciled.Verdict {
	return reconciled.Verdict{
		IntentID:  id,
		Seq:       seq,
		Status:    status,
		Final:     status.Final(),
		DecidedAt: time.Date(2026, 11, 29, 15, 0, int(seq), 0, time.UTC),
	}
}

func TestLastVerdictAndWatch(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	if _, err := c.LastVerdict(ctx, "w-1"); !errors.Is(err, ErrNoVerdict) {
		t.Fatalf("LastVerdict before any: %v", err)
	}
	for seq := uint64(1); seq <= 2; seq++ {
		if err := c.PublishVerdict(ctx, verdict("w-1", seq, reconciled.StatusNotYet)); err != nil {
			t.Fatal(err)
		}
	}
	// Another intent's verdict must not leak into w-1's answers.
	if err := c.PublishVerdict(ctx, verdict("w-10", 7, reconciled.StatusAbsent)); err != nil {
		t.Fatal(err)
	}
	v, err := c.LastVerdict(ctx, "w-1")
	if err != nil || v.Seq != 2 || v.Status != reconciled.StatusNotYet {
		t.Fatalf("LastVerdict = %+v, %v", v, err)
	}

	seen := make(chan reconciled.Verdict, 8)
	watched := make(chan error, 1)
	go func() {
		watched <- c.WatchIntent(ctx, "w-1", func(v reconciled.Verdict) error {
			seen <- v
			if v.Final {
				return ErrStop
			}
			return nil
		})
	}()
	if first := recv(t, seen, "last verdict"); first.Seq != 2 {
		t.Fatalf("watch started with seq %d, want the last (2)", first.Seq)
	}
	final := verdict("w-1", 3, reconciled.StatusFound)
	final.Block = &reconciled.BlockRef{Index: 1042, TS: 1791547201733000000, Hash: "ab", Kind: "xfer"}
	if err := c.PublishVerdict(ctx, final); err != nil {
		t.Fatal(err)
	}
	got := recv(t, seen, "new verdict")
	if got.Seq != 3 || got.Block == nil || got.Block.Index != 1042 || !got.DecidedAt.Equal(final.DecidedAt) {
		t.Fatalf("watch got %+v", got)
	}
	if err := recv(t, watched, "watch end"); err != nil {
		t.Fatalf("WatchIntent: %v", err)
	}
}

func TestWatchIntentBeforeFirstVerdictEndsWithContext(t *testing.T) {
	_, c := setup(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	seen := make(chan uint64, 4)
	done := make(chan error, 1)
	go func() {
		done <- c.WatchIntent(ctx, "later-1", func(v reconciled.Verdict) error {
			seen <- v.Seq
			return nil
		})
	}()
	// Whether the watch is set up before or after this publish, the verdict
	// is seen exactly once: as the last one or as a new one.
	if err := c.PublishVerdict(ctx, verdict("later-1", 1, reconciled.StatusNotYet)); err != nil {
		t.Fatal(err)
	}
	if seq := recv(t, seen, "verdict"); seq != 1 {
		t.Fatalf("seq %d", seq)
	}
	if err := c.PublishVerdict(ctx, verdict("later-1", 2, reconciled.StatusNotYet)); err != nil {
		t.Fatal(err)
	}
	if seq := recv(t, seen, "second verdict"); seq != 2 {
		t.Fatalf("seq %d (a verdict delivered twice?)", seq)
	}
	cancel()
	if err := recv(t, done, "watch end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchIntent after cancel: %v", err)
	}
}

func TestVerdictDedupOnIntentAndSeq(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	v := verdict("d-1", 1, reconciled.StatusNotYet)
	for range 3 {
		if err := c.PublishVerdict(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	// A re-publication from a store that re-encoded decided_at is the same
	// verdict.
	again := v
	again.DecidedAt = v.DecidedAt.In(time.FixedZone("X", 3600))
	if err := c.PublishVerdict(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishVerdict(ctx, verdict("d-1", 2, reconciled.StatusAbsent)); err != nil {
		t.Fatal(err)
	}
	info := streamInfo(t, c, VerdictsStream, jetstream.WithSubjectFilter("reconcile.verdicts.d-1"))
	if info.State.Msgs != 2 {
		t.Fatalf("verdict stream holds %d messages for d-1, want 2", info.State.Msgs)
	}
}

// A first verdict is offered without reading the subject first; another
// decision at seq 1 (the same message id, so within the stream's duplicate
// window) must still be refused, not taken for a re-publication.
func TestFirstVerdictOtherDecisionRefused(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	first := verdict("f-1", 1, reconciled.StatusNotYet)
	if err := c.PublishVerdict(ctx, first); err != nil {
		t.Fatal(err)
	}
	found := verdict("f-1", 1, reconciled.StatusFound)
	found.Block = &reconciled.BlockRef{Index: 3, Hash: "cc"}
	if err := c.PublishVerdict(ctx, found); !errors.Is(err, ErrVerdictConflict) {
		t.Fatalf("seq 1, other decision: %v", err)
	}
	if err := c.PublishVerdict(ctx, first); err != nil {
		t.Fatalf("seq 1 re-published: %v", err)
	}
	v, err := c.LastVerdict(ctx, "f-1")
	if err != nil || v.Seq != 1 || v.Status != reconciled.StatusNotYet {
		t.Fatalf("last verdict %+v %v", v, err)
	}
	if n := streamInfo(t, c, VerdictsStream, jetstream.WithSubjectFilter("reconcile.verdicts.f-1")).State.Msgs; n != 1 {
		t.Fatalf("stream holds %d verdicts of f-1, want 1", n)
	}
}

// Readers take the last message of an intent as its verdict, so the stream
// must never end on an older seq, a contradicting decision, or anything
// after a final verdict.
func TestVerdictHistoryStaysMonotonic(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	for seq := uint64(1); seq <= 3; seq++ {
		if err := c.PublishVerdict(ctx, verdict("m-1", seq, reconciled.StatusNotYet)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PublishVerdict(ctx, verdict("m-1", 2, reconciled.StatusNotYet)); !errors.Is(err, ErrStaleVerdict) {
		t.Fatalf("older seq: %v", err)
	}
	if err := c.PublishVerdict(ctx, verdict("m-1", 3, reconciled.StatusUnreadable)); !errors.Is(err, ErrVerdictConflict) {
		t.Fatalf("same seq, other decision: %v", err)
	}
	found := verdict("m-1", 4, reconciled.StatusFound)
	found.Block = &reconciled.BlockRef{Index: 7, Hash: "aa"}
	if err := c.PublishVerdict(ctx, found); err != nil {
		t.Fatal(err)
	}
	otherBlock := found
	otherBlock.Block = &reconciled.BlockRef{Index: 8, Hash: "bb"}
	if err := c.PublishVerdict(ctx, otherBlock); !errors.Is(err, ErrVerdictConflict) {
		t.Fatalf("same seq, other block: %v", err)
	}
	if err := c.PublishVerdict(ctx, verdict("m-1", 5, reconciled.StatusAbsent)); !errors.Is(err, ErrAfterFinal) {
		t.Fatalf("after final: %v", err)
	}
	if err := c.PublishVerdict(ctx, reconciled.Verdict{IntentID: "m-2", Seq: 1, Status: "maybe"}); err == nil {
		t.Fatal("unknown status published")
	}
	v, err := c.LastVerdict(ctx, "m-1")
	if err != nil || v.Seq != 4 || v.Block.Index != 7 {
		t.Fatalf("last verdict %+v %v", v, err)
	}
	if n := streamInfo(t, c, VerdictsStream).State.Msgs; n != 4 {
		t.Fatalf("stream holds %d verdicts, want 4", n)
	}
}

func TestConcurrentVerdictPublishersKeepOrder(t *testing.T) {
	e, a := setup(t)
	conns := []*Conn{a, connect(t, e), connect(t, e)}
	ctx := testCtx(t)
	const last = 60
	var wg sync.WaitGroup
	for k, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each publisher owns every third seq, so a publisher that
			// checked the history just before another wrote would append an
			// older seq after a newer one without the server-side check.
			for seq := uint64(1 + k); seq <= last; seq += uint64(len(conns)) {
				err := c.PublishVerdict(ctx, verdict("cc-1", seq, reconciled.StatusNotYet))
				// Losing a race to a later seq is the only acceptable refusal.
				if err != nil && !errors.Is(err, ErrStaleVerdict) {
					t.Errorf("seq %d: %v", seq, err)
				}
			}
		}()
	}
	wg.Wait()
	var seqs []uint64
	ch := make(chan struct{}, last)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- a.FollowVerdicts(wctx, FollowConfig{Durable: "check"}, func(v reconciled.Verdict) error {
			seqs = append(seqs, v.Seq)
			ch <- struct{}{}
			return nil
		})
	}()
	n := streamInfo(t, a, VerdictsStream).State.Msgs
	for range n {
		recv(t, ch, "verdict")
	}
	cancel()
	if err := recv(t, done, "follow end"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("stream order of seqs %v is not strictly increasing", seqs)
		}
	}
	if len(seqs) == 0 || seqs[len(seqs)-1] != last {
		t.Fatalf("stream ends with %v, want seq %d last", seqs, last)
	}
	t.Logf("%d of %d seqs stored", len(seqs), last)
}

func TestFollowVerdictsTwoDurablesEachGetAll(t *testing.T) {
	e, a := setup(t)
	b := connect(t, e)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()

	// Some verdicts exist before the followers start, some arrive after.
	var want []string
	publish := func(id string, seq uint64) {
		t.Helper()
		if err := a.PublishVerdict(ctx, verdict(id, seq, reconciled.StatusNotYet)); err != nil {
			t.Fatal(err)
		}
		want = append(want, VerdictMsgID(id, seq))
	}
	for i := range 5 {
		publish(fmt.Sprintf("f-%d", i), 1)
	}

	type follower struct {
		mu     sync.Mutex
		got    []string
		failed bool
		ch     chan struct{}
		done   chan error
	}
	fs := []*follower{{ch: make(chan struct{}, 64), done: make(chan error, 1)}, {ch: make(chan struct{}, 64), done: make(chan error, 1)}}
	for i, c := range []*Conn{a, b} {
		f := fs[i]
		go func() {
			f.done <- c.FollowVerdicts(ctx, FollowConfig{Durable: fmt.Sprintf("store-%d", i), NakDelay: 20 * time.Millisecond},
				func(v reconciled.Verdict) error {
					f.mu.Lock()
					defer f.mu.Unlock()
					// The second follower's store fails once: the verdict must
					// come again, before any later one.
					if i == 1 && v.IntentID == "f-2" && !f.failed {
						f.failed = true
						return errors.New("store busy")
					}
					f.got = append(f.got, VerdictMsgID(v.IntentID, v.Seq))
					f.ch <- struct{}{}
					return nil
				})
		}()
	}
	for i := range 5 {
		publish(fmt.Sprintf("f-%d", i), 2)
	}
	for i, f := range fs {
		for range want {
			recv(t, f.ch, fmt.Sprintf("follower %d verdict", i))
		}
	}
	cancel()
	for i, f := range fs {
		if err := recv(t, f.done, "follow end"); err != nil {
			t.Errorf("follower %d: %v", i, err)
		}
		f.mu.Lock()
		if fmt.Sprint(f.got) != fmt.Sprint(want) {
			t.Errorf("follower %d got %v, want %v (stream order)", i, f.got, want)
		}
		f.mu.Unlock()
	}
	if !fs[1].failed {
		t.Error("the failing store never failed")
	}
}

func TestFollowVerdictsResumesDurable(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	run := func(want int) []uint64 {
		t.Helper()
		var got []uint64
		for _, v := range followN(t, c, FollowConfig{Durable: "store"}, want) {
			got = append(got, v.Seq)
		}
		return got
	}
	for seq := uint64(1); seq <= 2; seq++ {
		if err := c.PublishVerdict(ctx, verdict("r-1", seq, reconciled.StatusNotYet)); err != nil {
			t.Fatal(err)
		}
	}
	if got := run(2); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("first run %v", got)
	}
	if err := c.PublishVerdict(ctx, verdict("r-1", 3, reconciled.StatusAbsent)); err != nil {
		t.Fatal(err)
	}
	if got := run(1); fmt.Sprint(got) != "[3]" {
		t.Fatalf("second run %v, want only the new verdict", got)
	}
	// A follower named after a pod that is gone must not stay forever.
	cons, err := c.JetStream().Consumer(ctx, VerdictsStream, "store")
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.InactiveThreshold; got != 7*24*time.Hour {
		t.Fatalf("follower inactive threshold %s, want 7 days", got)
	}
}

// A follower skips the verdicts its own store published (SkipOrigin) and
// acks them, so the ones after them still come, in order; another origin,
// even one sharing the instance's name, and a verdict without an origin
// are handed over.
func TestFollowVerdictsSkipsItsOwnOrigin(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	own, other := Sink{C: c, Origin: "a:1"}, Sink{C: c, Origin: "a:2"}
	in := reconciled.IntentHeader{Body: []byte(`{}`)}
	for i, s := range []Sink{own, other, own, {C: c}, other, own} {
		if err := s.PublishVerdict(ctx, verdict(fmt.Sprintf("o-%d", i), 1, reconciled.StatusNotYet), in); err != nil {
			t.Fatal(err)
		}
	}
	follow := func(durable, skip string, want int) []string {
		t.Helper()
		var got []string
		for _, v := range followN(t, c, FollowConfig{Durable: durable, SkipOrigin: skip}, want) {
			got = append(got, v.IntentID)
		}
		return got
	}
	if got := follow("store-a1", "a:1", 3); fmt.Sprint(got) != "[o-1 o-3 o-4]" {
		t.Fatalf("follower of origin a:1 got %v, want the other origin's and the unmarked verdicts", got)
	}
	if got := follow("store-a3", "a:3", 6); len(got) != 6 {
		t.Fatalf("follower of origin a:3 got %v, want all six", got)
	}
}

// followN follows the verdict stream with cfg until want verdicts have
// come, then stops, and returns them in the order they came.
func followN(t *testing.T, c *Conn, cfg FollowConfig, want int) []reconciled.Verdict {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var got []reconciled.Verdict
	ch := make(chan struct{}, 8)
	done := make(chan error, 1)
	go func() {
		done <- c.FollowVerdicts(ctx, cfg, func(v reconciled.Verdict) error {
			got = append(got, v)
			ch <- struct{}{}
			return nil
		})
	}()
	for range want {
		recv(t, ch, "verdict")
	}
	cancel()
	if err := recv(t, done, "follow end"); err != nil {
		t.Fatal(err)
	}
	return got
}

// A follower created with a start time imports only the verdicts stored
// since (a store's retention), and one that exists keeps its position.
func TestFollowVerdictsStartsAtStartTime(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	for i := range 3 {
		if err := c.PublishVerdict(ctx, verdict(fmt.Sprintf("old-%d", i), 1, reconciled.StatusNotYet)); err != nil {
			t.Fatal(err)
		}
	}
	// Every verdict published before this is older than the start.
	start := time.Now()
	for i := range 2 {
		if err := c.PublishVerdict(ctx, verdict(fmt.Sprintf("young-%d", i), 1, reconciled.StatusNotYet)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := FollowConfig{Durable: "store", StartTime: start}
	var got []string
	for _, v := range followN(t, c, cfg, 2) {
		got = append(got, v.IntentID)
	}
	if fmt.Sprint(got) != "[young-0 young-1]" {
		t.Fatalf("imported %v, want only the verdicts since the start time", got)
	}
	// Resumed under a later start time: the consumer's position holds.
	if err := c.PublishVerdict(ctx, verdict("young-2", 1, reconciled.StatusNotYet)); err != nil {
		t.Fatal(err)
	}
	cfg.StartTime = time.Now().Add(time.Hour)
	if vs := followN(t, c, cfg, 1); vs[0].IntentID != "young-2" {
		t.Fatalf("resumed at %s, want young-2", vs[0].IntentID)
	}
}
