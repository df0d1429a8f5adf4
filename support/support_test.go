package support

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/store"
	"github.com/reconciled/reconciled/support/supporttest"
)

const testToken = "s3cret-support-token"

func newServer(t *testing.T, st Reader) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewHandler(Config{Store: st, Token: []byte(testToken), Ledgers: supporttest.Ledgers}))
	t.Cleanup(srv.Close)
	return srv
}

func seeded(t *testing.T) (*store.Store, *httptest.Server) {
	t.Helper()
	st := supporttest.Open(t)
	supporttest.Seed(t, st)
	return st, newServer(t, st)
}

// call does a request and returns the status and body.
func call(t *testing.T, method, u, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, b
}

func getJSON[T any](t *testing.T, u string) T {
	t.Helper()
	code, _, b := call(t, "GET", u, testToken)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, code, b)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("GET %s: decode: %v\n%s", u, err, b)
	}
	return v
}

func errCode(t *testing.T, b []byte) string {
	t.Helper()
	var e ErrorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("not a JSON error: %s", b)
	}
	return e.Error.Code
}

func TestAuth(t *testing.T) {
	_, srv := seeded(t)
	for _, path := range []string{"/api/v1/counts", "/api/v1/intents", "/api/v1/intents/" + supporttest.IDFound,
		"/api/v1/search?q=1042", "/api/v1/nope"} {
		u := srv.URL + path
		if code, h, b := call(t, "GET", u, ""); code != 401 || errCode(t, b) != "E_TOKEN_MISSING" || h.Get("WWW-Authenticate") == "" {
			t.Errorf("%s without token: %d %s", path, code, b)
		}
		if code, _, b := call(t, "GET", u, testToken+"x"); code != 401 || errCode(t, b) != "E_TOKEN_WRONG" {
			t.Errorf("%s with wrong token: %d %s", path, code, b)
		}
		if code, _, b := call(t, "GET", u, testToken[:len(testToken)-1]); code != 401 || errCode(t, b) != "E_TOKEN_WRONG" {
			t.Errorf("%s with a prefix of the token: %d %s", path, code, b)
		}
		code, h, b := call(t, "GET", u, testToken)
		want := 200
		if strings.HasSuffix(path, "/nope") {
			want = 404
		}
		if code != want || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s with token: %d (want %d) cache %q %s", path, code, want, h.Get("Cache-Control"), b)
		}
	}
	// Other schemes are not a token.
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/counts", nil)
	req.SetBasicAuth("x", testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Errorf("basic auth: %d", res.StatusCode)
	}
}

func TestAuthTokenFuncAndDisabled(t *testing.T) {
	st := supporttest.Open(t)
	cur := "one"
	srv := httptest.NewServer(NewHandler(Config{Store: st, TokenFunc: func() []byte { return []byte(cur) }}))
	defer srv.Close()
	if code, _, _ := call(t, "GET", srv.URL+"/api/v1/counts", "one"); code != 200 {
		t.Fatalf("token one: %d", code)
	}
	cur = "two"
	if code, _, _ := call(t, "GET", srv.URL+"/api/v1/counts", "one"); code != 401 {
		t.Errorf("rotated-out token accepted: %d", code)
	}
	if code, _, _ := call(t, "GET", srv.URL+"/api/v1/counts", "two"); code != 200 {
		t.Errorf("rotated-in token: %d", code)
	}
	cur = ""
	if code, _, b := call(t, "GET", srv.URL+"/api/v1/counts", "two"); code != 503 || errCode(t, b) != "E_NO_TOKEN_CONFIGURED" {
		t.Errorf("no token configured: %d %s", code, b)
	}
	if code, _, b := call(t, "GET", srv.URL+"/api/v1/counts", "Bearer "); code != 503 {
		t.Errorf("empty token with none configured: %d %s", code, b)
	}
}

