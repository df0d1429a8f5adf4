package matcher_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestMatcherCompilesWithoutTheICAgent keeps matcher pure (DESIGN §8): the
// block model it matches against carries no IC transport, so matcher
// compiles without agent-go beyond its principal type, without an HTTP
// stack, certificates, Candid or CBOR.
func TestMatcherCompilesWithoutTheICAgent(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to list matcher's dependencies: %v", err)
		}
	}
	cmd := exec.Command(goBin, "list", "-deps", ".")
	// The module cache already holds every dependency: listing must not
	// reach out for one.
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	const agent = "github.com/aviate-labs/agent-go"
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == agent+"/principal":
		case p == agent, strings.HasPrefix(p, agent+"/"),
			p == "net/http", strings.HasPrefix(p, "net/http/"),
			strings.Contains(p, "certification"),
			strings.Contains(p, "candid"),
			strings.HasPrefix(p, "github.com/fxamacker/cbor"):
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Errorf("matcher depends on %d packages of the IC transport:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
}
