// Package e2e_test drives the reconciled daemon from the outside: the built
// binary as a subprocess (or in-process services), real NATS servers on
// loopback, and the IC test replica, to prove that faults, crashes, bad
// input and a fleet's instances coming and going neither lose an intent
// nor produce a wrong final verdict. The project's fleet tests live here.
package e2e_test

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	longRuns = flag.Bool("e2e.long", false, "run the long variants (e.g. 50 crash iterations instead of 10)")
	seedFlag = flag.Uint64("e2e.seed", 1, "seed of the randomised schedules (kill points, intent mix)")
	raceBin  = flag.Bool("e2e.race", false, "build the daemon binary with the race detector")
	logDir   = flag.String("e2e.logdir", "", "keep daemon logs in this directory (default: a test temp dir)")
)

// binDir holds the daemon binary for the whole test run.
var binDir string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "reconciled-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// daemonLogPath names a daemon log file: in -e2e.logdir when given, so it
// outlives the test, else in a temp dir of t.
func daemonLogPath(t testing.TB, name string) string {
	t.Helper()
	if *logDir == "" {
		return filepath.Join(t.TempDir(), name+".log")
	}
	if err := os.MkdirAll(*logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(*logDir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+".log")
	// A kept log tells one run's story, not the previous run's too.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return path
}

// daemonDataDir is a daemon's data dir: under -e2e.logdir when given, so
// a failed run's store can be examined, else a temp dir of t.
func daemonDataDir(t testing.TB, name string) string {
	t.Helper()
	if *logDir == "" {
		return t.TempDir()
	}
	dir := filepath.Join(*logDir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+"-data")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// daemonBinary builds cmd/reconciled once per test run, on first use, so
// tests that do not need the binary do not pay for the build.
func daemonBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		out := filepath.Join(binDir, "reconciled")
		args := []string{"build", "-o", out}
		if *raceBin {
			args = append(args, "-race")
		}
		args = append(args, "github.com/reconciled/reconciled/cmd/reconciled")
		cmd := exec.Command("go", args...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/reconciled: %v\n%s", err, b)
			return
		}
		buildPath = out
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}
