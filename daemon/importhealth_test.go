package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled/queue"
)

type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time { return c.t }

// The import check: not ready until the follower is set up and has
// caught up; then ready through a lag of any size that lasts at most
// behindFor, and not ready once one lasts longer.
func TestImportHealthCatchUpAndFallBehind(t *testing.T) {
	clock := &stepClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	h := newImportHealth(clock.now)
	want := func(what, msg string) {
		t.Helper()
		p := h.problem()
		switch {
		case msg == "" && p != nil:
			t.Fatalf("%s: not ready: %+v", what, p)
		case msg != "" && p == nil:
			t.Fatalf("%s: ready, want a problem saying %q", what, msg)
		case msg != "" && (p.Check != "import" || !strings.Contains(p.Error, msg)):
			t.Fatalf("%s: %+v, want the import check saying %q", what, p, msg)
		}
	}
	want("before the follower is set up", "not set up yet")
	h.progress(queue.FollowProgress{Seq: 3247, Pending: 8753})
	want("set up far behind", "importing verdicts: 8,753 behind (stream seq 12,000, imported 3,247)")
	h.progress(queue.FollowProgress{Seq: 11900, Pending: readyLag + 1})
	want("just over the ready lag", "65 behind")
	h.progress(queue.FollowProgress{Seq: 11990, Pending: readyLag})
	want("caught up", "")
	// A burst: far behind, but not for long.
	h.progress(queue.FollowProgress{Seq: 12000, Pending: 50_000})
	clock.t = clock.t.Add(behindFor)
	want("behind for behindFor", "")
	h.progress(queue.FollowProgress{Seq: 30000, Pending: behindLag})
	clock.t = clock.t.Add(time.Hour)
	want("back under behindLag", "")
	// Behind for longer than behindFor.
	h.progress(queue.FollowProgress{Seq: 30001, Pending: behindLag + 1})
	since := clock.t
	clock.t = clock.t.Add(behindFor + time.Second)
	want("behind for longer", "fell behind for over 1m0s: 1,001 behind")
	if p := h.problem(); !p.Since.Equal(since) {
		t.Fatalf("since %v, want %v", p.Since, since)
	}
	h.progress(queue.FollowProgress{Seq: 31000, Pending: 2})
	want("caught up again", "")
	if lag, ok := h.lagNow(); !ok || lag != 2 {
		t.Fatalf("lag %d %v", lag, ok)
	}
	if got := h.imported(); got != 31000 {
		t.Fatalf("imported %d", got)
	}
}

func TestGrouped(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 8753: "8,753", 1234567: "1,234,567"} {
		if got := grouped(n); got != want {
			t.Errorf("grouped(%d) = %q, want %q", n, got, want)
		}
	}
}
