package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/store"
	"github.com/reconciled/reconciled/support"
	"github.com/reconciled/reconciled/support/supporttest"
)

const cliToken = "cli-test-token"

func supportServer(t *testing.T) (*store.Store, *httptest.Server) {
	t.Helper()
	st := supporttest.Open(t)
	supporttest.Seed(t, st)
	srv := httptest.NewServer(support.NewHandler(support.Config{Store: st, Token: []byte(cliToken), Ledgers: supporttest.Ledgers}))
	t.Cleanup(srv.Close)
	return st, srv
}

var tokenEnv = map[string]string{"RECONCILED_TOKEN": cliToken}

// runCLI runs a subcommand as main does, with env as the environment.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	old := osGetenv
	osGetenv = func(k string) string { return env[k] }
	defer func() { osGetenv = old }()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func diff(t *testing.T, what, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Errorf("%s: line %d\n got: %q\nwant: %q\nfull output:\n%s", what, i+1, gl, wl, got)
			return
		}
	}
}

const wantGetFound = `intent           pay-found
status           found (final, verdict #2)
tell them        The payment went through in block 1042 at 11:59 UTC on 29 Nov 2026 — do not pay again.
canister         ygokf-hiaaa-aaaaq-aaaaq-cai
method           icrc1_transfer
caller           6ce4r-dqha4-dqoby-ha4dq-obyha-4ba
to               2nxbn-tqjbe-eqsci-jbeeq-scijb-eba
amount           1.5 ICP (150000000 units)
memo             6c756e6368
created_at_time  2026-11-29T11:59:00Z (1795953540000000000)
after            Err.TooOld
first seen       2026-11-29T12:00:00Z
block            1042  at 2026-11-29T11:59:00.733Z  kind xfer  hash 9f3c0e5d7a
window           2026-11-29T11:57:00Z .. 2026-11-30T12:01:00Z  blocks 998..1311
evidence         certificate+chain  tip 1500  certified 2026-11-29T12:01:00Z  blocks read 314
near misses      block 1040 differs in amount

verdicts (2)
  SEQ  STATUS   FINAL  DECIDED (UTC)         BLOCK  REASON
  1    not_yet  no     2026-11-29T13:00:00Z  -      -
  2    found    yes    2026-11-29T13:01:00Z  1042   -
`

const wantGetNotYet = `intent           pay-notyet
status           not_yet (not final, verdict #1)
tell them        Not known yet: the payment can still go through until 12:01 UTC on 30 Nov 2026 — do not pay again before then.
canister         ypnbz-raaaa-aaaaq-aaaba-cai
method           icrc1_transfer
caller           6ce4r-dqha4-dqoby-ha4dq-obyha-4ba
to               2nxbn-tqjbe-eqsci-jbeeq-scijb-eba-mpuaujq.1
amount           42 units
memo             6c756e6368
created_at_time  2026-11-29T11:59:00Z (1795953540000000000)
after            Err.TooOld
first seen       2026-11-29T12:02:00Z
block            -
window           2026-11-29T11:57:00Z .. 2026-11-30T12:01:00Z  blocks 998..1311
evidence         certificate+chain  tip 1500  certified 2026-11-29T12:02:00Z  blocks read 314
near misses      none

verdicts (1)
  SEQ  STATUS   FINAL  DECIDED (UTC)         BLOCK  REASON
  1    not_yet  no     2026-11-29T13:03:00Z  -      -
`

const wantGetRemote = `intent       remote-found
status       found (final, verdict #1)
tell them    The payment went through in block 77 at 11:59 UTC on 29 Nov 2026 — do not pay again.
intent body  not stored here (decided by another instance)
block        77  at 2026-11-29T11:59:00Z  kind xfer  hash 77aa
window       -
evidence     certificate+chain  tip 1500  certified 2026-11-29T12:00:00Z  blocks read 314
near misses  none

verdicts (1)
  SEQ  STATUS  FINAL  DECIDED (UTC)         BLOCK  REASON
  1    found   yes    2026-11-29T13:06:00Z  77     -
`

