package reason

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write docs/reasons.md from Registry")

const (
	root    = ".."
	docPath = "../docs/reasons.md"
)

var (
	literalRE = regexp.MustCompile(`"(E_[A-Z_]+)"`)
	// constRE finds uses of this package's constants in other packages.
	constRE = regexp.MustCompile(`\breason\.([A-Z][A-Za-z]+)\b`)
)

// sourceCodes returns every `"E_…"` literal in the project's non-test Go
// code outside this package and in clients/js/src, with one file it
// appears in.
func sourceCodes(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == ".":
			case rel == "reason", strings.HasPrefix(d.Name(), "."), d.Name() == "node_modules", d.Name() == "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		goFile := strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go")
		jsFile := strings.HasPrefix(rel, filepath.Join("clients", "js", "src")+string(filepath.Separator)) &&
			(strings.HasSuffix(path, ".ts") || strings.HasSuffix(path, ".js"))
		if !goFile && !jsFile {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range literalRE.FindAllSubmatch(b, -1) {
			if _, ok := found[string(m[1])]; !ok {
				found[string(m[1])] = rel
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 40 {
		t.Fatalf("found only %d codes in the sources; the walk no longer sees the code", len(found))
	}
	return found
}

// constantUses returns the codes of this package's constants other
// packages' non-test Go code names.
func constantUses(t *testing.T) map[Code]bool {
	t.Helper()
	byName := constantNames(t)
	used := map[Code]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (rel == "reason" || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range constRE.FindAllSubmatch(b, -1) {
			if c, ok := byName[string(m[1])]; ok {
				used[c] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return used
}

var constDeclRE = regexp.MustCompile(`(?m)^\t([A-Z][A-Za-z]+)\s+Code = "(E_[A-Z_]+)"$`)

// constantNames reads this package's Code constants from its source.
func constantNames(t *testing.T) map[string]Code {
	t.Helper()
	b, err := os.ReadFile("reason.go")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]Code{}
	for _, m := range constDeclRE.FindAllSubmatch(b, -1) {
		names[string(m[1])] = Code(m[2])
	}
	if len(names) < len(Registry) {
		t.Fatalf("read %d constants from reason.go for %d registered codes", len(names), len(Registry))
	}
	return names
}

// TestEveryCodeInTheSourcesIsRegistered: a code a verdict, reject, API
// answer, CLI or client can carry is documented by the registry.
func TestEveryCodeInTheSourcesIsRegistered(t *testing.T) {
	var missing []string
	for c, file := range sourceCodes(t) {
		if _, ok := Lookup(Code(c)); !ok {
			missing = append(missing, c+" ("+file+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("codes used in the sources but not in reason.Registry (add them to reason/reason.go, then go generate ./reason):\n%s",
			strings.Join(missing, "\n"))
	}
}

// TestEveryRegisteredCodeIsUsed: the registry documents no code nothing
// can carry, except those listed as Pending.
func TestEveryRegisteredCodeIsUsed(t *testing.T) {
	lits, consts := sourceCodes(t), constantUses(t)
	var unused []string
	for _, e := range Registry {
		_, lit := lits[string(e.Code)]
		used := lit || consts[e.Code]
		switch {
		case !used && !Pending[e.Code]:
			unused = append(unused, string(e.Code))
		case used && Pending[e.Code]:
			t.Errorf("%s is used now: take it off reason.Pending", e.Code)
		}
	}
	if len(unused) > 0 {
		t.Errorf("registered codes no code uses: %v", unused)
	}
}

// TestRegistryIsWellFormed: one entry per code, each with
// a place, a meaning and an action, and an HTTP status exactly for API codes.
func TestRegistryIsWellFormed(t *testing.T) {
	places := []string{Invalid, Unreadable, Reject, API, CLI, Client}
	seen := map[Code]bool{}
	for _, e := range Registry {
		if !regexp.MustCompile(`^E_[A-Z_]+$`).MatchString(string(e.Code)) {
			t.Errorf("%q is not an E_ code", e.Code)
		}
		if seen[e.Code] {
			t.Errorf("%s is registered twice", e.Code)
		}
		seen[e.Code] = true
		if len(e.Where) == 0 || e.Meaning == "" || e.Action == "" {
			t.Errorf("%s: Where, Meaning and Action are required", e.Code)
		}
		for _, w := range e.Where {
			if !slices.Contains(places, w) {
				t.Errorf("%s: unknown place %q", e.Code, w)
			}
		}
		if slices.Contains(e.Where, API) != (e.HTTP != 0) {
			t.Errorf("%s: HTTP %d with places %v", e.Code, e.HTTP, e.Where)
		}
	}
	for c := range Pending {
		if _, ok := Lookup(c); !ok {
			t.Errorf("pending %s is not registered", c)
		}
	}
	names := constantNames(t)
	if len(names) != len(Registry) {
		t.Errorf("%d constants for %d registered codes", len(names), len(Registry))
	}
	for n, c := range names {
		if _, ok := Lookup(c); !ok {
			t.Errorf("constant %s = %s is not registered", n, c)
		}
	}
}

// TestReasonsDocIsGenerated: docs/reasons.md is the registry's rendering.
func TestReasonsDocIsGenerated(t *testing.T) {
	want := render()
	if *update {
		if err := os.WriteFile(docPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v (regenerate it: go generate ./reason)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/reasons.md is not the registry's rendering: regenerate it with `go generate ./reason` (never edit it by hand)")
	}
}

var placeWords = map[string]string{
	Invalid:    "`invalid` (final)",
	Unreadable: "`unreadable` (not final)",
	Reject:     "reject",
	API:        "support API",
	CLI:        "CLI",
	Client:     "TS client",
}

// render writes the registry as docs/reasons.md.
func render() []byte {
	var b bytes.Buffer
	b.WriteString(`# Reason codes

<!-- Generated from reason/reason.go by ` + "`go generate ./reason`" + `; do not edit. -->

Every code a verdict's ` + "`reason.code`" + `, a reject on ` + "`reconcile.rejects.<intent_id>`" + `, an error of the
support API, the ` + "`reconciled`" + ` CLI or the TypeScript client can carry. A code never changes meaning.
*Appears with* says where: an ` + "`invalid`" + ` verdict (final: the intent itself is wrong, nothing was
checked), an ` + "`unreadable`" + ` verdict (not final: nothing is known yet, the daemon retries), a reject
(no verdict: the intent was refused), an error answer of the support API (with its HTTP status), or
an error the CLI or the TypeScript client raises of its own. What each status tells the person is in
the [README](../README.md#verdicts-what-each-status-tells-the-person); the rules behind them are in
[design.md](design.md#statuses).

| code | appears with | meaning | what to do |
|---|---|---|---|
`)
	entries := slices.Clone(Registry)
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(string(a.Code), string(b.Code)) })
	for _, e := range entries {
		var where []string
		for _, w := range e.Where {
			s := placeWords[w]
			if w == API {
				s = fmt.Sprintf("support API %d", e.HTTP)
			}
			where = append(where, s)
		}
		code := "`" + string(e.Code) + "`"
		if Pending[e.Code] {
			code += " (being added)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", code, strings.Join(where, ", "), cell(e.Meaning), cell(e.Action))
	}
	return b.Bytes()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
