package ledgertest

import (
	"sync"
	"time"
)

// clock is the replica's virtual time: wall-clock time plus everything
// Advance added, and never less than a value it already returned. It keeps
// running with the wall clock because agent-go refuses certificates whose
// /time is more than its ingress expiry (5 min) behind its own wall clock, so
// a frozen clock would break any test or server that lives longer than that;
// future times are accepted, so advancing is always safe.
type clock struct {
	mu     sync.Mutex
	offset int64  // ns added by Advance
	last   uint64 // highest time returned, for monotonicity
	wall   func() time.Time
}

func newClock() *clock { return &clock{wall: time.Now} }

func (c *clock) now() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := uint64(c.wall().UnixNano() + c.offset)
	if t < c.last {
		t = c.last
	}
	c.last = t
	return t
}

func (c *clock) advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.offset += int64(d)
	c.mu.Unlock()
}