func TestReadOnly(t *testing.T) {
	_, srv := seeded(t)
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "OPTIONS"} {
		for _, path := range []string{"/api/v1/intents", "/api/v1/intents/" + supporttest.IDFound, "/api/v1/counts", "/ui/"} {
			for _, tok := range []string{"", testToken} {
				code, h, b := call(t, m, srv.URL+path, tok)
				if code != 405 || errCode(t, b) != "E_METHOD" || h.Get("Allow") != "GET, HEAD" {
					t.Errorf("%s %s (token %t): %d allow=%q %s", m, path, tok != "", code, h.Get("Allow"), b)
				}
			}
		}
	}
	if code, _, b := call(t, "HEAD", srv.URL+"/api/v1/counts", testToken); code != 200 || len(b) != 0 {
		t.Errorf("HEAD: %d %q", code, b)
	}
}

func TestGetIntent(t *testing.T) {
	_, srv := seeded(t)
	get := func(id string) Detail { return getJSON[Detail](t, srv.URL+"/api/v1/intents/"+id) }

	d := get(supporttest.IDFound)
	if d.Status != reconciled.StatusFound || !d.Final || d.LatestSeq != 2 || len(d.Verdicts) != 2 ||
		d.Verdicts[0].Status != reconciled.StatusNotYet {
		t.Errorf("found: status %s final %t seq %d verdicts %+v", d.Status, d.Final, d.LatestSeq, d.Verdicts)
	}
	if d.Advice != "The payment went through in block 1042 at 11:59 UTC on 29 Nov 2026 — do not pay again." {
		t.Errorf("found advice %q", d.Advice)
	}
	if d.Block == nil || d.Block.Index != supporttest.FoundBlock || d.Block.Kind != "xfer" || d.Block.Time == nil ||
		d.Block.Time.Format(time.RFC3339Nano) != "2026-11-29T11:59:00.733Z" {
		t.Errorf("found block %+v", d.Block)
	}
	if d.Window == nil || d.Window.From.Format(time.RFC3339) != "2026-11-29T11:57:00Z" ||
		d.Window.To.Format(time.RFC3339) != "2026-11-30T12:01:00Z" || *d.Window.FirstBlock != 998 || *d.Window.LastBlock != 1311 {
		t.Errorf("found window %+v", d.Window)
	}
	if d.Evidence == nil || d.Evidence.Verified != "certificate+chain" || *d.Evidence.TipIndex != 1500 ||
		d.Evidence.CertifiedAt.Format(time.RFC3339) != "2026-11-29T12:01:00Z" {
		t.Errorf("found evidence %+v", d.Evidence)
	}
	if len(d.NearMisses) != 1 || d.NearMisses[0].Index != supporttest.NearMissBlock || !slices.Equal(d.NearMisses[0].Differs, []string{"amount"}) {
		t.Errorf("found near misses %+v", d.NearMisses)
	}
	if d.Amount == nil || d.Amount.Units != "150000000" || d.Amount.Display != "1.5 ICP" || d.Ledger == nil || d.Ledger.Symbol != "ICP" {
		t.Errorf("found amount %+v ledger %+v", d.Amount, d.Ledger)
	}
	var body map[string]any
	if err := json.Unmarshal(d.Intent, &body); err != nil || body["intent_id"] != supporttest.IDFound {
		t.Errorf("found intent body %s: %v", d.Intent, err)
	}
	if !d.HasBody || d.CanisterID != supporttest.Ledger || d.Caller != supporttest.Caller || d.Method != "icrc1_transfer" ||
		!d.FirstSeen.Equal(supporttest.Base) {
		t.Errorf("found summary %+v", d.IntentItem)
	}

	// A near miss without block values (a verdict of an earlier version)
	// still stops "safe to pay again".
	if d := get(supporttest.IDAbsent); d.Advice != "It did not happen as asked, and can no longer happen. But block 1040 has the same stamp "+
		"and account and differs only in to, memo — check it before paying again." ||
		d.Block != nil || len(d.NearMisses) != 1 || !slices.Equal(d.NearMisses[0].Differs, []string{"to", "memo"}) ||
		d.Amount.Display != "25 ICP" {
		t.Errorf("absent: %+v", d)
	}
	if d := get(supporttest.IDNotYet); d.Advice != "Not known yet: the payment can still go through until 12:01 UTC on 30 Nov 2026 — do not pay again before then." ||
		d.Final || d.Amount.Display != "42 units" || d.Ledger != nil {
		t.Errorf("not_yet: advice %q final %t amount %+v", d.Advice, d.Final, d.Amount)
	}
	if d := get(supporttest.IDUnreadable); d.Advice != "The ledger's history could not be read or verified yet, so the outcome is not known "+
		"(last try 13:04:00 UTC on 29 Nov 2026). We keep trying — do not pay again yet." ||
		d.Reason == nil || d.Reason.Code != "E_CERTIFICATE" || d.Window != nil || len(d.NearMisses) != 0 {
		t.Errorf("unreadable: %+v", d)
	}
	if d := get(supporttest.IDInvalid); d.Advice != "The request could not be checked, so the outcome is unknown: escalate to engineering "+
		"with the intent id, and do not pay again until they answer." ||
		!d.Final || d.Amount.Units != "5" {
		t.Errorf("invalid: advice %q final %t", d.Advice, d.Final)
	}
	if d := get(supporttest.IDNone); d.Status != "" || d.Advice != "No verdict yet; do not pay again until there is one." ||
		len(d.Verdicts) != 0 || d.Verdicts == nil {
		t.Errorf("none: %+v", d)
	}
	if d := get(supporttest.IDRemote); d.HasBody || string(d.Intent) != "null" || d.Status != reconciled.StatusFound ||
		d.Block.Index != supporttest.RemoteBlock || d.Amount != nil {
		t.Errorf("remote: %+v", d)
	}

	if code, _, b := call(t, "GET", srv.URL+"/api/v1/intents/unknown-id", testToken); code != 404 || errCode(t, b) != "E_NOT_FOUND" {
		t.Errorf("unknown: %d %s", code, b)
	}
	if code, _, b := call(t, "GET", srv.URL+"/api/v1/intents/bad%20id", testToken); code != 400 || errCode(t, b) != "E_BAD_INTENT_ID" {
		t.Errorf("bad id: %d %s", code, b)
	}
}

