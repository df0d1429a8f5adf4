package main

// Tests that hold the documentation and the deployment examples to the
// code: the configuration table (docs/configuration.md) lists exactly the
// serve flags, with their environment variables and defaults; the example
// ledgers file loads; the Kubernetes example's environment is one serve
// accepts; the support API's error codes are listed (docs/support.md); the
// NATS example (docs/protocol.md, readme_test.go) runs as written against the
// daemon.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/reconciled/reconciled/reconcile"
)

const (
	readmePath         = "../../README.md"
	ledgersExamplePath = "../../deploy/ledgers.example.json"
	// The pages whose blocks and tables the tests run or check.
	wireDocPath    = "../../docs/protocol.md"
	configDocPath  = "../../docs/configuration.md"
	opsDocPath     = "../../docs/operations.md"
	supportDocPath = "../../docs/support.md"
)

// readDoc reads one documentation page.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}

// codeFlag is one serve flag as the code defines it.
type codeFlag struct {
	name, typ, usage string
	def              string
	hasDef           bool // flag.PrintDefaults omits zero defaults
}

var defaultRE = regexp.MustCompile(`\(default (.*)\)$`)

// serveFlags reads the serve flags from `serve --help`, the FlagSet's own
// PrintDefaults, so the test follows the code without a hand-kept list.
func serveFlags(t *testing.T) []codeFlag {
	t.Helper()
	var help bytes.Buffer
	_, err := parseServeConfig([]string{"--help"}, func(string) string { return "" }, &help)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve --help: got %v, want flag.ErrHelp", err)
	}
	var flags []codeFlag
	for _, line := range strings.Split(help.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			f := strings.Fields(strings.TrimPrefix(line, "  -"))
			cf := codeFlag{name: f[0]}
			if len(f) > 1 {
				cf.typ = f[1]
			}
			flags = append(flags, cf)
		case strings.HasPrefix(line, "    \t") && len(flags) > 0:
			cf := &flags[len(flags)-1]
			cf.usage = strings.TrimSpace(cf.usage + " " + strings.TrimSpace(line))
		}
	}
	if len(flags) < 10 {
		t.Fatalf("serve --help listed %d flags; the parser no longer understands it:\n%s", len(flags), help.String())
	}
	for i := range flags {
		cf := &flags[i]
		m := defaultRE.FindStringSubmatch(cf.usage)
		if m == nil {
			continue
		}
		cf.hasDef, cf.def = true, m[1]
		cf.usage = strings.TrimSpace(strings.TrimSuffix(cf.usage, m[0]))
		if cf.typ == "string" {
			if s, err := strconv.Unquote(m[1]); err == nil {
				cf.def = s
			}
		}
	}
	return flags
}

// tableRow is one row of the configuration table of docs/configuration.md.
type tableRow struct {
	flag, env, def, meaning string
}

const configTableHeader = "| flag | env var | default | meaning |"

func readmeConfigTable(t *testing.T, readme string) []tableRow {
	t.Helper()
	lines := strings.Split(readme, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == configTableHeader {
			if start >= 0 {
				t.Fatalf("docs/configuration.md has two configuration tables (%q)", configTableHeader)
			}
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("docs/configuration.md has no configuration table with the header %q", configTableHeader)
	}
	var rows []tableRow
	for _, l := range lines[start+2:] {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") {
			break
		}
		cells := splitRow(l)
		if len(cells) != 4 {
			t.Fatalf("docs/configuration.md: configuration row has %d cells, want 4: %s", len(cells), l)
		}
		rows = append(rows, tableRow{flag: unquoteCell(cells[0]), env: unquoteCell(cells[1]),
			def: unquoteCell(cells[2]), meaning: cells[3]})
	}
	return rows
}

