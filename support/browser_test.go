package support

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/internal/testtool"
	"github.com/reconciled/reconciled/support/supporttest"
)

// chromium is where Debian's chromium package installs the browser.
const chromium = "/usr/bin/chromium"

// plainHost is a name the browser resolves to 127.0.0.1 and nothing else.
const plainHost = "support.reconciled.test"

// switchable serves the handler on a fixed loopback address and can be
// taken down and brought back, as a daemon restarts.
type switchable struct {
	addr string
	h    http.Handler
	mu   sync.Mutex
	srv  *http.Server
}

func (s *switchable) up(t *testing.T) {
	t.Helper()
	addr := s.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		// The port may linger briefly after the previous server closed.
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	s.addr = ln.Addr().String()
	srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(ln)
}

func (s *switchable) down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

// gate holds the detail request of one intent until released, so that a
// test can make an older answer arrive after a newer one.
type gate struct {
	mu      sync.Mutex
	id      string
	arrived chan struct{}
	release chan struct{}
}

func (g *gate) hold(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.id, g.arrived, g.release = id, make(chan struct{}), make(chan struct{})
}

func (g *gate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		id, arrived, release := g.id, g.arrived, g.release
		if id != "" && r.URL.Path == "/api/v1/intents/"+id {
			g.id = ""
		} else {
			arrived = nil
		}
		g.mu.Unlock()
		if arrived != nil {
			close(arrived)
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		// A search for "boom" fails as a store failure would.
		if r.URL.Path == "/api/v1/search" && r.URL.Query().Get("q") == "boom" {
			writeError(w, http.StatusInternalServerError, "E_INTERNAL", "internal error; see the server log")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// console is one Chromium tab on the support page.
type console struct {
	t     *testing.T
	ctx   context.Context
	srv   *switchable
	shots string
	// downloads is where the browser saves files; it outlives the
	// browser, so that no download lands in a removed directory.
	downloads string
	// axe is axe-core's axe.min.js, injected into each view checked.
	axe *axeCore
}

func newConsole(t *testing.T, srv *switchable) *console {
	t.Helper()
	testtool.Require(t, "the support page's browser test (Debian's chromium package)", chromium)
	downloads := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		// No name resolves, so nothing but the loopback test server can be
		// reached whatever the browser would try.
		// plainHost too reaches the loopback server, as a page served
		// over plain http from a named host, which is no secure context.
		chromedp.Flag("host-resolver-rules", "MAP "+plainHost+" 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.WindowSize(1200, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	shots := os.Getenv("RECONCILED_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	return &console{t: t, ctx: ctx, srv: srv, shots: shots, downloads: downloads}
}

func (c *console) run(what string, actions ...chromedp.Action) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

func (c *console) eval(js string, out any) {
	c.t.Helper()
	c.run("evaluate "+js, chromedp.Evaluate(js, out))
}

// open loads the page afresh with a fragment; go_ changes the fragment in
// the same tab, as following a link does.
func (c *console) open(fragment string) {
	c.t.Helper()
	c.run("open", chromedp.Navigate("http://"+c.srv.addr+"/ui/#"+fragment))
}

func (c *console) goTo(fragment string) {
	c.t.Helper()
	c.eval(fmt.Sprintf("location.hash = %q", fragment), nil)
}

// visible is what a person sees in the page's main area and message:
// innerText leaves out hidden elements.
func (c *console) visible() string {
	c.t.Helper()
	var s string
	c.eval(`[document.querySelector("nav"), document.querySelector("main")].map(e => e ? e.innerText : "").join("\n")`, &s)
	return s
}

func (c *console) settled() {
	c.t.Helper()
	c.until("the page to settle", func() bool {
		var st string
		c.eval(`document.body.dataset.state`, &st)
		return st != "loading"
	})
}

// until polls cond until it holds; on timeout it fails with what is on
// screen and a screenshot.
func (c *console) until(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			png := c.shot("timeout-" + strings.NewReplacer(" ", "-", "/", "-", "\"", "").Replace(what))
			c.t.Fatalf("timed out waiting for %s; screenshot %s; on screen:\n%s", what, png, c.visible())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// see waits until every want is visible.
func (c *console) see(wants ...string) string {
	c.t.Helper()
	var txt string
	c.until(fmt.Sprintf("%q on screen", wants), func() bool {
		txt = c.visible()
		for _, w := range wants {
			if !strings.Contains(txt, w) {
				return false
			}
		}
		return true
	})
	return txt
}

func (c *console) notSee(txt string, unwanted ...string) {
	c.t.Helper()
	for _, u := range unwanted {
		if strings.Contains(txt, u) {
			c.t.Errorf("on screen, but must not be: %q\n%s", u, txt)
		}
	}
}

// heading waits until the view's heading is exactly h: a heading that
// merely contains h may be the previous view's.
func (c *console) heading(h string) {
	c.t.Helper()
	c.until(fmt.Sprintf("the heading %q", h), func() bool {
		var st string
		c.eval(`document.body.dataset.state`, &st)
		return st != "loading" && c.text("#view-h") == h
	})
}

// shown tells whether the element is laid out (not hidden, nor inside a
// hidden element).
func (c *console) shown(sel string) bool {
	c.t.Helper()
	var ok bool
	c.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.getClientRects().length > 0 })()`, sel), &ok)
	return ok
}

func (c *console) text(sel string) string {
	c.t.Helper()
	var s string
	c.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.innerText : "" })()`, sel), &s)
	return s
}

// search types q into the search box and presses Enter.
func (c *console) search(q string) {
	c.t.Helper()
	c.eval(`document.getElementById("q").value = ""`, nil)
	c.run("search "+q, chromedp.Click("#q", chromedp.ByID), chromedp.SendKeys("#q", q+kb.Enter, chromedp.ByID))
}

func (c *console) shot(name string) string {
	c.t.Helper()
	var png []byte
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.CaptureScreenshot(&png)); err != nil {
		c.t.Errorf("screenshot %s: %v", name, err)
		return ""
	}
	p := filepath.Join(c.shots, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		c.t.Errorf("screenshot %s: %v", name, err)
	}
	return p
}