func ids(items []IntentItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.IntentID
	}
	return out
}

func TestListFilters(t *testing.T) {
	_, srv := seeded(t)
	list := func(q string) []string {
		return ids(getJSON[ListReply](t, srv.URL+"/api/v1/intents?"+q).Intents)
	}
	S := supporttest.Base.Add(3 * time.Minute).Format(time.RFC3339)
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"", []string{"pay-found", "pay-absent", "pay-notyet", "pay-unreadable", "pay-invalid", "pay-new", "remote-found"}},
		{"status=found", []string{"pay-found", "remote-found"}},
		{"status=absent", []string{"pay-absent"}},
		{"status=not_yet", []string{"pay-notyet"}},
		{"status=unreadable", []string{"pay-unreadable"}},
		{"status=invalid", []string{"pay-invalid"}},
		{"status=none", []string{"pay-new"}},
		{"status=not_yet,unreadable", []string{"pay-notyet", "pay-unreadable"}},
		{"canister=" + supporttest.OtherLedger, []string{"pay-notyet"}},
		{"caller=" + supporttest.OtherCaller, []string{"pay-absent", "pay-invalid", "pay-new"}},
		{"since=" + url.QueryEscape(S), []string{"pay-unreadable", "pay-invalid", "pay-new", "remote-found"}},
		{"open=1", []string{"pay-notyet", "pay-unreadable", "pay-new"}},
		{"open", []string{"pay-notyet", "pay-unreadable", "pay-new"}},
		{"open=false", []string{"pay-found", "pay-absent", "pay-notyet", "pay-unreadable", "pay-invalid", "pay-new", "remote-found"}},
		{"open=1&order=newest", []string{"pay-new", "pay-unreadable", "pay-notyet"}},
		{"status=found&canister=" + supporttest.Ledger, []string{"pay-found"}},
		{"caller=" + supporttest.Caller + "&open=true&status=unreadable", []string{"pay-unreadable"}},
	} {
		if got := list(c.q); !slices.Equal(got, c.want) {
			t.Errorf("?%s = %v, want %v", c.q, got, c.want)
		}
	}
	rep := getJSON[ListReply](t, srv.URL+"/api/v1/intents?status=found")
	if it := rep.Intents[0]; it.Ledger == nil || it.Ledger.Decimals != 8 || !it.Final || it.LatestSeq != 2 || !it.HasBody {
		t.Errorf("item %+v", it)
	}
	if rep.Intents[1].HasBody || rep.NextCursor != "" {
		t.Errorf("remote item %+v, cursor %q", rep.Intents[1], rep.NextCursor)
	}
}

