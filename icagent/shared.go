package icagent

import (
	"context"
	"sync"
)

// Shared runs one read for concurrent callers, so that no lock is held
// across the network while the read is in flight. The first caller starts
// it on its own goroutine, under the caller's context values but without
// its cancellation (the read must end by its own deadlines, as every
// request here does); each caller waits for the read or for its own
// context, whichever ends first, and a caller that gives up does not end
// the read for the others. Nothing is kept once the read ended: the
// caller decides what of its result may be cached. The zero value is
// ready for use.
type Shared[T any] struct {
	mu  sync.Mutex
	cur *sharedRead[T]
}

type sharedRead[T any] struct {
	done chan struct{}
	v    T
	err  error
}

// Do returns the result of the read in flight, or of fn started now.
func (s *Shared[T]) Do(ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	s.mu.Lock()
	r := s.cur
	if r == nil {
		r = &sharedRead[T]{done: make(chan struct{})}
		s.cur = r
		go func() {
			v, err := fn(context.WithoutCancel(ctx))
			s.mu.Lock()
			r.v, r.err = v, err
			s.cur = nil
			s.mu.Unlock()
			close(r.done)
		}()
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
