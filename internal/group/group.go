package group

import "sync"

// Queue groups the items of concurrent Do calls. The zero value is ready
// for use, without a bound on a group's size.
type Queue[T any] struct {
	// Max bounds a group's items (0: no bound), so that one group cannot
	// hold what it runs on for long.
	Max int

	mu      sync.Mutex
	running bool
	pending []*waiter[T]
}

type waiter[T any] struct {
	item T
	// Set before done is closed: lead asks the caller to run the next
	// group itself; otherwise its item has been run.
	lead bool
	done chan struct{}
}

// Do returns once run has been called on a group holding item. run is
// called by one caller at a time, never concurrently, with the group's
// items in the order they were queued, item among them; it must record
// each item's result in the item itself. Do waits for the running group
// without a bound, so run must end by itself (its own deadlines), and a
// caller that may give up checks its context in run.
func (q *Queue[T]) Do(item T, run func(group []T)) {
	w := &waiter[T]{item: item, done: make(chan struct{})}
	q.mu.Lock()
	q.pending = append(q.pending, w)
	if q.running {
		q.mu.Unlock()
		<-w.done
		if !w.lead {
			return
		}
		q.mu.Lock()
	}
	// w leads: it is pending[0] (a caller woken to lead is the head of the
	// queue; a first leader found the queue empty).
	q.running = true
	n := len(q.pending)
	if q.Max > 0 {
		n = min(n, q.Max)
	}
	ws := q.pending[:n:n]
	q.pending = append([]*waiter[T](nil), q.pending[n:]...)
	q.mu.Unlock()

	items := make([]T, n)
	for i, x := range ws {
		items[i] = x.item
	}
	run(items)
	for _, x := range ws {
		if x != w {
			close(x.done)
		}
	}

	q.mu.Lock()
	if len(q.pending) > 0 {
		next := q.pending[0]
		next.lead = true
		close(next.done)
	} else {
		q.running = false
	}
	q.mu.Unlock()
}

// Idle reports whether no group is running and no caller is queued.
func (q *Queue[T]) Idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.running && len(q.pending) == 0
}

// Waiting is how many callers are queued behind the running group.
func (q *Queue[T]) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}
