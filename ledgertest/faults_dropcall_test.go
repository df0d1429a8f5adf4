package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A call answered 202 and dropped never executes and is never answered:
// the client polls until its own deadline. Lifting the fault makes calls
// work again.
func TestDropAcceptedCalls(t *testing.T) {
	f := newFixture(t)
	f.s.DropAcceptedCalls(f.echo.ID(), true)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := f.agent.CallWithContext(ctx, f.echo.ID(), "set", []any{[]byte("x")}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dropped call: %v, want the caller's deadline", err)
	}
	if n := f.echo.updateCount(); n != 0 {
		t.Fatalf("a dropped call executed (%d updates)", n)
	}
	f.s.DropAcceptedCalls(f.echo.ID(), false)
	if _, err := f.agent.CallRaw(f.echo.ID(), "set", []byte("x")); err != nil {
		t.Fatalf("call after the fault: %v", err)
	}
	if n := f.echo.updateCount(); n != 1 {
		t.Fatalf("%d updates after the fault, want 1", n)
	}
}