// TestListPagination: a cursor taken before new inserts still yields every
// row that existed then exactly once, in both orders, with rows inserted
// both before and after the cursor's position.
func TestListPagination(t *testing.T) {
	for _, order := range []string{"oldest", "newest"} {
		t.Run(order, func(t *testing.T) {
			st := supporttest.Open(t)
			srv := newServer(t, st)
			var old []string
			for i := range 25 {
				id := "old-" + string(rune('a'+i))
				old = append(old, id)
				supporttest.PutIntent(t, st, id, supporttest.Ledger, supporttest.Caller, supporttest.Payee, "1",
					supporttest.Base.Add(time.Duration(2*i)*time.Minute))
			}
			page := func(cursor string) ListReply {
				q := url.Values{"limit": {"7"}, "order": {order}}
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				return getJSON[ListReply](t, srv.URL+"/api/v1/intents?"+q.Encode())
			}
			first := page("")
			seen := ids(first.Intents)
			if len(seen) != 7 || first.NextCursor == "" {
				t.Fatalf("first page %v cursor %q", seen, first.NextCursor)
			}
			// New rows land between old ones (odd minutes), before the
			// cursor's position and after it.
			for i := range 25 {
				supporttest.PutIntent(t, st, "new-"+string(rune('a'+i)), supporttest.Ledger, supporttest.Caller,
					supporttest.Payee, "1", supporttest.Base.Add(time.Duration(2*i+1)*time.Minute))
			}
			cursor := first.NextCursor
			for pages := 0; cursor != ""; pages++ {
				if pages > 20 {
					t.Fatal("paging does not end")
				}
				p := page(cursor)
				seen = append(seen, ids(p.Intents)...)
				cursor = p.NextCursor
			}
			count := map[string]int{}
			for _, id := range seen {
				count[id]++
			}
			for _, id := range old {
				if count[id] != 1 {
					t.Errorf("old row %s seen %d times", id, count[id])
				}
			}
			for id, n := range count {
				if n != 1 {
					t.Errorf("row %s seen %d times", id, n)
				}
			}
		})
	}
}

