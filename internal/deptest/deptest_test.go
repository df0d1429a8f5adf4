package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/reconciled/reconciled"

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath string
	Deps       []string // transitive, without test files' imports
}

// Groups of forbidden dependencies. A name ending in "/..." stands for the
// package and everything under it, as in a go pattern.
var (
	// testHelpers is what only tests may link: package testing and the
	// helpers of the project's tests.
	testHelpers = []string{
		"testing",
		module + "/ledgertest/testworld",
		module + "/internal/testtool",
		module + "/internal/testutil",
		module + "/daemon/daemontest",
		module + "/reconcile/cachetest",
		module + "/reconcile/historytest",
		module + "/support/supporttest",
	}
	// testSupport is what exists for testing: the helpers, and the test
	// replica (its keys derive from a public seed) with the tool layer that
	// drives it, which the development commands also run.
	testSupport = join(testHelpers, []string{module + "/ledgertest/...", module + "/internal/toollayer"})
	nats        = []string{"github.com/nats-io/..."}
	sqlite      = []string{"modernc.org/sqlite/...", "github.com/jmoiron/sqlx/..."}
	// The layers above the ledger models, bottom up.
	clients  = []string{module + "/icagent", module + "/icrc1", module + "/icrc3history", module + "/icphistory", module + "/family"}
	engine   = []string{module + "/reconcile/..."}
	queuePkg = []string{module + "/queue/..."}
	storePkg = []string{module + "/store/..."}
	console  = []string{module + "/support/..."}
	wiring   = []string{module + "/daemon/...", module + "/cmd/..."}
)

