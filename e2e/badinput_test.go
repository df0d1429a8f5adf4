package e2e_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// expectKind is what the daemon must do with a malformed message.
type expectKind int

const (
	expectInvalid  expectKind = iota + 1 // an invalid verdict (seq 1, final) with code
	expectTerm                           // terminated: no usable id
	expectConflict                       // E_INTENT_CONFLICT on the rejects subject; nothing stored changes
	expectRefused                        // refused by the intent stream at publish: over its size limit
	expectOpen                           // well-formed but far-fetched: not_yet, its window open
	expectAbsent                         // well-formed, its window closed before the ledger existed: absent
)

type badInput struct {
	name string
	// id is the intent id the body carries (the verdict or reject subject);
	// empty for bodies without a usable one.
	id   string
	body []byte
	kind expectKind
	code string // invalid verdict code / reject code
}

// validIntent is a well-formed transfer intent of ledger with the given id;
// mutate edits it before encoding.
func validIntent(id, ledger string, mutate func(m, args map[string]any)) []byte {
	args := map[string]any{"from_subaccount": nil, "to": payee.Encode(), "amount": "1500", "fee": nil,
		"memo": "6d656d6f", "created_at_time": "1791547201000000000"}
	m := map[string]any{"intent_id": id, "canister_id": ledger, "method": "icrc1_transfer",
		"caller": payer.Encode(), "args": args, "after": "Err.TooOld"}
	if mutate != nil {
		mutate(m, args)
	}
	return jsonOf(m)
}

// spoil flips the last character of a principal's text so its checksum
// no longer matches.
func spoil(text string) string {
	last := text[len(text)-1]
	repl := byte('a')
	if last == 'a' {
		repl = 'b'
	}
	return text[:len(text)-1] + string(repl)
}

