package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/support"
)

// hostile are texts a tool layer or a ledger can put into a field the CLI
// prints: a window title (OSC … BEL), a screen clear, colours, an 8-bit
// CSI, bidi overrides and isolates, a line separator, a tab and a newline
// that would forge a row, and bytes that are not UTF-8.
var hostile = []string{
	"\x1b]0;owned\x07", "\x1b[2J", "\x1b[31mred\x1b[0m", "\u009b2J",
	"\u202etxt.exe\u202c", "\u2066iso\u2069", "line\u2028sep", "tab\there", "row\nforged", "bad\xff\xfebytes", "del\x7f",
}

// unsafeRune reports a rune a terminal would act on or that reorders or
// hides text: every control character but the newline ending a line, the
// bidi controls, and the line and paragraph separators.
func unsafeRune(r rune) bool {
	if r == '\n' {
		return false
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// checkSafe fails t when out is not UTF-8 or holds a rune unsafeRune
// reports (a raw ESC, say).
func checkSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s prints invalid UTF-8: %q", what, out)
	}
	for i, r := range out {
		if unsafeRune(r) {
			t.Errorf("%s prints %U at byte %d: %q", what, r, i, out)
			return
		}
	}
}

func hostileDetail() support.Detail {
	body, _ := json.Marshal(map[string]any{
		"intent_id": "evil", "canister_id": hostile[0], "method": "icrc1_transfer", "caller": hostile[4],
		"args": map[string]any{"to": hostile[2], "amount": "5", "memo": hostile[1], "created_at_time": hostile[8],
			"extra": hostile[9]},
		"after": hostile[0] + hostile[1] + hostile[2],
	})
	at := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	reason := &reconciled.Reason{Code: "E_" + hostile[3], Field: hostile[5], Message: hostile[6] + hostile[7]}
	return support.Detail{
		IntentItem: support.IntentItem{IntentID: "evil", CanisterID: hostile[0], Caller: hostile[4], Method: hostile[1],
			FirstSeen: at, Status: reconciled.StatusInvalid, Final: true, LatestSeq: 1, UpdatedAt: at, HasBody: true,
			Ledger: &support.Ledger{Decimals: 2, Symbol: hostile[2]}},
		Intent:     body,
		Advice:     "tell them " + hostile[0],
		Block:      &support.BlockView{BlockRef: reconciled.BlockRef{Index: 1, Hash: hostile[1], Kind: hostile[3]}},
		Window:     &support.WindowView{Window: reconciled.Window{NarrowedBy: hostile[4]}},
		Evidence:   &support.EvidenceView{Evidence: reconciled.Evidence{Verified: hostile[5]}},
		NearMisses: []support.NearMissView{{NearMiss: reconciled.NearMiss{Index: 2, Differs: []string{hostile[6], hostile[10]}}}},
		Reason:     reason,
		Verdicts: []reconciled.Verdict{{IntentID: "evil", Seq: 1, Status: reconciled.Status(hostile[1]), Reason: reason, DecidedAt: at,
			Block: &reconciled.BlockRef{Kind: hostile[3]}}},
	}
}

// hostileServer answers as a support API whose data came from a hostile
// tool layer and ledger.
func hostileServer(t *testing.T) *httptest.Server {
	t.Helper()
	d := hostileDetail()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/intents/evil":
			json.NewEncoder(w).Encode(d)
		case "/api/v1/intents":
			json.NewEncoder(w).Encode(support.ListReply{Intents: []support.IntentItem{d.IntentItem}})
		default:
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(support.ErrorBody{Error: support.APIError{Code: "E_X", Message: hostile[0] + hostile[4]}})
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCLIPrintsHostileFieldsSafely: whatever an intent or a ledger put into
// a field, get, list, watch and ask print it escaped, never raw — in text
// and in --json — and the escapes still read as the original text.
func TestCLIPrintsHostileFieldsSafely(t *testing.T) {
	srv := hostileServer(t)
	for _, args := range [][]string{
		{"get", "evil"}, {"get", "--json", "evil"}, {"list"}, {"list", "--json"}, {"list", "--wide"},
		{"get", "other"}, // an error reply, printed on stderr
	} {
		failing := args[len(args)-1] == "other"
		code, out, errOut := runCLI(t, tokenEnv, append(append([]string{}, args...), "--server", srv.URL)...)
		if !failing && code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
		checkSafe(t, strings.Join(args, " "), out)
		checkSafe(t, strings.Join(args, " ")+" (stderr)", errOut)
		if args[0] == "get" && len(args) == 2 && !failing && !strings.Contains(out, `\x1b]0;owned\x07\x1b[2J`) {
			t.Errorf("get: the after field is not shown escaped:\n%s", out)
		}
		if len(args) > 1 && args[1] == "--json" {
			var v any
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Errorf("%v: not JSON any more: %v", args, err)
			}
			if !strings.Contains(fmt.Sprint(v), "\u202etxt.exe") {
				t.Errorf("%v: the JSON no longer decodes to the original text", args)
			}
		}
	}

	// watch prints a new verdict's line.
	var out bytes.Buffer
	w := &watcher{out: &out}
	v := hostileDetail().Verdicts[0]
	v.IntentID = hostile[0]
	if err := w.print(v); err != nil {
		t.Fatal(err)
	}
	w.json = true
	if err := w.print(v); err != nil {
		t.Fatal(err)
	}
	checkSafe(t, "watch", out.String())

	// watch reports a failed poll and goes on; the error quotes the server.
	var errOut bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	w = &watcher{c: &apiClient{base: mustURL(t, srv.URL+"/elsewhere"), token: cliToken, http: srv.Client()},
		out: &out, errOut: &errOut, polled: cancel}
	if err := w.run(ctx, make(chan time.Time)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "(retrying)") {
		t.Errorf("watch: no failed poll reported: %q", errOut.String())
	}
	checkSafe(t, "watch (stderr)", errOut.String())

	// ask prints verdicts, rejects and foreign verdicts as they arrive.
	checkSafe(t, "ask verdict", verdictLine(v))
	checkSafe(t, "ask reject", rejectLine(queue.Reject{IntentID: "evil", Code: hostile[1], Message: hostile[0] + hostile[4]}))
}

// TestLogsEscapeHostileText: the daemon's JSON log lines carry fields from
// intents and ledgers (after, memo text, a ledger's symbol, reject texts);
// zap's JSON encoder escapes C0 controls but writes C1 controls, bidi
// controls and U+2028/U+2029 raw.
func TestLogsEscapeHostileText(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(zapcore.InfoLevel, &buf)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(hostile, "|")
	log.With(zap.String("symbol", all)).Info("intent "+all, zap.String("after", all), zap.Error(fmt.Errorf("reject: %s", all)),
		zap.Strings("list", hostile))
	checkSafe(t, "log line", strings.TrimSuffix(buf.String(), "\n"))
	if strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("one entry spans lines: %q", buf.String())
	}
	var entry map[string]any
	if err := json.Unmarshal(buf.Bytes(), &entry); err != nil {
		t.Fatalf("log line is not JSON: %v\n%s", err, buf.String())
	}
	if after, _ := entry["after"].(string); !strings.HasPrefix(after, hostile[0]+"|"+hostile[1]) || !strings.Contains(after, hostile[4]) {
		t.Errorf("after decodes to %q, want %q", after, all)
	}
}
