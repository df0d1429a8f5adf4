package support

import (
	"encoding/csv"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/reconciled/reconciled/support/supporttest"
)

func consoleServer(t *testing.T) *httptest.Server {
	t.Helper()
	st := supporttest.Open(t)
	supporttest.Seed(t, st)
	supporttest.SeedConsole(t, st)
	srv := httptest.NewServer(NewHandler(Config{Store: st, Token: []byte(testToken), Ledgers: supporttest.Ledgers,
		ExplorerBlockURL:   "https://explorer.example/{ledger}/block/{block}",
		ExplorerAccountURL: "https://explorer.example/account/{account_id}"}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDetailAdviceAndFacts(t *testing.T) {
	srv := consoleServer(t)
	get := func(id string) Detail { return getJSON[Detail](t, srv.URL+"/api/v1/intents/"+id) }

	d := get(supporttest.IDNearAbsent)
	if want := "It did not happen as asked, and can no longer happen. A similar payment of 2.5 ICP left your account at " +
		"07:05 UTC on 30 Nov 2026 (block 2005) — check it before paying again."; d.Advice != want {
		t.Errorf("absent with a near miss: %q, want %q", d.Advice, want)
	}
	if len(d.NearMisses) != 1 || d.NearMisses[0].Amount == nil || d.NearMisses[0].Amount.Display != "2.5 ICP" ||
		d.NearMisses[0].Memo == nil || d.NearMisses[0].Memo.Text != "order-10200" || d.NearMisses[0].Block.To != supporttest.OtherCaller ||
		d.NearMisses[0].URL != "https://explorer.example/"+supporttest.Ledger+"/block/2005" {
		t.Errorf("near miss view: %+v", d.NearMisses)
	}

	if d := get(supporttest.IDApprove); d.Advice != "The approval is in place (block 2010); no tokens moved. Do not approve again." ||
		d.Spender != supporttest.OtherCaller {
		t.Errorf("approve: %q spender %q", d.Advice, d.Spender)
	}
	d = get(supporttest.IDUnreadable)
	if want := "The ledger's history could not be read or verified yet, so the outcome is not known (4 attempts so far; " +
		"last try 13:04:00 UTC on 29 Nov 2026; next retry 13:30:00 UTC on 29 Nov 2026). We keep trying — do not pay again yet."; d.Advice != want ||
		d.Watch == nil || d.Watch.Attempts != 4 {
		t.Errorf("unreadable: %q watch %+v", d.Advice, d.Watch)
	}

	d = get(supporttest.IDOrder)
	if d.Amount == nil || d.Amount.Display != "40.25 ICP" || d.Memo == nil || d.Memo.Text != supporttest.MemoOrder ||
		d.From != supporttest.Caller || d.To != supporttest.Payee || d.Stamp == nil || !d.Stamp.Equal(supporttest.OrderStamp) ||
		d.DecidedAt == nil || d.AsOf.IsZero() {
		t.Errorf("facts: %+v", d.IntentItem)
	}
	if len(d.Accounts) != 2 || d.Accounts[0].Role != "from" || d.Accounts[0].Text != supporttest.Caller ||
		len(d.Accounts[0].ICPAccountID) != 64 || d.Accounts[0].URL != "https://explorer.example/account/"+d.Accounts[0].ICPAccountID {
		t.Errorf("accounts: %+v", d.Accounts)
	}
	if d.Block == nil || d.Block.URL != "https://explorer.example/"+supporttest.Ledger+"/block/2001" {
		t.Errorf("block: %+v", d.Block)
	}
	if got := csvRow(&IntentItem{IntentID: "-1", Memo: &Memo{Hex: "3d31", Text: "=1+2"}}); got[0] != "'-1" || got[10] != "'=1+2" || got[11] != "3d31" {
		t.Errorf("csv cells that a spreadsheet would run: %q", got)
	}
	// A memo that is not text is shown as hex only.
	if m := memoView([]byte{0, 1, 0xff}); m.Text != "" || m.Hex != "0001ff" {
		t.Errorf("binary memo: %+v", m)
	}
	if m := memoView([]byte("a\u202eb")); m.Text != "" {
		t.Errorf("a memo with a direction override is shown as text: %+v", m)
	}
}

func TestSearchByWhatCustomersKnow(t *testing.T) {
	srv := consoleServer(t)
	ids := func(q string) []string {
		rep := getJSON[SearchReply](t, srv.URL+"/api/v1/search?"+q)
		var out []string
		for _, h := range rep.Hits {
			out = append(out, h.Intent.IntentID)
		}
		return out
	}
	for q, want := range map[string]string{
		"q=40.25":                      supporttest.IDOrder,
		"q=40.250+ICP":                 supporttest.IDOrder,
		"q=order-10100":                supporttest.IDOrder,
		"q=ORDER-10100":                supporttest.IDOrder, // a memo's text in another case
		"q=Order-101":                  supporttest.IDOrder,
		"q=40%2C25":                    supporttest.IDOrder, // a decimal comma
		"q=4025000000":                 supporttest.IDOrder, // base units
		"q=" + url.QueryEscape("2001"): supporttest.IDOrder,
		"from=2026-11-30T07:04:59Z&to=2026-11-30T07:05:00.5Z": supporttest.IDOrder,
		"from=2026-11-30T07:04&to=2026-11-30T07:05:01":        supporttest.IDOrder,
	} {
		got := strings.Join(ids(q), ",")
		if got != want {
			t.Errorf("search %s = %q, want %q", q, got, want)
		}
	}
	// Paging past 100: every found intent once.
	seen := map[string]bool{}
	for cur := ""; ; {
		rep := getJSON[ListReply](t, srv.URL+"/api/v1/intents?status=found&sort=decided&order=newest&limit=100&cursor="+cur)
		for _, it := range rep.Intents {
			if seen[it.IntentID] {
				t.Fatalf("%s listed twice", it.IntentID)
			}
			seen[it.IntentID] = true
		}
		if cur = rep.NextCursor; cur == "" {
			break
		}
	}
	if len(seen) != supporttest.BulkCount+4 {
		t.Errorf("%d found intents listed, want %d", len(seen), supporttest.BulkCount+4)
	}
	first := getJSON[ListReply](t, srv.URL+"/api/v1/intents?status=found&sort=decided&order=newest&limit=1")
	if len(first.Intents) != 1 || first.Intents[0].IntentID != supporttest.BulkPrefix+"000" {
		t.Errorf("newest decided: %+v", first.Intents)
	}
}

func TestExport(t *testing.T) {
	srv := consoleServer(t)
	code, h, b := call(t, "GET", srv.URL+"/api/v1/export?format=csv&status=found", testToken)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %s", code, b)
	}
	rows, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != supporttest.BulkCount+4+1 || strings.Join(rows[0], ",") != strings.Join(exportColumns, ",") {
		t.Fatalf("csv: %d rows, header %v", len(rows), rows[0])
	}
	var order []string
	for _, r := range rows[1:] {
		if r[0] == supporttest.IDOrder {
			order = r
		}
	}
	if strings.Join(order, "|") != "pay-order|found|true|icrc1_transfer|"+supporttest.Ledger+"|40.25 ICP|4025000000|"+
		supporttest.Caller+"|"+supporttest.Payee+"||order-10100|6f726465722d3130313030|2026-11-30T07:05:00Z|2026-11-29T12:10:00Z|2026-11-29T13:10:00Z" {
		t.Errorf("csv row: %v", order)
	}
	rep := getJSON[ListReply](t, srv.URL+"/api/v1/export?format=json&q=lunch")
	if len(rep.Intents) != 5 {
		t.Errorf("json export of a search: %d intents", len(rep.Intents))
	}
}