func TestBadParams(t *testing.T) {
	_, srv := seeded(t)
	newest := getJSON[ListReply](t, srv.URL+"/api/v1/intents?order=newest&limit=1").NextCursor
	for _, c := range []struct{ path, code string }{
		{"/api/v1/intents?status=bogus", "E_BAD_STATUS"},
		{"/api/v1/intents?status=", "E_BAD_STATUS"},
		{"/api/v1/intents?status=found,,absent", "E_BAD_STATUS"},
		{"/api/v1/intents?since=yesterday", "E_BAD_SINCE"},
		{"/api/v1/intents?since=-5h", "E_BAD_SINCE"},
		{"/api/v1/intents?since=9999-01-01T00:00:00Z", "E_BAD_SINCE"},
		{"/api/v1/intents?since=1000000000000h", "E_BAD_SINCE"},
		{"/api/v1/intents?limit=0", "E_BAD_LIMIT"},
		{"/api/v1/intents?limit=-1", "E_BAD_LIMIT"},
		{"/api/v1/intents?limit=1001", "E_BAD_LIMIT"},
		{"/api/v1/intents?limit=ten", "E_BAD_LIMIT"},
		{"/api/v1/intents?limit=99999999999999999999999", "E_BAD_LIMIT"},
		{"/api/v1/intents?cursor=%21%21%21", "E_BAD_CURSOR"},
		{"/api/v1/intents?cursor=bm90LWEtY3Vyc29y", "E_BAD_CURSOR"},
		{"/api/v1/intents?cursor=" + newest, "E_BAD_CURSOR"}, // taken newest-first, used oldest-first
		{"/api/v1/intents?caller=not-a-principal", "E_BAD_ACCOUNT"},
		{"/api/v1/intents?canister=xyz", "E_BAD_CANISTER"},
		{"/api/v1/intents?open=maybe", "E_BAD_OPEN"},
		{"/api/v1/intents?order=sideways", "E_BAD_ORDER"},
		{"/api/v1/intents?stauts=found", "E_UNKNOWN_PARAM"},
		{"/api/v1/intents?status=found&status=absent", "E_REPEATED_PARAM"},
		{"/api/v1/intents?status=%zz", "E_BAD_QUERY"},
		{"/api/v1/counts?x=1", "E_UNKNOWN_PARAM"},
		{"/api/v1/intents/" + supporttest.IDFound + "?verbose=1", "E_UNKNOWN_PARAM"},
		{"/api/v1/search", "E_BAD_QUERY"},
		{"/api/v1/search?q=%20", "E_BAD_QUERY"},
		{"/api/v1/search?q=x&from=yesterday", "E_BAD_TIME"},
		{"/api/v1/search?q=1042&sort=amount", "E_BAD_SORT"},
		{"/api/v1/export?format=xml", "E_BAD_FORMAT"},
		{"/api/v1/search?q=1042&limit=0", "E_BAD_LIMIT"},
		{"/api/v1/search?q=1042&page=2", "E_UNKNOWN_PARAM"},
	} {
		code, _, b := call(t, "GET", srv.URL+c.path, testToken)
		if code != 400 {
			t.Errorf("%s: %d %s", c.path, code, b)
			continue
		}
		if got := errCode(t, b); got != c.code {
			t.Errorf("%s: code %s, want %s", c.path, got, c.code)
		}
	}
}

// TestNoServerErrorForInput throws odd values at every parameter: whatever
// the answer, it must not be a 500.
func TestNoServerErrorForInput(t *testing.T) {
	_, srv := seeded(t)
	odd := []string{"", " ", "%00", "%ff%fe", "0", "-0", "1e3", "18446744073709551616", "null", "true",
		"'%3B--", strings.Repeat("a", 5000), "2vxsx-fae", "aaaaa-aa", "%E2%80%AE", "..", "%2F"}
	params := append(slices.Clone(listKnown), "q", "zzz")
	for _, p := range params {
		for _, v := range odd {
			for _, path := range []string{"/api/v1/intents", "/api/v1/search", "/api/v1/counts", "/api/v1/intents/" + v} {
				code, _, b := call(t, "GET", srv.URL+path+"?"+p+"="+v, testToken)
				if code >= 500 {
					t.Errorf("%s?%s=%s: %d %s", path, p, v, code, b)
				}
			}
		}
	}
}

func TestCounts(t *testing.T) {
	_, srv := seeded(t)
	c := getJSON[CountsReply](t, srv.URL+"/api/v1/counts")
	want := map[string]int{"found": 2, "absent": 1, "not_yet": 1, "unreadable": 1, "invalid": 1, "none": 1}
	if len(c.Counts) != len(want) {
		t.Errorf("counts %v", c.Counts)
	}
	for k, n := range want {
		if c.Counts[k] != n {
			t.Errorf("counts[%s] = %d, want %d", k, c.Counts[k], n)
		}
	}
	if c.Total != 7 || c.Open != 3 {
		t.Errorf("total %d open %d", c.Total, c.Open)
	}
	empty := newServer(t, supporttest.Open(t))
	c = getJSON[CountsReply](t, empty.URL+"/api/v1/counts")
	if c.Total != 0 || len(c.Counts) != 6 || c.Counts["found"] != 0 {
		t.Errorf("empty counts %+v", c)
	}
}