func badInputs(ledger string) []badInput {
	var out []badInput
	inv := func(name, code string, mutate func(m, args map[string]any)) {
		id := "bad-" + name
		out = append(out, badInput{name: name, id: id, body: validIntent(id, ledger, mutate), kind: expectInvalid, code: code})
	}
	raw := func(name, id string, body []byte, kind expectKind, code string) {
		out = append(out, badInput{name: name, id: id, body: body, kind: kind, code: code})
	}
	set := func(k string, v any) func(m, args map[string]any) { return func(m, _ map[string]any) { m[k] = v } }
	del := func(k string) func(m, args map[string]any) { return func(m, _ map[string]any) { delete(m, k) } }
	arg := func(k string, v any) func(m, args map[string]any) { return func(_, a map[string]any) { a[k] = v } }
	delArg := func(k string) func(m, args map[string]any) { return func(_, a map[string]any) { delete(a, k) } }

	// Not JSON, or JSON that is not an object: nothing names an intent.
	raw("not-json", "", []byte(`{"intent_id": "x", `), expectTerm, "")
	raw("empty", "", []byte{}, expectTerm, "")
	raw("array", "", []byte(`[{"intent_id":"in-array"}]`), expectTerm, "")
	raw("string", "", []byte(`"bad-string"`), expectTerm, "")
	raw("null", "", []byte(`null`), expectTerm, "")
	raw("trailing-garbage", "", append(validIntent("bad-trailing", ledger, nil), []byte(" }")...), expectTerm, "")
	raw("nul-byte", "", append([]byte{0}, validIntent("bad-nul", ledger, nil)...), expectTerm, "")
	// Ids that are missing, of the wrong type, or unusable as a subject token.
	raw("no-id", "", validIntent("", ledger, del("intent_id")), expectTerm, "")
	raw("id-number", "", validIntent("", ledger, set("intent_id", 12345)), expectTerm, "")
	raw("id-empty", "", validIntent("", ledger, nil), expectTerm, "")
	raw("id-129", "", validIntent(strings.Repeat("a", 129), ledger, nil), expectTerm, "")
	raw("id-dot", "", validIntent("bad.dot", ledger, nil), expectTerm, "")
	raw("id-wildcard", "", validIntent("bad-*", ledger, nil), expectTerm, "")
	raw("id-gt", "", validIntent("bad->", ledger, nil), expectTerm, "")
	raw("id-space", "", validIntent("bad id", ledger, nil), expectTerm, "")
	raw("id-invalid-utf8", "", bytes.Replace(validIntent("bad-utf8-id-XX", ledger, nil), []byte("XX"), []byte{0xff, 0xfe}, 1), expectTerm, "")
	// Too large: the intent stream refuses them at publish.
	big := validIntent("bad-40k", ledger, set("after", strings.Repeat("x", 40<<10)))
	raw("over-limit-40k", "bad-40k", big, expectRefused, "")
	huge := validIntent("bad-1m", ledger, set("after", strings.Repeat("y", 1000<<10)))
	raw("one-mib", "bad-1m", huge, expectRefused, "")

	// Readable id: an invalid verdict with the precise code.
	raw("invalid-utf8-value", "bad-utf8-value", bytes.Replace(validIntent("bad-utf8-value", ledger, set("after", "AB")), []byte(`"AB"`), []byte{'"', 0xc3, 0x28, '"'}, 1), expectInvalid, "E_BAD_JSON")
	raw("duplicate-key", "bad-dup-key", []byte(strings.Replace(string(validIntent("bad-dup-key", ledger, nil)), `"method":`, `"method":"icrc2_approve","method":`, 1)), expectInvalid, "E_BAD_JSON")
	inv("unknown-field", "E_UNKNOWN_FIELD", set("priority", "high"))
	inv("unknown-arg", "E_UNKNOWN_FIELD", arg("amount_e8s", "1"))
	inv("approve-with-transfer-args", "E_UNKNOWN_FIELD", set("method", "icrc2_approve"))
	inv("no-canister", "E_BAD_CANISTER", del("canister_id"))
	inv("canister-checksum", "E_BAD_CANISTER", set("canister_id", spoil(ledger)))
	inv("canister-number", "E_BAD_CANISTER", set("canister_id", 7))
	inv("unknown-method", "E_BAD_METHOD", set("method", "icrc1_burn"))
	inv("method-case", "E_BAD_METHOD", set("method", "ICRC1_TRANSFER"))
	inv("no-method", "E_BAD_METHOD", del("method"))
	inv("caller-checksum", "E_BAD_CALLER", set("caller", spoil(payer.Encode())))
	inv("no-caller", "E_BAD_CALLER", del("caller"))
	inv("no-args", "E_BAD_ARGS", del("args"))
	inv("args-array", "E_BAD_ARGS", set("args", []any{"1500"}))
	inv("args-string", "E_BAD_ARGS", set("args", "amount=1500"))
	inv("amount-number", "E_BAD_AMOUNT", arg("amount", 1500))
	inv("amount-negative", "E_BAD_AMOUNT", arg("amount", "-1500"))
	inv("amount-huge-number", "E_BAD_AMOUNT", arg("amount", json.RawMessage(`1e400`)))
	inv("amount-fraction", "E_BAD_AMOUNT", arg("amount", "1500.5"))
	inv("amount-hex", "E_BAD_AMOUNT", arg("amount", "0x5dc"))
	inv("amount-plus", "E_BAD_AMOUNT", arg("amount", "+1500"))
	inv("amount-space", "E_BAD_AMOUNT", arg("amount", " 1500"))
	inv("no-amount", "E_BAD_AMOUNT", delArg("amount"))
	inv("to-checksum", "E_BAD_ACCOUNT", arg("to", spoil(payee.Encode())))
	inv("no-to", "E_BAD_ACCOUNT", delArg("to"))
	inv("to-33-byte-subaccount", "E_BAD_ACCOUNT", arg("to", icrc3.Account{Owner: payee, Subaccount: bytes.Repeat([]byte{1}, 33)}.String()))
	inv("from-subaccount-33", "E_BAD_SUBACCOUNT", arg("from_subaccount", strings.Repeat("01", 33)))
	inv("from-subaccount-odd-hex", "E_BAD_SUBACCOUNT", arg("from_subaccount", "abc"))
	inv("from-subaccount-number", "E_BAD_SUBACCOUNT", arg("from_subaccount", 1))
	inv("memo-not-hex", "E_BAD_MEMO", arg("memo", "lunch"))
	inv("memo-too-long", "E_BAD_MEMO", arg("memo", strings.Repeat("ab", 257)))
	inv("fee-negative", "E_BAD_FEE", arg("fee", "-10000"))
	inv("fee-number", "E_BAD_FEE", arg("fee", 10000))
	inv("no-stamp", "E_NO_STAMP", delArg("created_at_time"))
	inv("null-stamp", "E_NO_STAMP", arg("created_at_time", nil))
	inv("stamp-over-nat64", "E_BAD_STAMP", arg("created_at_time", "18446744073709551616"))
	inv("stamp-negative", "E_BAD_STAMP", arg("created_at_time", "-1791547201000000000"))
	inv("stamp-number", "E_BAD_STAMP", arg("created_at_time", 1791547201000000000))
	// A stamp ten years ahead is well-formed: the ledger would take such a
	// call only then, so the window stays open (not_yet), never absent.
	raw("stamp-ten-years-ahead", "bad-future", validIntent("bad-future", ledger, arg("created_at_time", "2106000000000000000")), expectOpen, "")
	// Huge but well-formed amounts: a nat has no bound in Candid, so these
	// are intents like any other. Their stamp's window closed before the
	// test ledger's first block, so the truth is absent.
	raw("amount-200-digits", "bad-amount-200", validIntent("bad-amount-200", ledger, arg("amount", "1"+strings.Repeat("0", 199))), expectAbsent, "")
	raw("amount-20000-digits", "bad-amount-20000", validIntent("bad-amount-20000", ledger, arg("amount", "9"+strings.Repeat("9", 19999))), expectAbsent, "")
	inv("after-number", "E_BAD_AFTER", set("after", 3))
	inv("expiry-garbage", "E_BAD_EXPIRY", set("ingress_expiry", "soon"))
	inv("arg-hex-not-hex", "E_BAD_ARG_HEX", set("arg_hex", "4449444czz"))
	inv("arg-hex-not-candid", "E_BAD_ARG_HEX", set("arg_hex", "deadbeef"))
	inv("arg-hex-mismatch", "E_ARGS_MISMATCH", set("arg_hex", transferArgHex(3000)))
	// Deep nesting is refused without recursing the parser off its stack;
	// past encoding/json's depth limit the body is not JSON at all.
	deep := func(id string, depth int) []byte {
		return []byte(strings.Replace(string(validIntent(id, ledger, set("after", "DEEP"))), `"DEEP"`,
			strings.Repeat("[", depth)+strings.Repeat("]", depth), 1))
	}
	raw("deep-nesting", "bad-deep", deep("bad-deep", 9000), expectInvalid, "E_BAD_AFTER")
	raw("deeper-than-json", "", deep("bad-deeper", 10001), expectTerm, "")
	return out
}

