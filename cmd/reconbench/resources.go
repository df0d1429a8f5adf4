package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// memStatus reads VmRSS and VmHWM (peak RSS) of this process, in bytes.
func memStatus() (rss, hwm uint64, err error) { return procMem("/proc/self/status") }

// procMem reads VmRSS and VmHWM from a /proc/<pid>/status file.
func procMem(path string) (rss, hwm uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("read memory status: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var dst *uint64
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			dst = &rss
		case strings.HasPrefix(line, "VmHWM:"):
			dst = &hwm
		default:
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 2 {
			return 0, 0, fmt.Errorf("read memory status: malformed line %q", line)
		}
		kb, err := strconv.ParseUint(fs[1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("read memory status: %q: %w", line, err)
		}
		*dst = kb << 10
	}
	return rss, hwm, sc.Err()
}

// memPhase measures the peak RSS of one phase above what was resident when
// it started. The process hosts the test replica and its ledger too, whose
// memory is resident throughout; the phase's own share is the rise.
type memPhase struct {
	start uint64
	reset bool // whether the kernel's peak counter was reset at the start
}

// startMemPhase returns garbage to the OS, then resets the kernel's peak
// RSS counter (clear_refs 5, Linux ≥ 4.0) so VmHWM covers only this phase.
// Where the reset is refused, the peak is the process's lifetime peak and
// the phase's share is an upper bound.
func startMemPhase() memPhase {
	runtime.GC()
	debug.FreeOSMemory()
	reset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	rss, _, _ := memStatus()
	return memPhase{start: rss, reset: reset}
}

// peak returns the phase's peak RSS and its rise above the start.
func (m memPhase) peak() (peak, rise uint64) {
	_, hwm, err := memStatus()
	if err != nil {
		return 0, 0
	}
	if hwm < m.start {
		return hwm, 0
	}
	return hwm, hwm - m.start
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg is the 1-minute load average: on a shared machine, wall-clock
// figures mean little without it (the CPU-time figures hold regardless).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	fs := strings.Fields(string(b))
	if len(fs) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(fs[0], 64)
	if err != nil {
		return -1
	}
	return v
}