func TestGetOutput(t *testing.T) {
	_, srv := supportServer(t)
	for _, c := range []struct{ id, want string }{
		{supporttest.IDFound, wantGetFound},
		{supporttest.IDNotYet, wantGetNotYet},
		{supporttest.IDRemote, wantGetRemote},
	} {
		code, out, errOut := runCLI(t, tokenEnv, "get", "--server", srv.URL, c.id)
		if code != 0 || errOut != "" {
			t.Fatalf("get %s: exit %d: %s", c.id, code, errOut)
		}
		diff(t, "get "+c.id, out, c.want)
	}
	// Flags after the id, and the token as a flag.
	code, out, errOut := runCLI(t, nil, "get", supporttest.IDInvalid, "--server", srv.URL, "--token", cliToken)
	if code != 0 || !strings.Contains(out, "tell them    The request could not be checked, so the outcome is unknown: escalate to engineering with the intent id, and do not pay again until they answer.\n") ||
		!strings.Contains(out, "reason       E_NO_STAMP (args.created_at_time): created_at_time is required\n") {
		t.Errorf("get invalid: exit %d\n%s%s", code, out, errOut)
	}
}

func TestGetJSON(t *testing.T) {
	_, srv := supportServer(t)
	code, out, errOut := runCLI(t, tokenEnv, "get", "--json", "--server", srv.URL, supporttest.IDAbsent)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var d support.Detail
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("decode: %v\n%s", err, out)
	}
	if d.Status != reconciled.StatusAbsent || len(d.Verdicts) != 1 || len(d.NearMisses) != 1 || d.Amount.Display != "25 ICP" {
		t.Errorf("detail %+v", d)
	}
}

func TestClientErrors(t *testing.T) {
	_, srv := supportServer(t)
	closed := httptest.NewServer(nil)
	closed.Close()
	for _, c := range []struct {
		env      map[string]string
		args     []string
		code     int
		inStderr string
	}{
		{nil, []string{"get", "--server", srv.URL, supporttest.IDFound}, 1, "token missing or wrong"},
		{map[string]string{"RECONCILED_TOKEN": "nope"}, []string{"get", "--server", srv.URL, supporttest.IDFound}, 1, "token missing or wrong"},
		{tokenEnv, []string{"get", "--server", srv.URL, "--token", "wrong", supporttest.IDFound}, 1, "token missing or wrong"},
		{nil, []string{"list", "--server", srv.URL}, 1, "token missing or wrong"},
		{tokenEnv, []string{"get", "--server", srv.URL, "no-such-intent"}, 1, "no intent no-such-intent on " + srv.URL},
		{tokenEnv, []string{"get", "--server", srv.URL, "bad id"}, 2, "is not [A-Za-z0-9_-]"},
		{tokenEnv, []string{"get", "--server", srv.URL}, 2, "want exactly one INTENT_ID"},
		{tokenEnv, []string{"get", "--server", "ftp://x", "a"}, 2, "not an http(s) URL"},
		{tokenEnv, []string{"get", "--server", closed.URL, "a"}, 1, "cannot reach " + closed.URL},
		{tokenEnv, []string{"list", "--server", srv.URL, "--status", "done"}, 2, `status "done" is not one of`},
		{tokenEnv, []string{"list", "--server", srv.URL, "--since", "monday"}, 2, "--since"},
		{tokenEnv, []string{"list", "--server", srv.URL, "--caller", "nobody"}, 1, "server said 400 E_BAD_ACCOUNT"},
		{tokenEnv, []string{"list", "--server", srv.URL, "extra"}, 2, "unexpected argument"},
		{tokenEnv, []string{"watch", "--server", srv.URL, "--interval", "1ms"}, 2, "below 100ms"},
	} {
		code, _, errOut := runCLI(t, c.env, c.args...)
		if code != c.code || !strings.Contains(errOut, c.inStderr) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d with %q", c.args, code, errOut, c.code, c.inStderr)
		}
		if strings.Contains(errOut, cliToken) {
			t.Errorf("%v: token in stderr: %q", c.args, errOut)
		}
	}
}