// axeCore is axe-core's axe.min.js: the file RECONCILED_AXE names, or else
// the version testdata/axe/package-lock.json pins, installed by npm ci while
// the test starts its browser.
type axeCore struct {
	done    chan struct{}
	src     string
	version string // the pinned version; "" for RECONCILED_AXE's file
	err     error
}

func loadAxe(t *testing.T) *axeCore {
	t.Helper()
	a := &axeCore{done: make(chan struct{})}
	if p := os.Getenv("RECONCILED_AXE"); p != "" {
		b, err := os.ReadFile(p)
		a.src, a.err = string(b), err
		close(a.done)
		return a
	}
	testtool.Require(t, "the support page's accessibility check (axe-core from npm)", "node", "npm")
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join("testdata", "axe", "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if a.version = pkg.Dependencies["axe-core"]; err != nil || a.version == "" {
		t.Fatalf("testdata/axe/package.json: axe-core %q: %v", a.version, err)
	}
	dir := t.TempDir()
	t.Cleanup(func() { <-a.done }) // before dir is removed
	go func() {
		defer close(a.done)
		if a.err = testtool.CopyFiles(dir, filepath.Join("testdata", "axe"), "package.json", "package-lock.json"); a.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if a.err = testtool.NPMCI(ctx, dir); a.err != nil {
			return
		}
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
		a.src, a.err = string(b), err
	}()
	return a
}