func join(groups ...[]string) []string {
	var all []string
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

// fence is one row: pkg's dependencies must include none of forbidden.
type fence struct {
	pkg       string // import path relative to the module ("." for its root)
	why       string
	forbidden []string
}

// fences is the layering as it stands: ledger models (icrc3, icp, matcher)
// at the bottom, then the verified client and ledger clients, the matching
// engine (reconcile), the queue and the store side by side, the support
// console on the store, the daemon wiring it all, and the binary. An
// arrow pointing back up fails.
var fences = []fence{
	{"icrc3", "a pure model of ICRC-3 blocks: no I/O, no network", join(clients, engine, queuePkg, storePkg, console, wiring, nats, sqlite, []string{"net/http", module + "/icp", module + "/matcher", "go.uber.org/zap/...", "github.com/prometheus/..."}, testSupport)},
	{"icp", "a pure model of the ICP ledger's blocks", join(clients, engine, queuePkg, storePkg, console, wiring, nats, sqlite, []string{"net/http", module + "/matcher", "go.uber.org/zap/...", "github.com/prometheus/..."}, testSupport)},
	{"matcher", "a pure model of intents and their match", join(clients, engine, queuePkg, storePkg, console, wiring, nats, sqlite, []string{"net/http", "go.uber.org/zap/...", "github.com/prometheus/..."}, testSupport)},
	{"icagent", "the verified IC client: certificates, not payments", join(clients[1:], []string{module + "/icp", module + "/matcher"}, engine, queuePkg, storePkg, console, wiring, nats, sqlite, testSupport)},
	{"icrc1", "an ICRC ledger's client", join(clients[2:], engine, queuePkg, storePkg, console, wiring, nats, sqlite, testSupport)},
	{"icrc3history", "the verified ICRC-3 history reader; a family knows no sibling", join(clients[3:], engine, queuePkg, storePkg, console, wiring, nats, sqlite, testSupport)},
	{"icphistory", "the verified ICP history reader; a family knows no sibling", join([]string{module + "/icrc3history", module + "/family"}, engine, queuePkg, storePkg, console, wiring, nats, sqlite, testSupport)},
	{"family", "the choice between ledger families, above them and below the engine", join(engine, queuePkg, storePkg, console, wiring, nats, sqlite, testSupport)},
	{"reconcile", "the engine decides verdicts; transport and storage are its callers'", join(queuePkg, storePkg, console, wiring, nats, sqlite, testSupport)},
	// The queue, the store and the support console speak the vocabulary
	// (package reconciled), not the engine's types; the queue carries
	// messages and compiles no intent parser or ledger codec either.
	{"queue", "NATS transport: knows verdicts, not where they are stored", join(engine, storePkg, console, wiring, sqlite, testSupport, []string{module + "/matcher", module + "/icrc3", module + "/icp"})},
	{"store", "SQLite storage: knows verdicts, not how they travel", join(engine, queuePkg, console, wiring, nats, testSupport)},
	{"support", "the support console reads the store; it publishes nothing", join(engine, queuePkg, wiring, nats, testSupport)},
	{"internal/group", "a goroutine helper below every layer", join(clients, engine, queuePkg, storePkg, console, wiring, nats, sqlite, testSupport)},
	{"daemon", "the production wiring", join([]string{module + "/cmd/..."}, testSupport)},
	{"cmd/reconciled", "the production binary (.ci/run, the Dockerfile)", testSupport},
	// The development and benchmark commands run the test replica and the
	// tool layer, but they are programs, not tests.
	{"cmd/reconciled-dev", "a program: the demo and the test ledger", testHelpers},
	{"cmd/reconbench", "a program: the benchmark", testHelpers},
}

// matches reports whether path is pattern, or under it for "x/...".
func matches(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// violations lists each forbidden dependency of each fenced package, and
// each fenced package that does not exist (a rename would otherwise leave
// it unfenced).
func violations(pkgs map[string]pkg, fences []fence) []string {
	var out []string
	for _, f := range fences {
		path := module + "/" + f.pkg
		if f.pkg == "." { // the module root: the vocabulary
			path = module
		}
		p, ok := pkgs[path]
		if !ok {
			out = append(out, fmt.Sprintf("%s: no such package; the fence names packages that exist", f.pkg))
			continue
		}
		for _, d := range p.Deps {
			for _, pat := range f.forbidden {
				if matches(pat, d) {
					out = append(out, fmt.Sprintf("%s depends on %s (%s)", f.pkg, d, f.why))
					break
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// listModule runs `go list -json` on every package of the module.
func listModule(t *testing.T) map[string]pkg {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the fences read `go list`: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-json=ImportPath,Deps", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

func TestImportFences(t *testing.T) {
	pkgs := listModule(t)
	for _, v := range violations(pkgs, fences) {
		t.Error(v)
	}
}

// Every package that is neither test support nor a tool for development
// or benchmarks is production code: none links test support.
func TestNoProductionPackageLinksTestSupport(t *testing.T) {
	tools := []string{module + "/cmd/reconciled-dev", module + "/cmd/reconbench"}
	isAny := func(pats []string, path string) bool {
		for _, p := range pats {
			if matches(p, path) {
				return true
			}
		}
		return false
	}
	pkgs := listModule(t)
	var prod []fence
	for path := range pkgs {
		if isAny(testSupport, path) || isAny(tools, path) {
			continue
		}
		rel := strings.TrimPrefix(path, module+"/")
		if path == module {
			rel = "."
		}
		prod = append(prod, fence{pkg: rel, why: "production code", forbidden: testSupport})
	}
	if len(prod) < 10 {
		t.Fatalf("%d production packages: go list's answer was not read right", len(prod))
	}
	for _, v := range violations(pkgs, prod) {
		t.Error(v)
	}
}

// The fence fails on an arrow pointing back up, a test helper in the
// binary, and a fenced package that is gone.
func TestViolationsCatchesArrowsBackUp(t *testing.T) {
	graph := map[string]pkg{
		module + "/store":          {Deps: []string{module + "/reconcile", module + "/queue", "modernc.org/sqlite"}},
		module + "/matcher":        {Deps: []string{module + "/icrc3", "github.com/nats-io/nats.go/jetstream"}},
		module + "/cmd/reconciled": {Deps: []string{module + "/daemon", module + "/ledgertest", "testing"}},
		module + "/queue":          {Deps: []string{module + "/reconcile", "github.com/nats-io/nats.go"}},
	}
	got := violations(graph, []fence{
		{pkg: "store", why: "w", forbidden: join(queuePkg, nats)},
		{pkg: "matcher", why: "w", forbidden: nats},
		{pkg: "cmd/reconciled", why: "w", forbidden: testSupport},
		{pkg: "queue", why: "w", forbidden: join(storePkg, sqlite)},
		{pkg: "gone", why: "w", forbidden: nats},
	})
	want := []string{
		"cmd/reconciled depends on " + module + "/ledgertest (w)",
		"cmd/reconciled depends on testing (w)",
		"gone: no such package; the fence names packages that exist",
		"matcher depends on github.com/nats-io/nats.go/jetstream (w)",
		"store depends on " + module + "/queue (w)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// leaves are the packages the vocabulary may compile: they import nothing
// of the project themselves.
var leaves = []string{module + "/reason"}

// TestVocabularyIsALeaf: the vocabulary (package reconciled, the module
// root) is what every other package speaks, so it compiles nothing of the
// project but leaves, and they nothing at all of it.
func TestVocabularyIsALeaf(t *testing.T) {
	pkgs := listModule(t)
	for _, v := range leafViolations(pkgs) {
		t.Error(v)
	}
}

func leafViolations(pkgs map[string]pkg) []string {
	var out []string
	isLeaf := func(p string) bool { return slices.Contains(leaves, p) }
	for _, p := range append([]string{module}, leaves...) {
		got, ok := pkgs[p]
		if !ok {
			out = append(out, p+": no such package")
			continue
		}
		for _, d := range got.Deps {
			if d != module && !strings.HasPrefix(d, module+"/") {
				continue
			}
			if p == module && isLeaf(d) {
				continue
			}
			out = append(out, fmt.Sprintf("%s depends on %s: the vocabulary and its leaves compile nothing else of the project", p, d))
		}
	}
	return out
}

func TestLeafViolationsCatchesAnEngineImport(t *testing.T) {
	got := leafViolations(map[string]pkg{
		module:             {Deps: []string{module + "/reason", module + "/matcher", "fmt"}},
		module + "/reason": {Deps: []string{"fmt"}},
	})
	want := []string{module + " depends on " + module + "/matcher: the vocabulary and its leaves compile nothing else of the project"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