const wantList = `INTENT          STATUS      CANISTER                     FIRST SEEN (UTC)
pay-found       found       ygokf-hiaaa-aaaaq-aaaaq-cai  2026-11-29T12:00:00Z
pay-absent      absent      ygokf-hiaaa-aaaaq-aaaaq-cai  2026-11-29T12:01:00Z
pay-notyet      not_yet     ypnbz-raaaa-aaaaq-aaaba-cai  2026-11-29T12:02:00Z
pay-unreadable  unreadable  ygokf-hiaaa-aaaaq-aaaaq-cai  2026-11-29T12:03:00Z
pay-invalid     invalid     ygokf-hiaaa-aaaaq-aaaaq-cai  2026-11-29T12:04:00Z
pay-new         none        ygokf-hiaaa-aaaaq-aaaaq-cai  2026-11-29T12:05:00Z
remote-found    found       -                            2026-11-29T13:00:00Z
7 intents, 3 open
`

const wantListOpenWide = `INTENT          STATUS      CANISTER                     FIRST SEEN (UTC)      METHOD          CALLER                             UPDATED (UTC)
pay-new         none        ygokf-hiaaa-aaaaq-aaaaq-cai  2026-11-29T12:05:00Z  icrc1_transfer  sdxo5-niiba-eaqca-ibaea-qcaib-aba  2026-11-29T13:00:00Z
pay-unreadable  unreadable  ygokf-hiaaa-aaaaq-aaaaq-cai  2026-11-29T12:03:00Z  icrc1_transfer  6ce4r-dqha4-dqoby-ha4dq-obyha-4ba  2026-11-29T13:00:00Z
pay-notyet      not_yet     ypnbz-raaaa-aaaaq-aaaba-cai  2026-11-29T12:02:00Z  icrc1_transfer  6ce4r-dqha4-dqoby-ha4dq-obyha-4ba  2026-11-29T13:00:00Z
3 intents, 3 open
`

