package icagent

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestSharedOneReadManyWaiters: callers arriving while a read is in
// flight share it; one that gives up returns at once without ending the
// read for the others; the next call after it ended reads again.
func TestSharedOneReadManyWaiters(t *testing.T) {
	var s Shared[int]
	release, started := make(chan struct{}), make(chan struct{})
	runs := 0
	read := func(ctx context.Context) (int, error) {
		runs++
		close(started)
		<-release
		return 7, ctx.Err()
	}
	first := make(chan int, 1)
	go func() { v, _ := s.Do(context.Background(), read); first <- v }()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	quit := make(chan error, 1)
	go func() { _, err := s.Do(ctx, read); quit <- err }()
	cancel()
	if err := <-quit; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter that gave up: %v", err)
	}
	second := make(chan int, 1)
	waiting := &doneSignal{Context: context.Background(), asked: make(chan struct{})}
	go func() {
		v, err := s.Do(waiting, func(context.Context) (int, error) { t.Error("second read while one is in flight"); return 0, nil })
		if err != nil {
			t.Error(err)
		}
		second <- v
	}()
	<-waiting.asked // the second caller waits on the read in flight
	close(release)
	if a, b := <-first, <-second; a != 7 || b != 7 || runs != 1 {
		t.Fatalf("results %d %d after %d reads, want 7 7 after 1", a, b, runs)
	}
	started = make(chan struct{})
	release = make(chan struct{})
	close(release)
	if v, err := s.Do(context.Background(), read); v != 7 || err != nil || runs != 2 {
		t.Fatalf("read after the first ended: %d %v, %d reads", v, err, runs)
	}
}

// doneSignal tells when a caller first waits on its context.
type doneSignal struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func (d *doneSignal) Done() <-chan struct{} {
	d.once.Do(func() { close(d.asked) })
	return d.Context.Done()
}
