package testutil

import (
	"syscall"
	"testing"
	"time"
)

// Eventually polls cond every 5 ms until it holds, for state no
// subscription announces (another instance's store, a lease). It fails t
// with cond's last description once timeout has passed (0: 30 s). cond
// runs at least once, and once more after the deadline, so a state
// reached just at the deadline still passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s; last state: %s", what, timeout, state)
			return
		}
		<-tick.C
	}
}

// CPUTime is the process's user and system CPU time (whatever shares the
// process, a test replica included). On a shared machine wall time depends
// on the neighbours; the CPU an operation costs is the steadier figure.
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
