package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled/reconcile"
)

func verdict(id string, seq uint64, status reconcile.Status) reconcile.Verdict {
	return reconcile.Verdict{
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
		if err := c.PublishVerdict(ctx, verdict("w-1", seq, reconcile.StatusNotYet)); err != nil {
			t.Fatal(err)
		}
	}
	// Another intent's verdict must not leak into w-1's answers.
	if err := c.PublishVerdict(ctx, verdict("w-10", 7, reconcile.StatusAbsent)); err != nil {
		t.Fatal(err)
	}
	v, err := c.LastVerdict(ctx, "w-1")
	if err != nil || v.Seq != 2 || v.Status != reconcile.StatusNotYet {
		t.Fatalf("LastVerdict = %+v, %v", v, err)
	}

	seen := make(chan reconcile.Verdict, 8)
	watched := make(chan error, 1)
	go func() {
		watched <- c.WatchIntent(ctx, "w-1", func(v reconcile.Verdict) error {
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
	final := verdict("w-1", 3, reconcile.StatusFound)
	final.Block = &reconcile.BlockRef{Index: 1042, TS: 1791547201733000000, Hash: "ab", Kind: "xfer"}
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
		done <- c.WatchIntent(ctx, "later-1", func(v reconcile.Verdict) error {
			seen <- v.Seq
			return nil
		})
	}()
	// Whether the watch is set up before or after this publish, the verdict
	// is seen exactly once: as the last one or as a new one.
	if err := c.PublishVerdict(ctx, verdict("later-1", 1, reconcile.StatusNotYet)); err != nil {
		t.Fatal(err)
	}
	if seq := recv(t, seen, "verdict"); seq != 1 {
		t.Fatalf("seq %d", seq)
	}
	if err := c.PublishVerdict(ctx, verdict("later-1", 2, reconcile.StatusNotYet)); err != nil {
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
	v := verdict("d-1", 1, reconcile.StatusAbsent)
	for range 3 {
		if err := c.PublishVerdict(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PublishVerdict(ctx, verdict("d-1", 2, reconcile.StatusAbsent)); err != nil {
		t.Fatal(err)
	}
	info := streamInfo(t, c, VerdictsStream, jetstream.WithSubjectFilter("reconcile.verdicts.d-1"))
	if info.State.Msgs != 2 {
		t.Fatalf("verdict stream holds %d messages for d-1, want 2", info.State.Msgs)
	}
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
		if err := a.PublishVerdict(ctx, verdict(id, seq, reconcile.StatusNotYet)); err != nil {
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
				func(v reconcile.Verdict) error {
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
		fctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var got []uint64
		ch := make(chan struct{}, 8)
		done := make(chan error, 1)
		go func() {
			done <- c.FollowVerdicts(fctx, FollowConfig{Durable: "store"}, func(v reconcile.Verdict) error {
				got = append(got, v.Seq)
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
	for seq := uint64(1); seq <= 2; seq++ {
		if err := c.PublishVerdict(ctx, verdict("r-1", seq, reconcile.StatusNotYet)); err != nil {
			t.Fatal(err)
		}
	}
	if got := run(2); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("first run %v", got)
	}
	if err := c.PublishVerdict(ctx, verdict("r-1", 3, reconcile.StatusAbsent)); err != nil {
		t.Fatal(err)
	}
	if got := run(1); fmt.Sprint(got) != "[3]" {
		t.Fatalf("second run %v, want only the new verdict", got)
	}
}
