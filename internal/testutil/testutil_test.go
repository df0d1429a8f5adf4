package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestEventuallyReturnsOnceCondHolds(t *testing.T) {
	n := 0
	r := &recorder{TB: t}
	Eventually(r, time.Minute, "the third poll", func() (bool, string) { n++; return n == 3, fmt.Sprint(n) })
	if r.failed != "" || n != 3 {
		t.Fatalf("failed %q after %d polls; want success on the third", r.failed, n)
	}
}

func TestEventuallyFailsWithTheLastState(t *testing.T) {
	r := &recorder{TB: t}
	n := 0
	Eventually(r, 20*time.Millisecond, "never", func() (bool, string) { n++; return false, fmt.Sprintf("poll %d", n) })
	if !strings.Contains(r.failed, "never: not reached within 20ms") || !strings.HasSuffix(r.failed, fmt.Sprintf("last state: poll %d", n)) {
		t.Fatalf("failure %q after %d polls", r.failed, n)
	}
}

func TestCPUTimeCountsWork(t *testing.T) {
	before, start := CPUTime(t), time.Now()
	// Spin until the process's CPU clock moves (it advances in ticks), for
	// at most 10 s of wall time.
	x := 0
	for CPUTime(t) == before && time.Since(start) < 10*time.Second {
		for i := 0; i < 1_000_000; i++ {
			x += i
		}
		runtime.Gosched()
	}
	if after := CPUTime(t); after <= before {
		t.Fatalf("CPU time %v then %v", before, after)
	}
	_ = x
}