func TestListOutput(t *testing.T) {
	_, srv := supportServer(t)
	// Pages of two: the full listing must follow the cursor across four.
	old := listPageSize
	listPageSize = 2
	defer func() { listPageSize = old }()

	code, out, errOut := runCLI(t, tokenEnv, "list", "--server", srv.URL)
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	diff(t, "list", out, wantList)

	code, out, errOut = runCLI(t, tokenEnv, "list", "--server", srv.URL, "--open", "--newest", "--wide")
	if code != 0 {
		t.Fatalf("list --open: exit %d: %s", code, errOut)
	}
	diff(t, "list --open --newest --wide", out, wantListOpenWide)

	listIDs := func(args ...string) []string {
		t.Helper()
		code, out, errOut := runCLI(t, tokenEnv, append([]string{"list", "--server", srv.URL, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("list %v: exit %d: %s", args, code, errOut)
		}
		var items []support.IntentItem
		if err := json.Unmarshal([]byte(out), &items); err != nil {
			t.Fatalf("list %v: %v\n%s", args, err, out)
		}
		var ids []string
		for _, it := range items {
			ids = append(ids, it.IntentID)
		}
		return ids
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--status", "found"}, []string{"pay-found", "remote-found"}},
		{[]string{"--status", "not_yet,unreadable,none"}, []string{"pay-notyet", "pay-unreadable", "pay-new"}},
		{[]string{"--canister", supporttest.OtherLedger}, []string{"pay-notyet"}},
		{[]string{"--caller", supporttest.OtherCaller}, []string{"pay-absent", "pay-invalid", "pay-new"}},
		{[]string{"--since", "2026-11-29T12:04:00Z"}, []string{"pay-invalid", "pay-new", "remote-found"}},
		{[]string{"--limit", "3"}, []string{"pay-found", "pay-absent", "pay-notyet"}},
		{[]string{"--limit", "3", "--newest"}, []string{"remote-found", "pay-new", "pay-invalid"}},
		{[]string{"--status", "absent", "--caller", supporttest.Caller}, nil},
	} {
		if got := listIDs(c.args...); !slices.Equal(got, c.want) {
			t.Errorf("list %v = %v, want %v", c.args, got, c.want)
		}
	}
	if _, out, _ := runCLI(t, tokenEnv, "list", "--server", srv.URL, "--json", "--status", "absent", "--caller", supporttest.Caller); out != "[]\n" {
		t.Errorf("empty --json = %q, want []", out)
	}
}

func TestWatch(t *testing.T) {
	st, srv := supportServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut daemontest.LogBuffer
	polled := make(chan struct{})
	tick := make(chan time.Time)
	w := &watcher{
		c:        &apiClient{base: mustURL(t, srv.URL), token: cliToken, http: srv.Client()},
		statuses: []reconciled.Status{reconciled.StatusFound, reconciled.StatusAbsent, reconciled.StatusNotYet},
		out:      &out, errOut: &errOut,
		polled: func() { polled <- struct{}{} },
	}
	done := make(chan error, 1)
	go func() { done <- w.run(ctx, tick) }()
	<-polled // baseline: nothing printed
	if out.String() != "" {
		t.Fatalf("baseline printed %q", out.String())
	}

	decided := supporttest.Base.Add(3 * time.Hour)
	supporttest.Append(t, st, reconciled.Verdict{IntentID: supporttest.IDNotYet, Seq: 2, Status: reconciled.StatusUnreadable,
		Reason: &reconciled.Reason{Code: "E_TRANSPORT", Message: "connection reset"}, DecidedAt: decided})
	supporttest.Append(t, st, reconciled.Verdict{IntentID: supporttest.IDNotYet, Seq: 3, Status: reconciled.StatusAbsent,
		Window: supporttest.Window(), Evidence: supporttest.Evidence(decided), DecidedAt: decided.Add(time.Second)})
	supporttest.Append(t, st, reconciled.Verdict{IntentID: supporttest.IDNone, Seq: 1, Status: reconciled.StatusNotYet,
		Window: supporttest.Window(), Evidence: supporttest.Evidence(decided), DecidedAt: decided.Add(2 * time.Second)})
	supporttest.PutIntent(t, st, "late-one", supporttest.Ledger, supporttest.Caller, supporttest.Payee, "3", decided)
	supporttest.Append(t, st, reconciled.Verdict{IntentID: "late-one", Seq: 1, Status: reconciled.StatusFound,
		Block: &reconciled.BlockRef{Index: 2000, TS: 1, Hash: "aa", Kind: "xfer"}, DecidedAt: decided.Add(3 * time.Second)})
	tick <- time.Time{}
	<-polled
	want := "2026-11-29T15:00:01Z  pay-notyet  #3  absent  It did not happen and can no longer happen — it is safe to pay again, as a new payment.\n" +
		"2026-11-29T15:00:02Z  pay-new  #1  not_yet  Not known yet: the payment can still go through until 12:01 UTC on 30 Nov 2026 — do not pay again before then.\n" +
		"2026-11-29T15:00:03Z  late-one  #1  found  The payment went through in block 2000 — do not pay again.\n"
	diff(t, "watch", out.String(), want)

	// Nothing new: nothing printed.
	tick <- time.Time{}
	<-polled
	diff(t, "watch after an idle poll", out.String(), want)

	// A server that goes away is reported and retried, not fatal.
	srv.CloseClientConnections()
	srv.Close()
	tick <- time.Time{}
	<-polled
	if !strings.Contains(errOut.String(), "(retrying)") {
		t.Errorf("stderr after server loss: %q", errOut.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch returned %v after cancel", err)
	}
}

func TestWatchStopsOnAuthError(t *testing.T) {
	_, srv := supportServer(t)
	w := &watcher{c: &apiClient{base: mustURL(t, srv.URL), token: "wrong", http: srv.Client()}, out: &bytes.Buffer{}, errOut: &bytes.Buffer{}}
	err := w.run(context.Background(), make(chan time.Time))
	if !isAuth(err) {
		t.Errorf("watch with a wrong token: %v", err)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