func TestSearch(t *testing.T) {
	_, srv := seeded(t)
	type hit = struct {
		id      string
		matches []string
	}
	search := func(srvURL, q string) SearchReply {
		return getJSON[SearchReply](t, srvURL+"/api/v1/search?q="+url.QueryEscape(q))
	}
	hits := func(rep SearchReply) []hit {
		var out []hit
		for _, h := range rep.Hits {
			out = append(out, hit{h.Intent.IntentID, h.Matches})
		}
		slices.SortFunc(out, func(a, b hit) int { return strings.Compare(a.id, b.id) })
		return out
	}
	for _, c := range []struct {
		q    string
		want []hit
	}{
		{supporttest.IDFound, []hit{{"pay-found", []string{"intent_id"}}}},
		{supporttest.IDRemote, []hit{{"remote-found", []string{"intent_id"}}}},
		{"1042", []hit{{"pay-found", []string{"block"}}}},
		{"77", []hit{{"remote-found", []string{"block"}}}},
		{"1040", []hit{{"pay-absent", []string{"near_miss"}}, {"pay-found", []string{"near_miss"}}}},
		{"5", nil},
		{supporttest.Caller, []hit{{"pay-found", []string{"caller"}}, {"pay-notyet", []string{"caller"}},
			{"pay-unreadable", []string{"caller"}}}},
		// The invalid intent is found too, though the matcher refuses its body.
		{supporttest.OtherCaller, []hit{{"pay-absent", []string{"caller"}}, {"pay-invalid", []string{"caller"}},
			{"pay-new", []string{"caller"}}}},
		{supporttest.Payee, []hit{{"pay-absent", []string{"to"}}, {"pay-found", []string{"to"}}, {"pay-invalid", []string{"to"}},
			{"pay-new", []string{"to"}}, {"pay-notyet", []string{"to"}}, {"pay-unreadable", []string{"to"}}}},
		{supporttest.PayeeSub, []hit{{"pay-notyet", []string{"to"}}}},
		{"1.5", []hit{{"pay-found", []string{"amount"}}}},
		{"1.5 ICP", []hit{{"pay-found", []string{"amount"}}}},
		{"1.5 XYZ", nil},
		{"42", []hit{{"pay-notyet", []string{"amount"}}}}, // a ledger of unknown decimals: raw units
		{"lunch", []hit{{"pay-absent", []string{"memo"}}, {"pay-found", []string{"memo"}}, {"pay-new", []string{"memo"}},
			{"pay-notyet", []string{"memo"}}, {"pay-unreadable", []string{"memo"}}}},
		{"6C756E6368", []hit{{"pay-absent", []string{"memo"}}, {"pay-found", []string{"memo"}}, {"pay-new", []string{"memo"}},
			{"pay-notyet", []string{"memo"}}, {"pay-unreadable", []string{"memo"}}}},
		{"pay-f", []hit{{"pay-found", []string{"intent_id"}}}},
		{supporttest.Caller[:8], []hit{{"pay-found", []string{"caller"}}, {"pay-notyet", []string{"caller"}},
			{"pay-unreadable", []string{"caller"}}}},
		{strings.ToUpper(supporttest.Caller[:8]), []hit{{"pay-found", []string{"caller"}}, {"pay-notyet", []string{"caller"}},
			{"pay-unreadable", []string{"caller"}}}},
		{supporttest.OtherLedger, []hit{{"pay-notyet", []string{"canister"}}}},
	} {
		rep := search(srv.URL, c.q)
		if got := hits(rep); !slices.EqualFunc(got, c.want, func(a, b hit) bool { return a.id == b.id && slices.Equal(a.matches, b.matches) }) {
			t.Errorf("search %s = %v, want %v", c.q, got, c.want)
		}
		if rep.Truncated {
			t.Errorf("search %s truncated", c.q)
		}
	}
	if rep := search(srv.URL, supporttest.IDFound); rep.Hits[0].Intent.Status != reconciled.StatusFound || rep.Hits[0].Intent.LatestSeq != 2 {
		t.Errorf("hit by id lacks its status: %+v", rep.Hits[0])
	}

	// Paging: every hit exactly once, however small the page.
	var ids []string
	for cur := ""; ; {
		rep := getJSON[SearchReply](t, srv.URL+"/api/v1/search?limit=2&q="+supporttest.Payee+"&cursor="+cur)
		if len(rep.Hits) > 2 || rep.Truncated != (rep.NextCursor != "") {
			t.Fatalf("page: %+v", rep)
		}
		for _, h := range rep.Hits {
			ids = append(ids, h.Intent.IntentID)
		}
		if cur = rep.NextCursor; cur == "" {
			break
		}
	}
	slices.Sort(ids)
	if want := []string{"pay-absent", "pay-found", "pay-invalid", "pay-new", "pay-notyet", "pay-unreadable"}; !slices.Equal(ids, want) {
		t.Errorf("paged search: %v, want %v", ids, want)
	}
}

