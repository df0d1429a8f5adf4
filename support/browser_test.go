package support

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled/support/supporttest"
)

// chromium is where Debian's chromium package installs the browser.
const chromium = "/usr/bin/chromium"

// browse loads url in headless Chromium and returns the DOM once the page's
// scripts have settled. State is carried in the URL fragment, so no
// DevTools session is needed: --virtual-time-budget lets the page's fetches
// finish (virtual time stops while requests are pending) before
// --dump-dom prints. With screenshot set, it also saves a PNG there.
func browse(t *testing.T, url, screenshot string) string {
	t.Helper()
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--disable-default-apps", "--no-default-browser-check",
		"--user-data-dir=" + t.TempDir(),
		// Belt and braces: no name resolves, so nothing but the loopback
		// test server can be reached whatever the browser would try.
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		"--virtual-time-budget=15000",
		"--window-size=1280,1500",
	}
	if screenshot != "" {
		args = append(args, "--screenshot="+screenshot)
	} else {
		args = append(args, "--dump-dom")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, append(args, url)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, errOut.String())
	}
	return out.String()
}

var tagRE = regexp.MustCompile(`<[^>]*>`)

// text strips tags, so checks read like what a person sees.
func text(dom string) string {
	s := tagRE.ReplaceAllString(dom, " ")
	return strings.Join(strings.Fields(s), " ")
}

func mustContain(t *testing.T, what, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

func TestBrowser(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("headless browser test skipped: %s not found (install Debian's chromium package: apt-get install -y chromium)", chromium)
	}
	if testing.Short() {
		t.Skip("headless browser test skipped in -short mode")
	}
	st := supporttest.Open(t)
	supporttest.Seed(t, st)
	srv := httptest.NewServer(NewHandler(Config{Store: st, Token: []byte(testToken), Ledgers: supporttest.Ledgers}))
	defer srv.Close()
	page := srv.URL + "/ui/"

	t.Run("home", func(t *testing.T) {
		dom := browse(t, page+"#token="+testToken, "")
		mustContain(t, "home", dom, `data-state="ready"`)
		txt := text(dom)
		open, final := strings.Index(txt, "Open intents"), strings.Index(txt, "Recent final verdicts")
		if open < 0 || final < open {
			t.Fatalf("open intents are not listed before finals:\n%s", txt)
		}
		mustContain(t, "open list", txt[open:final], "pay-notyet", "pay-unreadable", "pay-new", "no verdict yet")
		mustContain(t, "final list", txt[final:], "pay-found", "pay-absent", "pay-invalid", "remote-found")
		if strings.Contains(txt[open:final], "pay-found") || strings.Contains(txt[final:], "pay-notyet") {
			t.Errorf("intents in the wrong list:\n%s", txt)
		}
		mustContain(t, "counts", txt, "open: 3", "total: 7")
		if strings.Contains(dom, testToken) {
			t.Error("the token is still in the page after it was moved to sessionStorage")
		}
	})

	t.Run("search", func(t *testing.T) {
		dom := browse(t, page+"#token="+testToken+"&q="+supporttest.IDFound, "")
		mustContain(t, "search", dom, `data-state="ready"`, `href="#intent=pay-found"`)
		mustContain(t, "search", text(dom), "Search results for pay-found", "intent id")
		dom = browse(t, page+"#token="+testToken+"&q=1040", "")
		mustContain(t, "block search", dom, `href="#intent=pay-found"`, `href="#intent=pay-absent"`)
		mustContain(t, "block search", text(dom), "near miss")
	})

	t.Run("detail", func(t *testing.T) {
		dom := browse(t, page+"#token="+testToken+"&intent="+supporttest.IDFound, "")
		mustContain(t, "detail", dom, `data-state="ready"`, `<tr class="differs"><th scope="row">amount</th>`)
		txt := text(dom)
		mustContain(t, "detail", txt,
			"Intent pay-found",
			"Tell the person: The payment went through in block 1042 — do not pay again.",
			"Amount 1.5 ICP (150000000 units)",
			"Index 1042", "Time (UTC) 2026-11-29T11:59:00Z", "Kind xfer",
			"From (UTC) 2026-11-29T11:57:00Z", "To (UTC) 2026-11-30T12:01:00Z", "First block 998", "Last block 1311",
			"Verified by certificate+chain", "Tip index 1500", "Certified time (UTC) 2026-11-29T12:01:00Z",
			"Block 1040", "amount 150000000 differs",
			"Verdict history", "1 not_yet no 2026-11-29T13:00:00Z", "2 found yes 2026-11-29T13:01:00Z 1042")
		if strings.Contains(dom, `<tr class="differs"><th scope="row">to</th>`) {
			t.Error("a field that matched is highlighted")
		}
		dom = browse(t, page+"#token="+testToken+"&intent="+supporttest.IDNotYet, "")
		mustContain(t, "not_yet detail", text(dom),
			"Tell the person: Not yet known; the window closes at 2026-11-30T12:01:00Z; do not pay again before then.")

		png := filepath.Join(t.TempDir(), "detail-absent.png")
		browse(t, page+"#token="+testToken+"&intent="+supporttest.IDAbsent, png)
		b, err := os.ReadFile(png)
		if err != nil || len(b) < 10000 || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("screenshot %s: %d bytes, %v", png, len(b), err)
		}
		if dir := os.Getenv("SUPPORT_SCREENSHOT_DIR"); dir != "" {
			// Lets a person look at the page without a browser of their own.
			if err := os.WriteFile(filepath.Join(dir, "detail-absent.png"), b, 0o644); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("token", func(t *testing.T) {
		dom := browse(t, page+"#intent="+supporttest.IDFound, "")
		mustContain(t, "no token", dom, `data-state="error"`)
		mustContain(t, "no token", text(dom), "Enter the support token to see data.")
		if strings.Contains(text(dom), "1042") {
			t.Error("data shown without a token")
		}
		dom = browse(t, page+"#token=wrong&intent="+supporttest.IDFound, "")
		mustContain(t, "wrong token", dom, `data-state="error"`)
		mustContain(t, "wrong token", text(dom), "Token missing or wrong")
	})
}
