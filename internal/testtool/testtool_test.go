package testtool

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how it was stopped.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.fatal = args[0].(string) }
func (r *recorder) Skip(args ...any)  { r.skip = args[0].(string) }

func TestUnavailableFailsInCI(t *testing.T) {
	t.Setenv("CI", "true")
	r := &recorder{}
	Unavailable(r, "node is missing")
	if r.fatal == "" || r.skip != "" {
		t.Fatalf("CI=true: fatal %q, skip %q; want a failure", r.fatal, r.skip)
	}
	t.Setenv("CI", "")
	r = &recorder{}
	Unavailable(r, "node is missing")
	if r.skip == "" || r.fatal != "" {
		t.Fatalf("outside CI: fatal %q, skip %q; want a skip", r.fatal, r.skip)
	}
}

func TestMissing(t *testing.T) {
	none := func(string) (string, error) { return "", exec.ErrNotFound }
	all := func(name string) (string, error) { return "/bin/" + name, nil }
	if _, msg := Missing(none, "the suite", "node"); !strings.Contains(msg, "the suite needs node") {
		t.Errorf("without node: %q", msg)
	}
	paths, msg := Missing(all, "the suite", "node", "npm")
	if msg != "" || strings.Join(paths, " ") != "/bin/node /bin/npm" {
		t.Errorf("with both: %q %q", paths, msg)
	}
}

func writeProject(t *testing.T, pkg, lock string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(pkg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const goodPkg = `{"name":"x","dependencies":{"a":"1.2.3"}}`

func TestLockfileProblems(t *testing.T) {
	good := `{"lockfileVersion":3,"packages":{"":{"name":"x"},"node_modules/a":{"version":"1.2.3","integrity":"sha512-AAAA"}}}`
	if errs := LockfileProblems(writeProject(t, goodPkg, good)); len(errs) != 0 {
		t.Errorf("a clean lockfile: %v", errs)
	}
	for name, c := range map[string]struct{ pkg, lock, want string }{
		"range in package.json": {`{"dependencies":{"a":"^1.2.3"}}`, good, "exact version"},
		"resolved":              {goodPkg, strings.Replace(good, `"version"`, `"resolved":"x","version"`, 1), `"resolved"`},
		"registry host":         {goodPkg, strings.Replace(good, `"name":"x"`, `"name":"registry.example"`, 1), "registry"},
		"sha1 only":             {goodPkg, strings.Replace(good, "sha512-", "sha1-", 1), "sha512"},
		"prerelease":            {goodPkg, strings.Replace(good, `"1.2.3"`, `"1.2.3-rc.1"`, 1), "exact version"},
		"nothing locked":        {goodPkg, `{"lockfileVersion":1,"dependencies":{}}`, "no locked packages"},
	} {
		errs := LockfileProblems(writeProject(t, c.pkg, c.lock))
		var all []string
		for _, e := range errs {
			all = append(all, e.Error())
		}
		if !strings.Contains(strings.Join(all, "\n"), c.want) {
			t.Errorf("%s: got %q, want a problem mentioning %q", name, all, c.want)
		}
	}
}
