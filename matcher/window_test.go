package matcher

import (
	"math"
	"testing"
	"time"
)

func TestWindowDefaults(t *testing.T) {
	in := mustParse(t, transferBody())
	w := in.Window(LedgerRules{})
	if w.From != stamp-uint64(2*time.Minute) || w.To != stamp+uint64(24*time.Hour+2*time.Minute) || w.NarrowedBy != "" {
		t.Fatalf("window %+v", w)
	}
	if !w.Contains(w.From) || !w.Contains(w.To) || w.Contains(w.From-1) || w.Contains(w.To+1) {
		t.Fatal("window ends are not inclusive")
	}
	if w.ClosedAt(w.To) || !w.ClosedAt(w.To+1) {
		t.Fatal("window must close strictly after To")
	}
	custom := in.Window(LedgerRules{TW: time.Hour, Drift: time.Minute})
	if custom.From != stamp-uint64(time.Minute) || custom.To != stamp+uint64(time.Hour+time.Minute) {
		t.Fatalf("custom window %+v", custom)
	}
	// A negative setting would shrink the window; it falls back to the default.
	if neg := in.Window(LedgerRules{TW: -time.Hour, Drift: -1}); neg != w {
		t.Fatalf("negative rules gave %+v, want %+v", neg, w)
	}
}

func TestWindowSaturates(t *testing.T) {
	low := mustParse(t, transferBody().with("args.created_at_time", "5"))
	if w := low.Window(LedgerRules{}); w.From != 0 || w.To != 5+uint64(24*time.Hour+2*time.Minute) {
		t.Fatalf("stamp below drift: %+v", w)
	}
	// Such stamps are refused at parse time (MaxStamp); the arithmetic
	// still saturates for any intent built in code.
	if _, err := ParseIntent(transferBody().with("args.created_at_time", "18446744073709551000").json(t)); err == nil || err.(*Error).Code != CodeBadStamp {
		t.Fatalf("stamp after MaxStamp: %v, want %s", err, CodeBadStamp)
	}
	high := mustParse(t, transferBody())
	high.Args.CreatedAt = 18446744073709551000
	w := high.Window(LedgerRules{})
	if w.To != math.MaxUint64 || w.From != 18446744073709551000-uint64(2*time.Minute) {
		t.Fatalf("stamp near 2^64: %+v", w)
	}
	if w.ClosedAt(math.MaxUint64) || !w.Contains(math.MaxUint64) {
		t.Fatal("a saturated window never closes")
	}
}

func TestWindowIngressExpiry(t *testing.T) {
	exp := stamp + uint64(5*time.Minute)
	in := mustParse(t, transferBody().with("ingress_expiry", "1791547501000000000"))
	w := in.Window(LedgerRules{})
	if w.To != exp || w.NarrowedBy != "ingress_expiry" || w.From != stamp-uint64(2*time.Minute) {
		t.Fatalf("narrowed window %+v", w)
	}
	// An expiry after the natural end changes nothing.
	late := mustParse(t, transferBody().with("ingress_expiry", "18446744073709551615"))
	if w := late.Window(LedgerRules{}); w.NarrowedBy != "" || w.To != stamp+uint64(24*time.Hour+2*time.Minute) {
		t.Fatalf("late expiry: %+v", w)
	}
	// An expiry before S−D narrows nothing (CheckRules refuses it); one
	// at S−D leaves a window of one instant.
	early := mustParse(t, transferBody().with("ingress_expiry", "1791547000000000000"))
	if ew := early.Window(LedgerRules{}); ew.NarrowedBy != "" || ew.To != stamp+uint64(24*time.Hour+2*time.Minute) {
		t.Fatalf("early expiry: %+v", ew)
	}
	edge := mustParse(t, transferBody().with("ingress_expiry", "1791547081000000000"))
	if ew := edge.Window(LedgerRules{}); ew.From != ew.To || !ew.Contains(ew.From) || ew.NarrowedBy != "ingress_expiry" {
		t.Fatalf("expiry at S−D: %+v", ew)
	}
}
