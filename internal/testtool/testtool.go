package testtool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Unavailable stops t because something it needs is missing: fatally under
// CI=true, as a skip elsewhere.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true)")
		return
	}
	t.Skip(msg + " (a failure under CI=true)")
}

// Require finds each program (a name on PATH or an absolute path) and returns
// their paths in order; a missing one stops t as Unavailable does. purpose
// says what needs them, for the message.
func Require(t testing.TB, purpose string, programs ...string) []string {
	t.Helper()
	paths, msg := Missing(exec.LookPath, purpose, programs...)
	if msg != "" {
		Unavailable(t, msg)
	}
	return paths
}

// Missing looks each program up with lookPath; msg names the first that is
// missing, or is empty when all were found.
func Missing(lookPath func(string) (string, error), purpose string, programs ...string) (paths []string, msg string) {
	for _, p := range programs {
		path, err := lookPath(p)
		if err != nil {
			return nil, fmt.Sprintf("%s needs %s: %v", purpose, p, err)
		}
		paths = append(paths, path)
	}
	return paths, ""
}

var exactVersion = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

// registryWords would appear in a lockfile that records where its tarballs
// came from; every tarball is to be fetched from whichever registry the
// installing machine is configured for.
var registryWords = []string{`"resolved"`, "registry"}

// CheckLockfile checks dir's package.json and package-lock.json: every
// dependency of package.json is an exact version, every locked package
// (links aside) has an exact version and a sha512 integrity hash, and
// neither file records a registry or a tarball location.
func CheckLockfile(t testing.TB, dir string) {
	t.Helper()
	for _, err := range LockfileProblems(dir) {
		t.Error(err)
	}
}

// LockfileProblems is what CheckLockfile reports, one entry a problem.
func LockfileProblems(dir string) []error {
	var errs []error
	files := map[string][]byte{}
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return []error{err}
		}
		files[f] = b
		for _, w := range registryWords {
			if bytes.Contains(b, []byte(w)) {
				errs = append(errs, fmt.Errorf("%s: contains %s: strip registry locations", f, w))
			}
		}
	}
	var pkg struct {
		Dependencies    map[string]string `json:"dependencies"`
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(files["package.json"], &pkg); err != nil {
		return append(errs, fmt.Errorf("package.json: %w", err))
	}
	for _, deps := range []map[string]string{pkg.Dependencies, pkg.DevDependencies} {
		for name, v := range deps {
			if !exactVersion.MatchString(v) {
				errs = append(errs, fmt.Errorf("package.json: %s is %q, want an exact version", name, v))
			}
		}
	}
	var lock struct {
		Packages map[string]struct {
			Version   string `json:"version"`
			Integrity string `json:"integrity"`
			Link      bool   `json:"link"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(files["package-lock.json"], &lock); err != nil {
		return append(errs, fmt.Errorf("package-lock.json: %w", err))
	}
	if len(lock.Packages) < 2 {
		errs = append(errs, fmt.Errorf("package-lock.json: no locked packages (lockfileVersion 3 lists them under \"packages\")"))
	}
	for name, p := range lock.Packages {
		if name == "" || p.Link {
			continue
		}
		if !exactVersion.MatchString(p.Version) || !strings.HasPrefix(p.Integrity, "sha512-") {
			errs = append(errs, fmt.Errorf("package-lock.json: %s: version %q, integrity %q: want an exact version and a sha512 integrity", name, p.Version, p.Integrity))
		}
	}
	return errs
}

// NPMCI installs exactly the packages locked in dir's package-lock.json into
// dir/node_modules, without running their install scripts. --prefer-offline
// installs from npm's cache when it holds the locked versions; the
// integrity hashes are checked either way.
func NPMCI(ctx context.Context, dir string) error {
	cmd := exec.CommandContext(ctx, "npm", "ci", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NPM_CONFIG_UPDATE_NOTIFIER=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return nil
}

// CopyFiles copies the named files of src into dst.
func CopyFiles(dst, src string, names ...string) error {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, n), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
