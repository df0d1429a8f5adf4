package support

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/support/supporttest"
)

// Intents of TestConsolePeople on top of the console fixture.
const (
	idDeepArray  = "pay-deep-array"
	idDeepObject = "pay-deep-object"
	idAhead      = "pay-ahead"
	// everyFollowUp is the follow-up interval the handler is told.
	everyFollowUp = 5 * time.Second
)

// deepBody is an intent the matcher refuses, whose unknown field holds a
// depth-deep nest of arrays ("[") or objects ("{").
func deepBody(id, open string, depth int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"intent_id":%q,"canister_id":%q,"method":"icrc1_transfer","caller":%q,"args":{"to":%q,"amount":"5"},"x":`,
		id, supporttest.Ledger, supporttest.OtherCaller, supporttest.Payee)
	for range depth {
		if open == "[" {
			b.WriteString("[")
		} else {
			b.WriteString(`{"a":`)
		}
	}
	b.WriteString("0")
	for range depth {
		if open == "[" {
			b.WriteString("]")
		} else {
			b.WriteString("}")
		}
	}
	b.WriteString("}")
	return []byte(b.String())
}

// TestConsolePeople is the support page as a person new to it meets it:
// what they search for, what they read out, and whether the daemon looks
// alive.
func TestConsolePeople(t *testing.T) {
	axe := loadAxe(t)
	st := supporttest.Open(t)
	supporttest.Seed(t, st)
	supporttest.SeedConsole(t, st)
	ctx := context.Background()
	for _, d := range []struct {
		id, open string
		depth    int
	}{{idDeepArray, "[", 9000}, {idDeepObject, "{", 5000}} {
		supporttest.PutRefused(t, st, d.id, deepBody(d.id, d.open, d.depth), supporttest.Base.Add(30*time.Minute))
		supporttest.Append(t, st, reconciled.Verdict{IntentID: d.id, Seq: 1, Status: reconciled.StatusInvalid,
			Reason:    &reconciled.Reason{Code: "E_UNKNOWN_FIELD", Field: "x", Message: "unknown field x"},
			DecidedAt: supporttest.Base.Add(31 * time.Minute)})
	}
	// A payment stamped by a tool whose clock runs a day ahead, as the
	// demo's ledger clock does.
	ahead := time.Now().Add(23 * time.Hour).Truncate(time.Second)
	supporttest.PutBody(t, st, supporttest.IntentBody(idAhead, supporttest.Ledger, "icrc1_transfer", supporttest.Caller,
		supporttest.Args{"from_subaccount": nil, "to": supporttest.Payee, "amount": "150000000", "fee": nil, "memo": nil,
			"created_at_time": fmt.Sprint(ahead.UnixNano())}), supporttest.Base.Add(40*time.Minute))
	supporttest.Append(t, st, reconciled.Verdict{IntentID: idAhead, Seq: 1, Status: reconciled.StatusNotYet,
		Window: supporttest.Window(), DecidedAt: supporttest.Base.Add(41 * time.Minute)})
	// The not_yet intent is due at every round: its stored next check is
	// its verdict's time, long past.
	if err := st.Watch(ctx, reconciled.Watch{IntentID: supporttest.IDNotYet, CanisterID: supporttest.OtherLedger,
		NextCheck: supporttest.Base.Add(63 * time.Minute), LastStatus: reconciled.StatusNotYet}); err != nil {
		t.Fatal(err)
	}
	srv := &switchable{h: NewHandler(Config{Store: st, Token: []byte(testToken), Ledgers: supporttest.Ledgers,
		FollowUpEvery: everyFollowUp})}
	srv.up(t)
	t.Cleanup(srv.down)
	c := newConsole(t, srv)
	c.axe = axe
	c.open("token=" + testToken)
	c.see("Open intents")

	t.Run("time-only", func(t *testing.T) {
		c.t = t
		c.eval(`document.getElementById("q").value = ""; document.getElementById("from").value = "2026-11-30T07:04:00"; `+
			`document.getElementById("to").value = "2026-11-30T07:06:00"`, nil)
		c.run("search by time", chromedp.Click("#search button[type=submit]", chromedp.ByQuery))
		c.heading("Payments stamped from 2026-11-30 07:04 UTC to 2026-11-30 07:06 UTC")
		txt := c.see(supporttest.IDOrder, supporttest.IDApprove)
		c.notSee(c.text("#view"), "null", "undefined")
		c.notSee(txt, supporttest.IDFound)
		c.checkA11y("a search by time range alone")
	})

	t.Run("follow-up", func(t *testing.T) {
		c.t = t
		first := time.Now().Add(-time.Second).Truncate(time.Second)
		if err := st.RecordChecks(ctx, []string{supporttest.IDNotYet, supporttest.IDUnreadable}, first); err != nil {
			t.Fatal(err)
		}
		stamp := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }
		c.goTo("intent=" + supporttest.IDNotYet)
		c.see("Last check", stamp(first), "Next check", stamp(first.Add(everyFollowUp)))
		c.notSee(c.text("#watch"), "2026-11-29")
		c.checkA11y("an open intent's follow-up")
		// The next round checks again: the page, refreshing by itself,
		// shows the new last and next check.
		second := first.Add(3 * time.Second)
		if err := st.RecordChecks(ctx, []string{supporttest.IDNotYet}, second); err != nil {
			t.Fatal(err)
		}
		c.until("the follow-up times to advance", func() bool {
			x := c.text("#watch")
			return strings.Contains(x, stamp(second)) && strings.Contains(x, stamp(second.Add(everyFollowUp)))
		})
		// An unreadable intent: the last try is the last check, not the
		// first verdict's time.
		c.goTo("intent=" + supporttest.IDUnreadable)
		c.see("Last check", stamp(first), "Checks so far")
		c.notSee(c.visible(), "2026-11-29 13:04")
	})

	t.Run("deep-body", func(t *testing.T) {
		c.t = t
		// Bounded by what is drawn, not by a time: the text shown and the
		// elements on the page (5,000-deep objects once made 50 MB of DOM).
		for _, id := range []string{idDeepArray, idDeepObject} {
			c.goTo("intent=" + id)
			c.see("could not be checked", "Intent as received")
			c.notSee(c.visible(), "Maximum call stack", "Failed")
			c.run("open the body", chromedp.Click(`//summary[contains(., "Intent as received")]`, chromedp.BySearch))
			var n int
			c.eval(`document.getElementById("body").textContent.length`, &n)
			body := c.text("#body")
			if n == 0 || n > 70000 || !strings.Contains(body, `"intent_id":"`+id+`"`) {
				t.Errorf("%s: the body shown is %d characters: %.200s", id, n, body)
			}
			var nodes int
			c.eval(`document.getElementsByTagName("*").length`, &nodes)
			if nodes > 2000 {
				t.Errorf("%s: %d elements on the page", id, nodes)
			}
		}
		c.checkA11y("a deeply nested invalid intent")
	})

	t.Run("search-forms", func(t *testing.T) {
		c.t = t
		noDash := strings.ReplaceAll(supporttest.Caller, "-", "")
		for _, q := range []string{
			supporttest.Caller[:5],                 // an account's beginning, no dash
			noDash[:8],                             // ... read off without dashes
			strings.ToUpper(supporttest.MemoOrder), // memo text in another case
			"40,25",                                // a decimal comma
			"4025000000",                           // the amount in base units
		} {
			c.search(q)
			c.heading("Search results for " + q)
			txt := c.see(supporttest.IDOrder)
			c.notSee(txt, "E_BAD", "Failed", "is not an intent id")
		}
		c.checkA11y("search results")
	})

	t.Run("payment", func(t *testing.T) {
		c.t = t
		c.goTo("intent=" + supporttest.IDNearAbsent)
		c.heading("2 ICP to " + supporttest.Payee[:5] + "… — did not go through")
		txt := c.see("ago", "What the payment tool saw", "by the payment tool's clock", "by the ledger's clock")
		c.notSee(txt, "Kind", "xfer", "certificate+chain")
		adv := c.text("#advice")
		c.notSee(adv, "block", fmt.Sprint(supporttest.NearMissBlock2))
		c.checkA11y("a payment that did not go through")

		c.goTo("intent=" + supporttest.IDOrder)
		c.heading("40.25 ICP to " + supporttest.Payee[:5] + "… — went through")
		c.notSee(c.text("#advice"), fmt.Sprint(supporttest.OrderBlock))

		c.goTo("intent=" + supporttest.IDUnreadable)
		c.heading("0.00000001 ICP to " + supporttest.Payee[:5] + "… — not yet known")
		adv = c.text("#advice")
		c.notSee(adv, "attempts", "next retry", "UTC")

		c.goTo("intent=" + idAhead)
		c.see("ahead of this computer's clock")
		// In a list too: the open intents on the home page.
		c.goTo("")
		c.until("the list to say a time is ahead", func() bool {
			return strings.Contains(c.text("#open-list"), "ahead of this computer's clock")
		})

		c.run("390 px", emulation.SetDeviceMetricsOverride(390, 844, 2, true))
		defer c.run("wide", emulation.ClearDeviceMetricsOverride())
		c.goTo("intent=" + supporttest.IDNearAbsent)
		c.see("did not go through", "What the payment tool saw")
		var w int
		c.eval(`Math.max(document.documentElement.scrollWidth, ...[...document.querySelectorAll("body *")].map(e => Math.ceil(e.getBoundingClientRect().right)))`, &w)
		if w > 390 {
			t.Errorf("the payment is %d px wide at a 390 px viewport", w)
		}
		checkPNG(t, "support-detail-narrow", c.shot("support-detail-narrow"))
		c.checkA11y("a payment at 390 px")
	})
}