// splitRow splits a Markdown table row on the '|' not escaped as '\|'.
func splitRow(l string) []string {
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(l); i++ {
		switch {
		case l[i] == '\\' && i+1 < len(l) && l[i+1] == '|':
			cur.WriteByte('|')
			i++
		case l[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(l[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

func unquoteCell(c string) string {
	if len(c) >= 2 && strings.HasPrefix(c, "`") && strings.HasSuffix(c, "`") {
		return c[1 : len(c)-1]
	}
	return c
}

// noDefault is how the table writes a flag without a default.
const noDefault = "—"

func TestReadmeConfigTableMatchesServeFlags(t *testing.T) {
	flags := serveFlags(t)
	rows := readmeConfigTable(t, readDoc(t, configDocPath))

	// The environment variables parseServeConfig really consults.
	consulted := map[string]bool{}
	if _, err := parseServeConfig(nil, func(k string) string { consulted[k] = true; return "" }, io.Discard); err != nil {
		t.Fatalf("serve with no flags and no environment: %v", err)
	}

	byFlag := map[string]tableRow{}
	for _, r := range rows {
		if _, dup := byFlag[r.flag]; dup {
			t.Errorf("docs/configuration.md lists %s twice", r.flag)
		}
		byFlag[r.flag] = r
	}
	var expected strings.Builder
	failed := false
	for _, f := range flags {
		env := envName(f.name)
		def := noDefault
		if f.hasDef {
			def = "`" + f.def + "`"
		}
		fmt.Fprintf(&expected, "| `--%s` | `%s` | %s | %s |\n", f.name, env, def, strings.ReplaceAll(f.usage, "|", `\|`))
		if !consulted[env] {
			t.Errorf("--%s: serve does not read %s", f.name, env)
		}
		r, ok := byFlag["--"+f.name]
		if !ok {
			t.Errorf("docs/configuration.md: configuration table lacks --%s", f.name)
			failed = true
			continue
		}
		delete(byFlag, "--"+f.name)
		if r.env != env {
			t.Errorf("--%s: docs/configuration.md says env %q, the code reads %q", f.name, r.env, env)
			failed = true
		}
		switch {
		case f.hasDef && r.def != f.def:
			t.Errorf("--%s: docs/configuration.md says default %q, the code has %q", f.name, r.def, f.def)
			failed = true
		case !f.hasDef && r.def != noDefault && !(f.typ == "" && r.def == "false"):
			t.Errorf("--%s: docs/configuration.md says default %q, the code has none (want %q)", f.name, r.def, noDefault)
			failed = true
		}
		if strings.TrimSpace(r.meaning) == "" {
			t.Errorf("--%s: docs/configuration.md gives no meaning", f.name)
		}
	}
	extra := make([]string, 0, len(byFlag))
	for name := range byFlag {
		extra = append(extra, name)
	}
	sort.Strings(extra)
	for _, name := range extra {
		t.Errorf("docs/configuration.md: configuration table lists %s, which serve does not have", name)
		failed = true
	}
	if failed {
		t.Logf("the rows the code implies (meanings from the flag usage; edit freely):\n%s", expected.String())
	}
}

func TestLedgersExampleLoads(t *testing.T) {
	into := map[string]reconcile.LedgerConfig{}
	if err := readLedgersFile(ledgersExamplePath, into); err != nil {
		t.Fatal(err)
	}
	// The ids of docs/configuration.md and the Kubernetes ConfigMap: ckBTC, ckETH, the
	// OpenChat SNS ledger and the ICP ledger.
	for _, id := range []string{"mxzaz-hqaaa-aaaar-qaada-cai", "ss2fx-dyaaa-aaaar-qacoq-cai", "2ouva-viaaa-aaaaq-aaamq-cai", "ryjl3-tyaaa-aaaaa-aaaba-cai"} {
		sp, ok := into[id]
		if !ok {
			t.Errorf("%s: not in %s", id, ledgersExamplePath)
			continue
		}
		// Mainnet ICRC ledgers and the ICP ledger have TW 24h and drift 60s: the configured
		// window must not be narrower, or a late execution would be missed.
		if sp.TW < 24*time.Hour || sp.Drift < time.Minute {
			t.Errorf("%s: tw %s / drift %s narrower than the ledger's 24h / 60s", id, sp.TW, sp.Drift)
		}
	}
	if len(into) != 4 {
		t.Errorf("%s has %d ledgers, want the 4 the docs describe", ledgersExamplePath, len(into))
	}
}

// TestKubernetesEnvAcceptedByServe feeds the sidecar's environment from
// the example Deployment to serve's configuration parser: every setting the
// manifest makes must be one serve takes, with a value it accepts. Files
// the pod mounts are replaced by local ones (the ledgers ConfigMap by the
// example ledgers file it must equal; a test in ./deploy checks that).
func TestKubernetesEnvAcceptedByServe(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					InitContainers []struct {
						Name string `yaml:"name"`
						Env  []struct {
							Name      string         `yaml:"name"`
							Value     string         `yaml:"value"`
							ValueFrom map[string]any `yaml:"valueFrom"`
						} `yaml:"env"`
					} `yaml:"initContainers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &dep); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret-support-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, c := range dep.Spec.Template.Spec.InitContainers {
		if c.Name != "reconciled" {
			continue
		}
		for _, e := range c.Env {
			if !strings.HasPrefix(e.Name, "RECONCILED_") {
				continue
			}
			v := e.Value
			switch {
			case e.ValueFrom != nil && e.Name == "RECONCILED_NATS_URL":
				v = "nats://127.0.0.1:4222"
			case e.ValueFrom != nil:
				t.Fatalf("%s comes from %v: the test does not know a stand-in value", e.Name, e.ValueFrom)
			case e.Name == "RECONCILED_LEDGERS_FILE":
				v = ledgersExamplePath
			case e.Name == "RECONCILED_SUPPORT_TOKEN_FILE":
				v = token
			case e.Name == "RECONCILED_DATA":
				v = filepath.Join(dir, "data")
			}
			env[e.Name] = v
		}
	}
	if len(env) == 0 {
		t.Fatal("no RECONCILED_ variables on the reconciled init container")
	}
	used := map[string]bool{}
	cfg, err := parseServeConfig(nil, func(k string) string { used[k] = true; return env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("serve refuses the Deployment's environment: %v", err)
	}
	for k := range env {
		if !used[k] {
			t.Errorf("%s is set in the Deployment but serve never reads it", k)
		}
	}
	if cfg.NATSURL == "" || cfg.NATSCreds == "" || cfg.SupportToken != "s3cret-support-token-0123456789abcdef" || len(cfg.Ledgers) != 4 ||
		!cfg.StrictLedgers || cfg.HTTPAddr != "0.0.0.0:8080" {
		t.Errorf("parsed %+v", cfg)
	}
}

var supportCodeRE = regexp.MustCompile(`"(E_[A-Z_]+)"`)

// TestReadmeListsEverySupportErrorCode: every error code the support API's
// code can answer is in the list of them in docs/support.md.
func TestReadmeListsEverySupportErrorCode(t *testing.T) {
	readme := readDoc(t, supportDocPath)
	_, list, ok := strings.Cut(readme, "\nErrors are `{\"error\":{\"code\":\"E_…\"")
	if !ok {
		t.Fatal("docs/support.md: no paragraph starting \"Errors are `{\"error\":{\"code\":\"E_…\"\"")
	}
	list, _, _ = strings.Cut(list, "\n\n")
	files, err := filepath.Glob("../../support/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("support sources: %v %v", files, err)
	}
	codes := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range supportCodeRE.FindAllStringSubmatch(string(b), -1) {
			codes[m[1]] = true
		}
	}
	if len(codes) < 10 {
		t.Fatalf("found only %v in the support code", codes)
	}
	var missing []string
	for c := range codes {
		if !strings.Contains(list, "`"+c+"`") {
			missing = append(missing, c)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/support.md's list of support API errors lacks %v", missing)
	}
}
