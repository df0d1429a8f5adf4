package ledgertest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func adminDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := LoopbackHTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, string(readAll(t, resp))
}

func TestAdminDisabledByDefault(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/admin/time", ""},
		{"POST", "/admin/time", `{"advance_ns":"1"}`},
		{"GET", "/admin/faults/" + f.echo.ID().Encode(), ""},
		{"POST", "/admin/faults/" + f.echo.ID().Encode(), `{"http_status":500}`},
	} {
		if code, _ := adminDo(t, c.method, f.s.URL()+c.path, c.body); code != http.StatusNotFound {
			t.Fatalf("%s %s without admin: %d, want 404", c.method, c.path, code)
		}
	}
	if f.s.Faults(f.echo.ID()) != (Faults{}) {
		t.Fatal("faults changed through a disabled admin endpoint")
	}
}

func TestAdminTime(t *testing.T) {
	f := newFixture(t, WithAdmin())
	code, body := adminDo(t, "GET", f.s.URL()+"/admin/time", "")
	var got struct {
		NowNS string `json:"now_ns"`
	}
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil {
		t.Fatalf("GET /admin/time: %d %q %v", code, body, err)
	}
	before, err := strconv.ParseUint(got.NowNS, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	day := int64(25 * time.Hour)
	code, body = adminDo(t, "POST", f.s.URL()+"/admin/time", `{"advance_ns":"`+strconv.FormatInt(day, 10)+`"}`)
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil {
		t.Fatalf("POST /admin/time: %d %q %v", code, body, err)
	}
	after, _ := strconv.ParseUint(got.NowNS, 10, 64)
	if after < before+uint64(day) {
		t.Fatalf("advanced to %d, want >= %d", after, before+uint64(day))
	}
	// Certificates follow the advanced clock, and agent-go accepts them.
	tm, err := f.agent.GetTime(f.echo.ID())
	if err != nil {
		t.Fatal(err)
	}
	if uint64(tm.UnixNano()) < after {
		t.Fatalf("certified time %d behind the advanced clock %d", tm.UnixNano(), after)
	}
	for _, bad := range []string{`{"advance_ns":"-5"}`, `{"advance_ns":5}`, `{"advance_ns":"x"}`, `nope`, `{"advance":"5"}`} {
		if code, _ := adminDo(t, "POST", f.s.URL()+"/admin/time", bad); code != http.StatusBadRequest {
			t.Fatalf("POST /admin/time %s: %d, want 400", bad, code)
		}
	}
}

func TestAdminFaults(t *testing.T) {
	f := newFixture(t, WithAdmin())
	url := f.s.URL() + "/admin/faults/" + f.echo.ID().Encode()
	code, body := adminDo(t, "POST", url, `{"http_status":503,"latency":1000,"garbage":"cbor","omit_block":3}`)
	if code != 200 {
		t.Fatalf("POST faults: %d %s", code, body)
	}
	want := Faults{HTTPStatus: 503, Latency: time.Microsecond, Garbage: "cbor", OmitBlock: 3}
	if got := f.s.Faults(f.echo.ID()); got != want {
		t.Fatalf("faults = %+v, want %+v", got, want)
	}
	code, body = adminDo(t, "GET", url, "")
	var got Faults
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil || got != want {
		t.Fatalf("GET faults: %d %q %v", code, body, err)
	}
	_, err := f.agent.QueryRaw(f.echo.ID(), "echo", nil)
	wantErr(t, err, "(503)")
	// Clearing them heals the canister.
	if code, _ := adminDo(t, "POST", url, `{}`); code != 200 {
		t.Fatal(code)
	}
	if _, err := f.agent.QueryRaw(f.echo.ID(), "echo", nil); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"garbage":"bits"}`, `{"query_reject":9}`, `{"http_status":42}`, `{"unknown":1}`, `[`} {
		if code, _ := adminDo(t, "POST", url, bad); code != http.StatusBadRequest {
			t.Fatalf("POST faults %s: %d, want 400", bad, code)
		}
	}
	if code, _ := adminDo(t, "GET", f.s.URL()+"/admin/faults/not-a-principal", ""); code != http.StatusBadRequest {
		t.Fatalf("bad id: %d", code)
	}
}
