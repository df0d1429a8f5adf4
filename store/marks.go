package store

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Marks of published verdicts are not waited for. Clearing an outbox row
// once the stream holds its verdict only saves a stream lookup later, so a
// mark lost in a crash costs that lookup (the outbox pass finds the verdict
// on the stream and marks it again), never a verdict. In a burst, one
// commit and fsync per mark would be one more writer turn per intent, on
// the path to acking it: queued marks ride in the next group commit
// instead, or in one of their own at most markDelay later.

// markDelay bounds how long a queued mark waits for a group commit to
// ride in.
const markDelay = 20 * time.Millisecond

type markQueue struct {
	mu     sync.Mutex
	marks  []mark
	timer  *time.Timer
	closed bool
	wg     sync.WaitGroup // a flush started by the timer
	tried  int            // flushes the timer ran, for tests
}

type mark struct {
	id  string
	seq int64
}

// MarkPublished queues the mark (MarkPublishedLater) and returns nil: the
// service acks the intent without waiting for a commit that only saves a
// lookup, and a mark lost in a crash only costs the outbox pass a stream
// lookup.
func (s *Store) MarkPublished(_ context.Context, id string, seq uint64) error {
	s.MarkPublishedLater(id, seq)
	return nil
}

// MarkPublishedLater is MarkPublishedNow without waiting: the deletion is
// queued and committed with the next writes, within markDelay. Reads of
// the outbox (Outbox, DiscardUnpublished) apply queued marks first.
func (s *Store) MarkPublishedLater(id string, seq uint64) {
	n := int64(math.MaxInt64)
	if seq < math.MaxInt64 {
		n = int64(seq)
	}
	q := &s.marks
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.marks = append(q.marks, mark{id, n})
	if q.timer == nil {
		q.wg.Add(1)
		var t *time.Timer
		t = time.AfterFunc(markDelay, func() {
			defer q.wg.Done()
			// A failure leaves the marks queued, for the next commit or
			// the next mark's timer; the outbox pass clears rows anyway.
			_ = s.flushMarks(context.Background())
			q.mu.Lock()
			if q.timer == t {
				q.timer = nil
			}
			q.tried++
			q.mu.Unlock()
		})
		q.timer = t
	}
}

// takeMarks empties the queue.
func (s *Store) takeMarks() []mark {
	q := &s.marks
	q.mu.Lock()
	defer q.mu.Unlock()
	ms := q.marks
	q.marks = nil
	if q.timer != nil && q.timer.Stop() {
		q.wg.Done() // the timer's flush will not run
	}
	q.timer = nil
	return ms
}

// requeueMarks puts back marks taken for a transaction that could not
// begin, ahead of any queued since: the next commit applies them.
func (s *Store) requeueMarks(ms []mark) {
	if len(ms) == 0 {
		return
	}
	q := &s.marks
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.marks = append(ms, q.marks...)
	}
}

// applyMarks deletes the outbox rows the marks clear, inside t.
func applyMarks(ctx context.Context, t *Tx, ms []mark) error {
	for _, m := range ms {
		if _, err := t.ExecContext(ctx, `DELETE FROM outbox WHERE intent_id = ? AND seq <= ?`, m.id, m.seq); err != nil {
			return fmt.Errorf("store: mark %s/%d published: %w", m.id, m.seq, err)
		}
	}
	return nil
}

// flushMarks commits the queued marks now (in a group commit, with
// whatever else is waiting).
func (s *Store) flushMarks(ctx context.Context) error {
	if s.pendingMarks() == 0 {
		return nil
	}
	return s.groupTx(ctx, "mark published", func(context.Context, *Tx) error { return nil })
}

func (s *Store) pendingMarks() int {
	s.marks.mu.Lock()
	defer s.marks.mu.Unlock()
	return len(s.marks.marks)
}

// closeMarks commits what is queued and refuses more marks.
func (s *Store) closeMarks(ctx context.Context) error {
	q := &s.marks
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	err := s.flushMarks(ctx)
	q.wg.Wait()
	return err
}
