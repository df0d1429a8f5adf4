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

// TestMatcherCompilesWithoutTheICAgent keeps matcher pure (docs/design.md#layout): the
// block model it matches against carries no IC transport, so matcher
// compiles no agent-go beyond its principal type, no HTTP stack, no
// certificates, no Candid and no CBOR. principal itself needs a CBOR
// package; that one is allowed to principal and to nothing of this module.
func TestMatcherCompilesWithoutTheICAgent(t *testing.T) {
	const agent = "github.com/aviate-labs/agent-go"
	const self = "github.com/reconciled/reconciled/"
	viaPrincipal := map[string]bool{}
	for _, p := range goList(t, "-deps", agent+"/principal") {
		viaPrincipal[strings.Fields(p)[0]] = true
	}
	forbidden := func(p string) bool {
		return p == agent || strings.HasPrefix(p, agent+"/") && p != agent+"/principal" ||
			p == "net/http" || strings.HasPrefix(p, "net/http/") ||
			strings.Contains(p, "certification") || strings.Contains(p, "candid") ||
			strings.HasPrefix(p, "github.com/fxamacker/cbor")
	}
	var bad []string
	for _, line := range goList(t, "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", ".") {
		f := strings.Fields(line)
		p, imports := f[0], f[1:]
		if forbidden(p) && !viaPrincipal[p] {
			bad = append(bad, p)
		}
		if strings.HasPrefix(p, self) {
			for _, q := range imports {
				if forbidden(q) {
					bad = append(bad, p+" imports "+q)
				}
			}
		}
	}
	if len(bad) > 0 {
		t.Errorf("matcher depends on %d packages of the IC transport:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
}

// goList runs the go command's list in this package's directory and
// returns its lines.
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
