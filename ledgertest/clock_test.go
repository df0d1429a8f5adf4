package ledgertest

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	wall := time.Unix(1_800_000_000, 0)
	c := &clock{wall: func() time.Time { return wall }}
	if got := c.now(); got != uint64(wall.UnixNano()) {
		t.Fatalf("starts at %d, want wall clock %d", got, wall.UnixNano())
	}
	c.advance(-time.Hour)
	c.advance(0)
	if got := c.now(); got != uint64(wall.UnixNano()) {
		t.Fatalf("non-positive advance moved the clock to %d", got)
	}
	c.advance(time.Hour)
	if got := c.now(); got != uint64(wall.Add(time.Hour).UnixNano()) {
		t.Fatalf("after Advance(1h): %d", got)
	}
	// The wall clock stepping back does not move virtual time back.
	wall = wall.Add(-time.Minute)
	if got := c.now(); got != uint64(wall.Add(time.Hour+time.Minute).UnixNano()) {
		t.Fatalf("clock went backwards to %d", got)
	}
	wall = wall.Add(2 * time.Minute)
	if got := c.now(); got != uint64(wall.Add(time.Hour).UnixNano()) {
		t.Fatalf("clock stopped following the wall clock: %d", got)
	}
}

func TestServerClockReachesCanisters(t *testing.T) {
	f := newFixture(t)
	f.s.Advance(48 * time.Hour)
	raw, err := f.agent.QueryRaw(f.echo.ID(), "time", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 {
		t.Fatal("no time")
	}
	if now := f.s.Now(); now < uint64(time.Now().Add(47*time.Hour).UnixNano()) {
		t.Fatalf("Now() = %d after Advance(48h)", now)
	}
}