func TestUI(t *testing.T) {
	_, srv := seeded(t)
	code, h, b := call(t, "GET", srv.URL+"/ui/", "")
	if code != 200 || !strings.Contains(string(b), `<label for="token">Support token</label>`) ||
		!strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("/ui/: %d csp=%q", code, h.Get("Content-Security-Policy"))
	}
	for _, f := range []string{"app.js", "style.css"} {
		if code, _, b := call(t, "GET", srv.URL+"/ui/"+f, ""); code != 200 || len(b) < 500 {
			t.Errorf("/ui/%s: %d %d bytes", f, code, len(b))
		}
	}
	if code, _, _ := call(t, "GET", srv.URL+"/ui/nope.js", ""); code != 404 {
		t.Errorf("/ui/nope.js: %d", code)
	}
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(srv.URL + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 301 || res.Header.Get("Location") != "/ui/" {
		t.Errorf("/ui: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
}

type failingReader struct{ Reader }

var errDisk = errors.New("disk on fire at /var/lib/reconciled/db")

func (failingReader) CountByStatus(context.Context) (map[reconciled.Status]int, error) {
	return nil, errDisk
}

func TestInternalErrorIsLoggedNotLeaked(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	srv := httptest.NewServer(NewHandler(Config{Store: failingReader{supporttest.Open(t)}, Token: []byte(testToken), Logger: zap.New(core)}))
	defer srv.Close()
	if code, _, _ := call(t, "GET", srv.URL+"/api/v1/counts", testToken+"-guess"); code != 401 {
		t.Fatalf("wrong token: %d", code)
	}
	code, _, b := call(t, "GET", srv.URL+"/api/v1/counts", testToken)
	if code != 500 || errCode(t, b) != "E_INTERNAL" || strings.Contains(string(b), "disk") {
		t.Errorf("store failure: %d %s", code, b)
	}
	if logs.Len() != 2 {
		t.Fatalf("%d log entries", logs.Len())
	}
	for i, e := range logs.All() {
		line, _ := json.Marshal(e.ContextMap())
		if strings.Contains(string(line)+e.Message, testToken) {
			t.Errorf("token in log entry %s %s", e.Message, line)
		}
		if want := []string{"wrong token", "disk on fire"}[i]; !strings.Contains(e.Message+string(line), want) {
			t.Errorf("log entry %d = %s %s, want %q", i, e.Message, line, want)
		}
	}
}

func TestFormatAmount(t *testing.T) {
	for _, c := range []struct {
		units string
		dec   uint8
		sym   string
		want  string
	}{
		{"150000000", 8, "ICP", "1.5 ICP"},
		{"1", 8, "ICP", "0.00000001 ICP"},
		{"0", 8, "ICP", "0 ICP"},
		{"000120", 2, "", "1.2"},
		{"100", 0, "X", "100 X"},
		{"123456789012345678901234567890", 18, "ckETH", "123456789012.34567890123456789 ckETH"},
		{"12a", 8, "ICP", "12a"},
		{"", 8, "ICP", ""},
	} {
		if got := FormatAmount(c.units, c.dec, c.sym); got != c.want {
			t.Errorf("FormatAmount(%q, %d, %q) = %q, want %q", c.units, c.dec, c.sym, got, c.want)
		}
	}
}