// transferArgHex is the Candid of the base intent's transfer with another
// amount.
func transferArgHex(amount uint64) string {
	memo := []byte("memo")
	stamp := uint64(1791547201000000000)
	b, err := candid.Marshal([]any{icrc1.TransferArg{To: icrc3.Account{Owner: payee}.ToCandid(),
		Amount: icrc1.IDLNat(icrc3.NatFromUint64(amount)), Memo: &memo, CreatedAtTime: &stamp}})
	if err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// terminations collects the intake consumer's termination advisories by
// stream sequence.
type terminations struct {
	mu   sync.Mutex
	seqs map[uint64]string
	ch   chan struct{}
}

func watchTerminations(t *testing.T, tool *queue.Conn) *terminations {
	t.Helper()
	tm := &terminations{seqs: map[uint64]string{}, ch: make(chan struct{}, 1)}
	sub, err := tool.NATS().Subscribe("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED."+queue.IntentsStream+".>", func(m *nats.Msg) {
		var a struct {
			StreamSeq uint64 `json:"stream_seq"`
			Reason    string `json:"reason"`
		}
		if json.Unmarshal(m.Data, &a) != nil {
			return
		}
		tm.mu.Lock()
		tm.seqs[a.StreamSeq] = a.Reason
		tm.mu.Unlock()
		select {
		case tm.ch <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tool.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return tm
}

func (tm *terminations) wait(t *testing.T, seq uint64) string {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		tm.mu.Lock()
		reason, ok := tm.seqs[seq]
		tm.mu.Unlock()
		if ok {
			return reason
		}
		select {
		case <-tm.ch:
		case <-deadline.C:
			t.Fatalf("stream message %d was not terminated", seq)
		}
	}
}

// Malformed intents each get their precise answer; none crashes the
// daemon, none blocks the queue, and none changes a stored intent.
func TestBadInputTable(t *testing.T) {
	r := newRig(t, rigOpts{})
	l := r.archivedLedger(ledgertest.LedgerConfig{})
	ledger := l.ID().Encode()
	terms := watchTerminations(t, r.tool)

	// A stored intent, for the conflicting duplicates below.
	base := payment{stamp: r.srv.Now(), amount: 4242, memo: "base"}
	baseBody := jsonOf(base.intent("conflict-base", l.ID()))
	r.publish(ledger, "conflict-base", baseBody)
	if v := r.wait("conflict-base", verdictAny); v.Status != reconciled.StatusNotYet {
		t.Fatalf("base intent: %s", outcomeOf(v))
	}
	storedBefore, err := r.st.Intent(r.ctx, "conflict-base")
	if err != nil {
		t.Fatal(err)
	}
	verdictsBefore, err := r.st.Verdicts(r.ctx, "conflict-base")
	if err != nil {
		t.Fatal(err)
	}

	cases := badInputs(ledger)
	conflicting := base
	conflicting.amount = 4343
	cases = append(cases,
		badInput{name: "conflict-other-amount", id: "conflict-base", body: jsonOf(conflicting.intent("conflict-base", l.ID())), kind: expectConflict, code: "E_INTENT_CONFLICT"},
		badInput{name: "conflict-invalid-body", id: "conflict-base", body: validIntent("conflict-base", ledger, func(_, a map[string]any) { a["amount"] = "-1" }), kind: expectConflict, code: "E_INTENT_CONFLICT"},
		badInput{name: "conflict-unknown-field", id: "conflict-base", body: validIntent("conflict-base", ledger, func(m, _ map[string]any) { m["x"] = 1 }), kind: expectConflict, code: "E_INTENT_CONFLICT"},
	)
	if len(cases) < 40 {
		t.Fatalf("only %d malformed intents", len(cases))
	}
	rejects := make(chan queue.Reject, len(cases))
	if err := r.tool.SubscribeRejects(r.ctx, "conflict-base", func(rj queue.Reject) { rejects <- rj }); err != nil {
		t.Fatal(err)
	}

	// Publish the whole table at once: the daemon takes them concurrently,
	// as it would from a misbehaving publisher.
	seqs := make([]uint64, len(cases))
	for i, c := range cases {
		ack, err := r.tool.JetStream().Publish(r.ctx, "reconcile.intents."+ledger, c.body, jetstream.WithMsgID(fmt.Sprint("bad-msg-", i)))
		if c.kind == expectRefused {
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.ErrorCode(10054) {
				t.Errorf("%s: publish of %d bytes: %v, want the stream's refusal (message size exceeds maximum)", c.name, len(c.body), err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: publish: %v", c.name, err)
		}
		seqs[i] = ack.Sequence
	}
	conflicts := 0
	for i, c := range cases {
		switch c.kind {
		case expectInvalid:
			v := r.wait(c.id, verdictAny)
			if v.Status != reconciled.StatusInvalid || !v.Final || v.Seq != 1 || v.Reason == nil || v.Reason.Code != c.code {
				t.Errorf("%s: verdict %s final=%v seq=%d reason=%+v, want invalid %s", c.name, v.Status, v.Final, v.Seq, v.Reason, c.code)
			}
		case expectTerm:
			terms.wait(t, seqs[i])
			if c.id != "" {
				if v, err := r.tool.LastVerdict(r.ctx, c.id); err == nil && v != nil {
					t.Errorf("%s: terminated message got a verdict: %+v", c.name, v)
				}
			}
		case expectConflict:
			conflicts++
		case expectOpen:
			v := r.wait(c.id, verdictAny)
			if v.Status != reconciled.StatusNotYet || v.Final || v.Window == nil {
				t.Errorf("%s: verdict %s final=%v, want not_yet", c.name, v.Status, v.Final)
			}
		case expectAbsent:
			v := r.wait(c.id, verdictAny)
			if v.Status != reconciled.StatusAbsent || !v.Final || v.Seq != 1 {
				t.Errorf("%s: verdict %s final=%v seq=%d, want absent", c.name, v.Status, v.Final, v.Seq)
			}
		}
	}
	for range conflicts {
		select {
		case rj := <-rejects:
			if rj.Code != "E_INTENT_CONFLICT" {
				t.Errorf("reject %+v, want E_INTENT_CONFLICT", rj)
			}
		case <-r.ctx.Done():
			t.Fatal("missing E_INTENT_CONFLICT rejects")
		}
	}

	// The queue is not blocked: a valid intent published after the table
	// is decided promptly.
	p := payment{stamp: r.srv.Now(), amount: 99, memo: "after-table"}
	idx, err := l.Transfer(payer, p.arg())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r.publish(ledger, "after-table", jsonOf(p.intent("after-table", l.ID())))
	// The daemon reuses a certified tip for a quarter second, so the first
	// verdict may be a not_yet from just before the transfer; the
	// follow-up settles it.
	v := r.settle("after-table", verdictFinal)
	if v.Status != reconciled.StatusFound || uint64(v.Block.Index) != idx {
		t.Fatalf("valid intent after the table: %s %+v", outcomeOf(v), v.Block)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("valid intent after the table took %s", d)
	} else {
		t.Logf("%d malformed intents, then a valid one decided in %s", len(cases), d.Round(time.Millisecond))
	}

	// Nothing stored about the conflicting id changed.
	storedAfter, err := r.st.Intent(r.ctx, "conflict-base")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(storedAfter.Body, storedBefore.Body) || storedAfter.Hash != storedBefore.Hash {
		t.Fatalf("stored intent changed:\n%s\n%s", storedBefore.Body, storedAfter.Body)
	}
	verdictsAfter, err := r.st.Verdicts(r.ctx, "conflict-base")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(jsonOf(verdictsAfter), jsonOf(verdictsBefore)) {
		t.Fatalf("verdicts of the conflicting id changed:\n%+v\n%+v", verdictsBefore, verdictsAfter)
	}
	if n := r.metrics.Get(reconcile.MetricRejects, "E_INTENT_CONFLICT"); n != uint64(conflicts) {
		t.Fatalf("%d conflicts counted, want %d", n, conflicts)
	}
	// Every message was settled and purged: nothing waits in the intent
	// stream.
	st, err := r.tool.JetStream().Stream(r.ctx, queue.IntentsStream)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "intent stream drained", func() (bool, string) {
		info, err := st.Info(r.ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.State.Msgs == 0, fmt.Sprint(info.State.Msgs, " messages left")
	})
}

// A stamp near the top of nat64 is well-formed JSON and a valid nat64, so
// it must get an answer like any other intent (an invalid verdict, or
// not_yet with its window open) — not silence while the message is
// redelivered until the server gives up on it.
func TestBadInputStampNearNat64Max(t *testing.T) {
	r := newRig(t, rigOpts{})
	l := r.archivedLedger(ledgertest.LedgerConfig{})
	ledger := l.ID().Encode()
	for _, stamp := range []string{"18446744073709551615", "9223372036854775807"} {
		id := "stamp-" + stamp
		r.publish(ledger, id, validIntent(id, ledger, func(_, a map[string]any) { a["created_at_time"] = stamp }))
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		var got *reconciled.Verdict
		err := r.tool.WatchIntent(ctx, id, func(v reconciled.Verdict) error { got = &v; return queue.ErrStop })
		cancel()
		if err != nil || got == nil {
			t.Errorf("stamp %s: no verdict within 10 s (%v); daemon log:\n%s", stamp, err, lastLines(r.logs.String(), id, 3))
			continue
		}
		if (got.Status != reconciled.StatusInvalid || got.Reason == nil || got.Reason.Code != "E_BAD_STAMP") &&
			(got.Status != reconciled.StatusNotYet) {
			t.Errorf("stamp %s: %s %+v, want invalid E_BAD_STAMP or not_yet", stamp, got.Status, got.Reason)
		}
	}
}

// lastLines returns the last n log lines that mention word.
func lastLines(log, word string, n int) string {
	var hits []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, word) {
			hits = append(hits, line)
		}
	}
	if len(hits) > n {
		hits = hits[len(hits)-n:]
	}
	return strings.Join(hits, "\n")
}
