package queue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// connHealth is when the connection was last seen go down, for readiness:
// "disconnected since T" tells an operator how long intents have waited.
type connHealth struct {
	mu        sync.Mutex
	downSince time.Time // zero while connected
}

// watchStatus follows the connection's status changes until it closes.
func (c *Conn) watchStatus() {
	ch := c.nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING, nats.DISCONNECTED)
	go func() {
		defer c.nc.RemoveStatusListener(ch)
		for {
			select {
			case <-c.closed:
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
				// An event may have been dropped (the channel's buffer
				// is small): the connection's status now is the truth.
				c.health.note(c.nc.IsConnected(), time.Now())
			}
		}
	}()
}

func (h *connHealth) note(connected bool, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case connected:
		h.downSince = time.Time{}
	case h.downSince.IsZero():
		h.downSince = now
	}
}

// Disconnected reports whether the connection is down now and, if so,
// since when (as first seen: the status change, or this call).
func (c *Conn) Disconnected() (since time.Time, down bool) {
	connected := c.nc.IsConnected()
	c.health.note(connected, time.Now())
	if connected {
		return time.Time{}, false
	}
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	return c.health.downSince, true
}

// CheckJetStream asks the server for the account's JetStream usage: it
// fails when the server has disabled JetStream (which nats-server does
// after a storage failure it cannot write past) or does not answer
// within ctx.
func (c *Conn) CheckJetStream(ctx context.Context) error {
	if _, err := c.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("queue: JetStream account info: %w", err)
	}
	return nil
}
