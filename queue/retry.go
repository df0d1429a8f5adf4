package queue

import (
	"context"
	"time"
)

// retryDelay is an exponential delay for loops that must keep going across
// transient failures (disconnects, a server restart) without spinning.
type retryDelay struct {
	min, max, next time.Duration
}

func newRetryDelay(min, max time.Duration) *retryDelay {
	return &retryDelay{min: min, max: max, next: min}
}

func (r *retryDelay) reset() { r.next = r.min }

// wait blocks for the current delay and doubles it; false means ctx ended.
func (r *retryDelay) wait(ctx context.Context) bool {
	t := time.NewTimer(r.next)
	defer t.Stop()
	r.next = min(2*r.next, r.max)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