// checkA11y runs axe-core over the page as it is on screen and fails on any
// violation. axe-core is injected once per page load.
func (c *console) checkA11y(what string) {
	c.t.Helper()
	<-c.axe.done
	if c.axe.err != nil {
		c.t.Fatalf("axe-core: %v", c.axe.err)
	}
	const version = `typeof axe === "undefined" ? "" : axe.version`
	var v string
	c.eval(version, &v)
	if v == "" {
		c.run("inject axe-core", chromedp.Evaluate(c.axe.src, nil))
		c.eval(version, &v)
	}
	if c.axe.version != "" && v != c.axe.version {
		c.t.Fatalf("axe-core %q is running, want the pinned %s", v, c.axe.version)
	}
	var res string
	c.run("axe-core on "+what, chromedp.Evaluate(
		`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations.map(v => [v.id, v.help, v.nodes.map(n => n.target.join(" "))])))`,
		&res, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if res != "[]" {
		c.t.Errorf("%s: axe-core %s violations: %s", what, v, res)
	}
}

// TestAxeLockfile: the accessibility check's axe-core is pinned exactly and
// its lockfile names no registry.
func TestAxeLockfile(t *testing.T) {
	testtool.CheckLockfile(t, filepath.Join("testdata", "axe"))
}

// copyAndCheck presses the copy button named name and checks that want
// reached the clipboard and that the copy was announced.
func (c *console) copyAndCheck(name, want string) {
	c.t.Helper()
	sel := fmt.Sprintf(`//button[normalize-space(.)=%q or @aria-label=%q]`, name, name)
	c.run("press "+name, chromedp.Click(sel, chromedp.BySearch))
	c.until(fmt.Sprintf("%q on the clipboard after %s", want, name), func() bool { return c.clipboard() == want })
	c.until(fmt.Sprintf("the copy of %s to be announced", name), func() bool {
		return strings.Contains(c.text("#announce"), "Copied "+strings.TrimPrefix(name, "Copy "))
	})
}

// clipboard is the clipboard's text, read by the page.
func (c *console) clipboard() string {
	c.t.Helper()
	var got string
	// A page just loaded may not have the focus yet, and the clipboard
	// reads only for a focused document.
	c.run("focus the page", page.BringToFront(), emulation.SetFocusEmulationEnabled(true))
	c.run("read the clipboard", chromedp.Evaluate(`navigator.clipboard.readText()`, &got,
		func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) }))
	return got
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// filter fills in the list's filter form as a person does and submits it.
func (c *console) filter(status, ledger, from, to string) {
	c.t.Helper()
	for _, f := range []struct{ id, v string }{{"#f-status", status}, {"#f-ledger", ""}, {"#f-from", from}, {"#f-to", to}} {
		var got string
		c.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return "(no field)"; e.value = %q; `+
			`e.dispatchEvent(new Event("input", {bubbles: true})); return e.value })()`, f.id, f.v), &got)
		if got != f.v {
			c.t.Fatalf("%s holds %q after setting it to %q", f.id, got, f.v)
		}
	}
	if ledger != "" {
		c.run("type the ledger", chromedp.SendKeys("#f-ledger", ledger, chromedp.ByID))
	}
	c.run("filter", chromedp.Click(`form.filters button[type=submit]`, chromedp.ByQuery))
	c.settled()
}

// rows waits until the list shows exactly the intents want, in any order.
func (c *console) rows(what string, want ...string) {
	c.t.Helper()
	slices.Sort(want)
	var got []string
	c.until(what, func() bool {
		var st string
		c.eval(`document.body.dataset.state`, &st)
		if st == "loading" {
			return false
		}
		c.eval(`[...document.querySelectorAll("#list-view tbody td.id a")].map(a => a.textContent)`, &got)
		slices.Sort(got)
		return slices.Equal(got, want)
	})
}

// icpAccountID is the ICP ledger's account identifier, computed here
// independently of the code under test.
func icpAccountID(a icrc3.Account) string {
	sub := a.Subaccount
	if sub == nil {
		sub = make([]byte, 32)
	}
	h := sha256.New224()
	h.Write([]byte("\x0Aaccount-id"))
	h.Write(a.Owner.Raw)
	h.Write(sub)
	sum := h.Sum(nil)
	out := binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(sum))
	return hex.EncodeToString(append(out, sum...))
}

func TestConsole(t *testing.T) {
	axe := loadAxe(t)
	st := supporttest.Open(t)
	supporttest.Seed(t, st)
	supporttest.SeedConsole(t, st)
	g := &gate{}
	srv := &switchable{h: g.wrap(NewHandler(Config{Store: st, Token: []byte(testToken), Ledgers: supporttest.Ledgers}))}
	srv.up(t)
	t.Cleanup(srv.down)
	c := newConsole(t, srv)
	c.axe = axe

	t.Run("token", func(t *testing.T) {
		c.t = t
		c.open("intent=" + supporttest.IDFound)
		txt := c.see("Enter the support token")
		c.notSee(txt, "1042")
		c.checkA11y("the token prompt")
		c.open("token=" + testToken)
		c.see("Open intents")
		c.checkA11y("the home page")
		var href string
		c.eval(`location.href`, &href)
		if strings.Contains(href, testToken) {
			t.Errorf("the token stays in the address bar: %s", href)
		}
		// With a token in use the header says so rather than asking for one.
		if c.shown("#token") || !c.shown("#logout") || !strings.Contains(c.text("header"), "Support token in use") {
			t.Errorf("with a token the header shows: %q (token field shown: %t)", c.text("header"), c.shown("#token"))
		}
	})

	t.Run("heading", func(t *testing.T) {
		c.t = t
		c.goTo("intent=" + supporttest.IDFound)
		c.see("1.5 ICP to 2nxbn… — went through", "went through at 11:59 UTC on 29 Nov 2026")
		c.checkA11y("a found intent")
		c.goTo("intent=pay-99999")
		c.settled()
		txt := c.see("pay-99999")
		c.notSee(txt, "1042", "went through")
		c.checkA11y("an unknown intent")

		c.search(supporttest.IDFound)
		c.until("the search to be answered", func() bool { return strings.Contains(c.text("#search-list"), supporttest.IDFound) })
		c.search("boom")
		c.settled()
		txt = c.see("boom")
		c.notSee(txt, "pay-found")
		c.checkA11y("a failed search")
	})

	t.Run("stale", func(t *testing.T) {
		c.t = t
		g.hold(supporttest.IDAbsent)
		c.goTo("intent=" + supporttest.IDAbsent)
		<-g.arrived
		c.goTo("intent=" + supporttest.IDFound)
		c.see("1.5 ICP to 2nxbn… — went through", "went through at 11:59 UTC on 29 Nov 2026")
		close(g.release)
		c.until("the held answer to reach the page", func() bool {
			var n int
			c.eval(`performance.getEntriesByType("resource").filter(e => e.name.endsWith("/api/v1/intents/pay-absent") && e.responseEnd > 0).length`, &n)
			return n > 0
		})
		for range 10 { // the late answer must never be drawn
			c.notSee(c.visible(), supporttest.IDAbsent, "not happen")
			time.Sleep(50 * time.Millisecond)
		}
		c.see("1.5 ICP to 2nxbn… — went through", "went through at 11:59 UTC on 29 Nov 2026")
	})

	t.Run("advice", func(t *testing.T) {
		c.t = t
		c.goTo("intent=" + supporttest.IDNearAbsent)
		txt := c.see("A similar payment of 2.5 ICP left your account at 07:05", "check it before paying again")
		c.notSee(txt, "safe to pay again", "Blocks read 0")
		c.checkA11y("an absent intent with a near miss")
		nm := c.text("#near-misses")
		for _, w := range []string{"2.5 ICP", "2 ICP", supporttest.OtherCaller, "order-10200"} {
			if !strings.Contains(nm, w) {
				t.Errorf("near-miss table lacks %q:\n%s", w, nm)
			}
		}
		c.goTo("intent=" + supporttest.IDApprove)
		txt = c.see("approval is in place", "no tokens moved")
		c.notSee(c.text("#advice"), "went through")
		c.checkA11y("an approve")
		c.goTo("intent=" + supporttest.IDInvalid)
		c.see("could not be checked")
		adv := c.text("#advice")
		for _, w := range []string{"outcome is unknown", "do not pay again", "engineers"} {
			if !strings.Contains(adv, w) {
				t.Errorf("invalid advice lacks %q: %s", w, adv)
			}
		}
		c.notSee(adv, "could not be read:", "created_at_time is required")
		c.checkA11y("an invalid intent")
		c.goTo("intent=" + supporttest.IDUnreadable)
		c.see("not yet known", "Checks so far")
		adv = c.text("#advice")
		for _, w := range []string{"could not be read", "keep trying", "do not pay again"} {
			if !strings.Contains(adv, w) {
				t.Errorf("unreadable advice lacks %q: %s", w, adv)
			}
		}
		// The schedule is the follow-up's, not the advice's.
		if f := c.text("#watch"); !strings.Contains(f, "4 (") || !strings.Contains(f, "2026-11-29 13:30:00 UTC") {
			t.Errorf("unreadable follow-up: %s", f)
		}
		c.checkA11y("an unreadable intent")
	})

	t.Run("search", func(t *testing.T) {
		c.t = t
		caller, err := icrc3.ParseAccount(supporttest.Caller)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			"40.25",               // amount in tokens
			supporttest.MemoOrder, // memo as text
			hex.EncodeToString([]byte(supporttest.MemoOrder)), // memo as hex
			icpAccountID(caller),                              // the ICP ledger's account id
			strings.ToUpper(icpAccountID(caller)),
			supporttest.Caller[:11], // part of a principal
			supporttest.Caller,
			fmt.Sprint(supporttest.OrderBlock), // block index
			supporttest.IDOrder,                // intent id
			"pay-ord",                          // its beginning
		} {
			c.search(q)
			c.heading("Search results for " + q)
			txt := c.see(supporttest.IDOrder)
			c.notSee(txt, "E_BAD", "Failed")
		}
		c.checkA11y("search results")
		c.search(supporttest.PayeeSub)
		c.see(supporttest.IDNotYet)
		// A time range alone: what was paid between 07:04 and 07:06 UTC.
		c.goTo("from=2026-11-30T07:04:00Z&to=2026-11-30T07:06:00Z")
		txt := c.see(supporttest.IDOrder, supporttest.IDNearAbsent, supporttest.IDApprove)
		c.notSee(txt, supporttest.BulkPrefix, supporttest.IDFound)
		c.checkA11y("a time range")
	})

	t.Run("lists", func(t *testing.T) {
		c.t = t
		c.goTo("")
		c.see("Recent final verdicts")
		final := c.text("#final-list")
		for _, w := range []string{"Amount", "From", "To", "Memo", "Paid at", "Decided", "0.01 ICP", supporttest.Payee[:14]} {
			if !strings.Contains(final, w) {
				t.Errorf("final list lacks %q", w)
			}
		}
		var first string
		c.eval(`(() => { const r = document.querySelector("#final-list tbody tr a"); return r ? r.textContent : "" })()`, &first)
		if first != supporttest.BulkPrefix+"000" {
			t.Errorf("newest decided first: got %q first, want %s000", first, supporttest.BulkPrefix)
		}
		// A count filters when clicked, and paging goes past 100.
		c.run("click found", chromedp.Click(`#counts a[data-status="found"]`, chromedp.ByQuery))
		c.heading("Found intents")
		want := supporttest.BulkCount + 4 // bulk, pay-found, remote-found, pay-order, pay-approve
		c.until(fmt.Sprintf("all %d found intents listed", want), func() bool {
			var n int
			c.eval(`document.querySelectorAll("#list-view tbody tr").length`, &n)
			if n >= want {
				return true
			}
			var more bool
			c.eval(`(() => { const b = document.querySelector("#list-view button.more"); if (b && !b.disabled) { b.click(); return true } return false })()`, &more)
			return false
		})
		var other int
		c.eval(`[...document.querySelectorAll("#list-view tbody tr .status")].filter(e => e.textContent !== "found").length`, &other)
		if other != 0 {
			t.Errorf("%d rows of another status in the found list", other)
		}
		found := c.text("#list-view")
		for _, w := range []string{"40.25 ICP", supporttest.MemoOrder, "2026-11-30 07:05:00", fmt.Sprintf("%d intents, all shown", want)} {
			if !strings.Contains(found, w) {
				t.Errorf("found list lacks %q", w)
			}
		}
		c.shot("list-found")
		c.checkA11y("the found list, every page")
		// Export downloads the same filter's every page as a file.
		dl := c.downloads
		c.run("export", browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllow).WithDownloadPath(dl),
			chromedp.Click(`.export button`, chromedp.ByQuery))
		var lines int
		c.until("intents.csv to be downloaded", func() bool {
			b, err := os.ReadFile(filepath.Join(dl, "intents.csv"))
			lines = strings.Count(string(b), "\n")
			return err == nil && lines == want+1
		})
	})

	t.Run("copy", func(t *testing.T) {
		c.t = t
		c.run("clipboard permission", browser.GrantPermissions([]browser.PermissionType{
			browser.PermissionTypeClipboardReadWrite, browser.PermissionTypeClipboardSanitizedWrite}).WithOrigin("http://"+srv.addr))
		c.goTo("intent=" + supporttest.IDOrder)
		c.see("40.25 ICP to 2nxbn… — went through")
		payee, err := icrc3.ParseAccount(supporttest.Payee)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []struct{ name, want string }{
			{"Copy intent id", supporttest.IDOrder},
			{"Copy from account", supporttest.Caller},
			{"Copy to ICP account id", icpAccountID(payee)},
		} {
			c.copyAndCheck(b.name, b.want)
		}
		c.checkA11y("a detail view after copying")

		// Over plain http from a named host the page has no clipboard API;
		// the buttons copy all the same.
		c.run("open over plain http", chromedp.Navigate("http://"+net.JoinHostPort(plainHost, port(srv.addr))+"/ui/#token="+testToken+"&intent="+supporttest.IDOrder))
		c.see("40.25 ICP to 2nxbn… — went through")
		var secure bool
		c.eval(`window.isSecureContext || !!navigator.clipboard`, &secure)
		if secure {
			t.Fatalf("http://%s is a secure context; the fallback is not exercised", plainHost)
		}
		c.run("press Copy from account", chromedp.Click(`//button[normalize-space(.)="Copy from account"]`, chromedp.BySearch))
		c.until("the copy to be announced", func() bool { return strings.Contains(c.text("#announce"), "Copied from account") })
		var focused string
		c.eval(`document.activeElement.textContent`, &focused)
		if focused != "Copied from account" {
			t.Errorf("after copying the focus is on %q, want the button", focused)
		}
		c.open("intent=" + supporttest.IDOrder) // the secure origin, to read the clipboard
		c.see("40.25 ICP to 2nxbn… — went through")
		if got := c.clipboard(); got != supporttest.Caller {
			t.Errorf("clipboard after the plain-http copy: %q, want %q", got, supporttest.Caller)
		}
	})

	t.Run("filter", func(t *testing.T) {
		c.t = t
		c.goTo("status=")
		c.heading("All intents")
		c.filter("", supporttest.OtherLedger, "", "")
		c.rows("the other ledger's intents", supporttest.IDNotYet)
		c.filter("", "", "2026-11-30T07:04:30", "2026-11-30T07:05:30")
		c.rows("intents paid 07:04:30 to 07:05:30", supporttest.IDOrder, supporttest.IDNearAbsent, supporttest.IDApprove)
		c.filter("found", supporttest.Ledger, "2026-11-30T07:04:30", "2026-11-30T07:05:30")
		c.rows("found intents paid 07:04:30 to 07:05:30 on the ICP ledger", supporttest.IDOrder, supporttest.IDApprove)
		c.checkA11y("a filtered list")
		c.filter("found", supporttest.OtherLedger, "2026-11-30T07:04:30", "")
		c.rows("found intents on the other ledger paid after 07:04")
		c.see("None.")
		// A ledger that is no canister id: the error, and the form still
		// there holding what was typed, so it can be corrected.
		c.filter("", "not-a-ledger", "", "")
		c.see("not-a-ledger", "is not a principal")
		var kept string
		c.eval(`(() => { const e = document.getElementById("f-ledger"); return e ? e.value : "(no field)" })()`, &kept)
		if kept != "not-a-ledger" {
			t.Errorf("after a bad ledger the field holds %q", kept)
		}
		c.checkA11y("a list filter refused")
		c.filter("", "", "", "")
		c.see("100 shown; more match")
	})

	t.Run("screenshots", func(t *testing.T) {
		c.t = t
		c.run("size", emulation.SetDeviceMetricsOverride(1100, 820, 1, false))
		defer c.run("wide", emulation.ClearDeviceMetricsOverride())
		c.goTo("")
		c.see("Recent final verdicts", supporttest.IDNone)
		// On a laptop-sized window every column is on screen: no list
		// needs scrolling sideways.
		var cut []string
		c.eval(`[...document.querySelectorAll(".paged")].filter(e => e.scrollWidth > e.clientWidth).map(e => e.parentElement.id + ": " + e.scrollWidth + " > " + e.clientWidth)`, &cut)
		if len(cut) > 0 {
			t.Errorf("lists wider than a 1100 px window: %q", cut)
		}
		checkPNG(t, "support-list", c.shot("support-list"))
		c.goTo("intent=" + supporttest.IDNearAbsent)
		c.see("A similar payment")
		checkPNG(t, "support-detail", c.shot("support-detail"))
	})

	t.Run("refresh", func(t *testing.T) {
		c.t = t
		c.goTo("intent=" + supporttest.IDNone)
		c.see("0.00000007 ICP to 2nxbn… — not yet known", "no answer yet", "As of")
		c.checkA11y("an intent without a verdict")
		supporttest.Append(t, st, reconciled.Verdict{IntentID: supporttest.IDNone, Seq: 1, Status: reconciled.StatusUnreadable,
			Reason: &reconciled.Reason{Code: "E_TRANSPORT", Message: "connection refused"}, DecidedAt: supporttest.Base.Add(2 * time.Hour)})
		c.see("history could not be read")
	})

	t.Run("daemon-down", func(t *testing.T) {
		c.t = t
		c.goTo("")
		c.see("Open intents")
		srv.down()
		c.goTo("q=" + supporttest.IDFound)
		txt := c.see("Cannot reach the reconciled daemon")
		c.notSee(txt, "Failed to fetch")
		c.checkA11y("the daemon unreachable")
		srv.up(t)
		// Back without anyone reloading the page.
		c.until("the search to be answered", func() bool { return strings.Contains(c.text("#search-list"), supporttest.IDFound) })
		c.notSee(c.visible(), "Cannot reach")
	})

	t.Run("narrow", func(t *testing.T) {
		c.t = t
		c.run("390 px", emulation.SetDeviceMetricsOverride(390, 844, 2, true))
		defer c.run("wide", emulation.ClearDeviceMetricsOverride())
		for _, v := range []struct{ frag, want string }{
			{"", supporttest.IDNotYet},
			{"status=found", supporttest.BulkPrefix + "000"},
			{"intent=" + supporttest.IDNearAbsent, "Similar payments"},
			{"q=" + supporttest.Payee, supporttest.BulkPrefix + "129"},
		} {
			c.goTo(v.frag)
			c.see(v.want)
			var w int
			c.eval(`Math.max(document.documentElement.scrollWidth, ...[...document.querySelectorAll("body *")].map(e => Math.ceil(e.getBoundingClientRect().right)))`, &w)
			if w > 390 {
				t.Errorf("#%s is %d px wide at a 390 px viewport", v.frag, w)
			}
			c.checkA11y("#" + v.frag + " at 390 px")
		}
		// A card has room for a whole account: none is cut short there.
		var to string
		var clipped int
		c.eval(`document.querySelector('#search-list td[data-label="To"]').innerText`, &to)
		c.eval(`[...document.querySelectorAll("#search-list td")].filter(e => e.scrollWidth > e.clientWidth || [...e.children].some(k => k.scrollWidth > k.clientWidth)).length`, &clipped)
		if to != supporttest.Payee || clipped != 0 {
			t.Errorf("at 390 px a card's To reads %q, want the whole %s; %d cells cut short", to, supporttest.Payee, clipped)
		}
		c.shot("narrow-detail")
	})

}

func checkPNG(t *testing.T, name, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 5000 || !strings.HasPrefix(string(b), "\x89PNG\r\n\x1a\n") {
		t.Errorf("screenshot %s (%s): %d bytes, %v", name, path, len(b), err)
	}
}
