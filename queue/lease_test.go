package queue

import (
	"testing"
	"time"
)

// One holder per ledger: a second instance gets the lease only once the
// first releases it or lets it lapse for a TTL; an instance restarted
// under its name takes its own lease back at once.
func TestLeasesOneHolder(t *testing.T) {
	e := startServer(t, t.TempDir())
	ctx := testCtx(t)
	const ttl = time.Second
	leases := func(holder string) *Leases {
		l, err := connect(t, e).Leases(ctx, LeaseConfig{Holder: holder, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := leases("a"), leases("b")
	const ledger = "mxzaz-hqaaa-aaaar-qaada-cai"
	if got := a.Hold(ctx, []string{ledger, "not a key"}); len(got) != 1 || !a.Holds(ledger) {
		t.Fatalf("a gained %v, holds %t", got, a.Holds(ledger))
	}
	if got := b.Hold(ctx, []string{ledger}); len(got) != 0 || b.Holds(ledger) {
		t.Fatalf("b gained %v while a holds it", got)
	}
	if got := a.Hold(ctx, []string{ledger}); len(got) != 0 || !a.Holds(ledger) {
		t.Fatalf("a's renewal: gained %v, holds %t", got, a.Holds(ledger))
	}
	// A restart of a under its name, before the TTL ran out.
	a2 := leases("a")
	if got := a2.Hold(ctx, []string{ledger}); len(got) != 1 {
		t.Fatalf("restarted a did not take its own lease back: %v", got)
	}
	// Released: b takes it at once.
	a2.ReleaseAll(ctx)
	if got := b.Hold(ctx, []string{ledger}); len(got) != 1 {
		t.Fatalf("b did not take a released lease: %v", got)
	}
	if h, err := b.Holder(ctx, ledger); err != nil || h != "b" {
		t.Fatalf("holder %q %v", h, err)
	}
	// b stops renewing (it vanished): after the TTL, a takes it.
	start := time.Now()
	for len(a.Hold(ctx, []string{ledger})) == 0 {
		if time.Since(start) > 5*ttl {
			t.Fatal("a lapsed lease was never taken")
		}
		time.Sleep(20 * time.Millisecond) // polling the lease, as the daemon does
	}
	if took := time.Since(start); took < ttl/2 {
		t.Fatalf("a live lease was taken after %s", took)
	}
	// b's own view expires with its last renewal.
	if b.Holds(ledger) && time.Since(start) > ttl {
		t.Fatal("b still believes it holds a lease it has not renewed for a TTL")
	}
	// A ledger no longer wanted is released.
	a.Hold(ctx, nil)
	if h, err := a.Holder(ctx, ledger); err != nil || h != "" {
		t.Fatalf("holder after release %q %v", h, err)
	}
}
