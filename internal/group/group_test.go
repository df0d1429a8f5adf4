package group

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

type item struct {
	n   int
	ran int // groups that ran it
}

// TestQueuedCallersFormTheNextGroup holds a first group open while others
// queue: they must run as the next groups, at most Max each, each item
// once, never two groups at a time.
func TestQueuedCallersFormTheNextGroup(t *testing.T) {
	const waiting, max = 10, 4
	q := &Queue[*item]{Max: max}
	release := make(chan struct{})
	entered := make(chan struct{})
	var running atomic.Int32
	var mu sync.Mutex
	var groups [][]int
	run := func(g []*item) {
		if running.Add(1) != 1 {
			t.Error("two groups ran at once")
		}
		defer running.Add(-1)
		ns := make([]int, len(g))
		for i, it := range g {
			it.ran++
			ns[i] = it.n
		}
		mu.Lock()
		groups = append(groups, ns)
		first := len(groups) == 1
		mu.Unlock()
		if first {
			close(entered)
			<-release
		}
	}

	items := make([]*item, waiting+1)
	for i := range items {
		items[i] = &item{n: i}
	}
	var wg sync.WaitGroup
	wg.Go(func() { q.Do(items[0], run) })
	<-entered
	// The first group is running: every other caller must queue.
	for _, it := range items[1:] {
		wg.Go(func() { q.Do(it, run) })
	}
	for q.Waiting() < waiting {
		runtime.Gosched() // the state is polled; this only lets the callers run
	}
	close(release)
	wg.Wait()

	if len(groups) != 1+(waiting+max-1)/max {
		t.Fatalf("groups %v: want the first alone, then the %d queued in groups of at most %d", groups, waiting, max)
	}
	if !slices.Equal(groups[0], []int{0}) {
		t.Fatalf("first group %v, want [0]", groups[0])
	}
	var seen []int
	for _, g := range groups[1:] {
		if len(g) > max {
			t.Fatalf("group %v exceeds %d", g, max)
		}
		seen = append(seen, g...)
	}
	slices.Sort(seen)
	for i, n := range seen {
		if n != i+1 {
			t.Fatalf("queued items ran as %v, want 1..%d once each", seen, waiting)
		}
	}
	for _, it := range items {
		if it.ran != 1 {
			t.Fatalf("item %d ran %d times", it.n, it.ran)
		}
	}
	if !q.Idle() {
		t.Fatal("queue left running or with callers queued")
	}
}

// TestManyCallers: under contention every item runs exactly once.
func TestManyCallers(t *testing.T) {
	var q Queue[*item]
	items := make([]*item, 2000)
	var wg sync.WaitGroup
	var running atomic.Int32
	for i := range items {
		items[i] = &item{n: i}
		wg.Go(func() {
			q.Do(items[i], func(g []*item) {
				if running.Add(1) != 1 {
					t.Error("two groups ran at once")
				}
				for _, it := range g {
					it.ran++
				}
				running.Add(-1)
			})
		})
	}
	wg.Wait()
	for _, it := range items {
		if it.ran != 1 {
			t.Fatalf("item %d ran %d times", it.n, it.ran)
		}
	}
}
