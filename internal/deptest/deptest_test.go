package deptest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/reconciled/reconciled"

// TestVocabularyIsALeaf: the vocabulary (package reconciled) is what every
// other package speaks, so it compiles nothing of the project but leaf
// packages, which themselves import nothing of it.
func TestVocabularyIsALeaf(t *testing.T) {
	leaves := map[string]bool{module: true, module + "/reason": true}
	for _, p := range projectDeps(t, module) {
		if !leaves[p] {
			t.Errorf("the vocabulary compiles %s; it may compile only leaf packages (reason)", p)
		}
	}
	for p := range leaves {
		if p == module {
			continue
		}
		for _, q := range projectDeps(t, p) {
			if q != p {
				t.Errorf("leaf package %s compiles %s", p, q)
			}
		}
	}
}

// TestAdaptersDoNotCompileTheEngine: the queue, the store and the support
// API speak the vocabulary, not the engine's types. The queue carries
// messages and needs neither the matcher nor the ledger codecs either.
func TestAdaptersDoNotCompileTheEngine(t *testing.T) {
	fences := map[string][]string{
		"queue":   {"reconcile", "matcher", "icrc3", "icp"},
		"store":   {"reconcile"},
		"support": {"reconcile"},
	}
	for pkg, banned := range fences {
		deps := projectDeps(t, module+"/"+pkg)
		for _, b := range banned {
			if slices.Contains(deps, module+"/"+b) {
				t.Errorf("%s compiles %s", pkg, b)
			}
		}
	}
}

// projectDeps lists the packages of this module that pkg compiles (itself
// included), tests left out.
func projectDeps(t *testing.T, pkg string) []string {
	t.Helper()
	var out []string
	for _, p := range goList(t, "-deps", pkg) {
		if p == module || strings.HasPrefix(p, module+"/") {
			out = append(out, p)
		}
	}
	return out
}

// goList runs the go command's list and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to list dependencies: %v", err)
		}
	}
	cmd := exec.Command(goBin, append([]string{"list"}, args...)...)
	// The module cache already holds every dependency: listing must not
	// reach out for one.
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
