package main

// TestDocLinksResolve: every citation of a docs/*.md page in the code and
// every relative link of the READMEs and docs/*.md names a file that exists
// and, with a #fragment, an anchor that page has (a heading's GitHub slug
// or an explicit <a id>). Moving a section or renaming a heading without
// its citations fails here.

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const repoRoot = "../.."

// pendingDocs are pages other changes add; links to them are allowed until
// they exist, and the test fails once they do so that the entry goes.
var pendingDocs = map[string]bool{}

var (
	codeCiteRE = regexp.MustCompile(`docs/([A-Za-z0-9_-]+\.md)(#[A-Za-z0-9_-]+)?`)
	mdLinkRE   = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	anchorIDRE = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
	headingRE  = regexp.MustCompile(`^#{1,6} (.+?)\s*#*\s*$`)
	slugDropRE = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchors returns the anchors of a markdown file as GitHub renders them.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, seen := map[string]bool{}, map[string]int{}
	fence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range anchorIDRE.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := anchorIDRE.ReplaceAllString(m[1], "")
		slug := strings.ReplaceAll(slugDropRE.ReplaceAllString(strings.ToLower(strings.TrimSpace(text)), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func TestDocLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	check := func(from, target string) {
		t.Helper()
		file, frag, _ := strings.Cut(target, "#")
		rel := filepath.ToSlash(filepath.Clean(file))
		if pendingDocs[rel] {
			if _, err := os.Stat(filepath.Join(repoRoot, rel)); err == nil {
				t.Errorf("%s exists now: take it off pendingDocs", rel)
			}
			return
		}
		if _, err := os.Stat(filepath.Join(repoRoot, rel)); err != nil {
			t.Errorf("%s: %s does not exist", from, target)
			return
		}
		if frag == "" || !strings.HasSuffix(rel, ".md") {
			return
		}
		a, ok := cache[rel]
		if !ok {
			a = anchors(t, filepath.Join(repoRoot, rel))
			cache[rel] = a
		}
		if !a[frag] {
			t.Errorf("%s: %s has no anchor #%s", from, rel, frag)
		}
	}

	// Citations in code, tests and migrations.
	cites := 0
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != repoRoot && (strings.HasPrefix(n, ".") || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".sql") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		for _, m := range codeCiteRE.FindAllStringSubmatch(string(b), -1) {
			if strings.HasSuffix(path, "docs_links_test.go") {
				continue // this file's own patterns and examples
			}
			cites++
			check(rel, "docs/"+m[1]+m[2])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cites < 10 {
		t.Errorf("found only %d citations of docs/*.md in the code; the scan no longer sees them", cites)
	}

	// Relative links of the READMEs and the docs.
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"README.md", "deploy/kubernetes/README.md", "clients/js/README.md"} {
		pages = append(pages, filepath.Join(repoRoot, p))
	}
	sort.Strings(pages)
	links := 0
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		dir := filepath.Dir(rel)
		for _, m := range mdLinkRE.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			if strings.HasPrefix(target, "#") {
				check(rel, rel+target)
				continue
			}
			check(rel, filepath.ToSlash(filepath.Join(dir, target)))
		}
	}
	if links < 20 {
		t.Errorf("found only %d relative links in the README and docs/; the scan no longer sees them", links)
	}
}
