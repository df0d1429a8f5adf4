package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// natsExample is the `nats` CLI example of docs/protocol.md, taken apart.
type natsExample struct {
	intent         []byte // the heredoc written to intent.json
	reqSubject     string // nats req <subject>
	msgID          string // --header Nats-Msg-Id:<id>
	getStream      string // nats stream get <stream>
	getLastFor     string // --last-for <subject>
	subVerdicts    string // nats sub reconcile.verdicts.…
	subRejects     string // nats sub reconcile.rejects.…
	verdictExample []byte // the ```json block under "### Verdict"
}

var (
	reqRE     = regexp.MustCompile(`(?m)^nats req (\S+) --header Nats-Msg-Id:(\S+) "\$\(cat intent\.json\)"$`)
	getRE     = regexp.MustCompile(`(?m)^nats stream get (\S+) --last-for (\S+)$`)
	subRE     = regexp.MustCompile(`(?m)^nats sub (\S+) &$`)
	heredocRE = regexp.MustCompile(`(?s)cat > intent\.json <<'EOF'\n(.*?)\nEOF\n`)
)

func parseNATSExample(t *testing.T, readme string) natsExample {
	t.Helper()
	var ex natsExample
	m := heredocRE.FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("docs/protocol.md: no `cat > intent.json <<'EOF'` heredoc")
	}
	ex.intent = []byte(m[1])
	if m = reqRE.FindStringSubmatch(readme); m == nil {
		t.Fatal("docs/protocol.md: no `nats req <subject> --header Nats-Msg-Id:<id> \"$(cat intent.json)\"` line")
	}
	ex.reqSubject, ex.msgID = m[1], m[2]
	if m = getRE.FindStringSubmatch(readme); m == nil {
		t.Fatal("docs/protocol.md: no `nats stream get <stream> --last-for <subject>` line")
	}
	ex.getStream, ex.getLastFor = m[1], m[2]
	for _, s := range subRE.FindAllStringSubmatch(readme, -1) {
		switch {
		// The first of each: the local variant further down follows
		// another intent.
		case strings.Contains(s[1], ".verdicts.") && ex.subVerdicts == "":
			ex.subVerdicts = s[1]
		case strings.Contains(s[1], ".rejects.") && ex.subRejects == "":
			ex.subRejects = s[1]
		}
	}
	if ex.subVerdicts == "" || ex.subRejects == "" {
		t.Fatal("docs/protocol.md: want `nats sub` lines for the verdicts and the rejects subject")
	}
	_, after, ok := strings.Cut(readme, "\n### Verdict\n")
	if !ok {
		t.Fatal("docs/protocol.md: no ### Verdict section")
	}
	_, block, ok := strings.Cut(after, "```json\n")
	if !ok {
		t.Fatal("docs/protocol.md: no json block under ### Verdict")
	}
	block, _, _ = strings.Cut(block, "```")
	ex.verdictExample = []byte(block)
	return ex
}

// decodeStrict decodes one JSON document into v, refusing unknown fields.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// TestReadmeNATSExample runs the NATS example of docs/protocol.md as written:
// the documented intent JSON, published to the documented subject with the
// documented header, answered by a daemon configured with the example
// ledgers file against a test replica that hosts a ledger under the
// example's canister id; the verdict is read as the page reads it. The
// metrics table of docs/operations.md is held to what that daemon exposes.
func TestReadmeNATSExample(t *testing.T) {
	readme := readDoc(t, wireDocPath)
	ex := parseNATSExample(t, readme)

	// The example agrees with itself and with the contract.
	in, err := matcher.ParseIntent(ex.intent)
	if err != nil {
		t.Fatalf("docs/protocol.md: the intent does not parse: %v", err)
	}
	var doc struct {
		IntentID   string `json:"intent_id"`
		CanisterID string `json:"canister_id"`
		Args       struct {
			CreatedAtTime string `json:"created_at_time"`
		} `json:"args"`
	}
	if err := json.Unmarshal(ex.intent, &doc); err != nil {
		t.Fatal(err)
	}
	subj, err := queue.NewSubjects(queue.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	wantIntentSubj, _ := subj.Intent(doc.CanisterID)
	wantVerdictSubj, _ := subj.Verdict(doc.IntentID)
	wantRejectSubj, _ := subj.Reject(doc.IntentID)
	for _, c := range []struct{ what, got, want string }{
		{"nats req subject", ex.reqSubject, wantIntentSubj},
		{"Nats-Msg-Id", ex.msgID, queue.IntentMsgID(doc.IntentID, matcher.IntentHash(ex.intent))},
		{"nats stream get stream", ex.getStream, queue.VerdictsStream},
		{"--last-for subject", ex.getLastFor, wantVerdictSubj},
		{"nats sub verdicts subject", ex.subVerdicts, wantVerdictSubj},
		{"nats sub rejects subject", ex.subRejects, wantRejectSubj},
	} {
		if c.got != c.want {
			t.Errorf("docs/protocol.md: %s is %q, want %q", c.what, c.got, c.want)
		}
	}
	if !strings.Contains(readme, "```text\n"+string(in.HashedForm())+"\n```\n\nand its `intent_hash` is `"+in.HashHex()+"`") {
		t.Errorf("docs/protocol.md: the example's hashed form and intent_hash are\n%s\n%s", in.HashedForm(), in.HashHex())
	}
	if !bytes.Contains([]byte(readme), append([]byte("```json\n"), ex.intent...)) {
		t.Error("docs/protocol.md: the ### Intent block and the intent.json heredoc differ")
	}
	var documented reconciled.Verdict
	if err := decodeStrict(ex.verdictExample, &documented); err != nil {
		t.Errorf("docs/protocol.md: the verdict example does not decode as a verdict: %v", err)
	}
	stamp, err := strconv.ParseUint(doc.Args.CreatedAtTime, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// A root-subnet replica (no delegation, like the NNS subnet) certifies
	// any canister id, so the ledger can carry the example's mainnet id.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(5), ledgertest.WithRootSubnet())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ledgerID, err := principal.Decode(doc.CanisterID)
	if err != nil {
		t.Fatal(err)
	}
	caller := in.Caller
	ledger, err := srv.NewLedger(ledgertest.LedgerConfig{ID: ledgerID,
		InitialBalances: []ledgertest.Balance{{Account: icrc3.Account{Owner: caller}, Amount: icrc3.NatFromUint64(1_000_000_000)}}})
	if err != nil {
		t.Fatal(err)
	}
	// Today's payment by the same caller: history the scan must read past.
	now := srv.Now()
	if _, err := ledger.Transfer(caller, icrc1.TransferArg{To: icrc3.Account{Owner: principal.AnonymousID}.ToCandid(),
		Amount: icrc1.IDLNat(icrc3.NatFromUint64(150_000_000)), CreatedAtTime: &now}); err != nil {
		t.Fatal(err)
	}
	if now < stamp+uint64(24*time.Hour+2*time.Minute) {
		t.Fatalf("docs/protocol.md: the example's stamp %d is not older than a day: the example's window would still be open", stamp)
	}

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "root.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(srv.RootKey())), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseServeConfig([]string{
		"--data", filepath.Join(dir, "data"), "--instance", "readme", "--http", "127.0.0.1:0",
		"--ic-url", srv.URL(), "--root-key-file", keyFile,
		"--ledgers-file", ledgersExamplePath, "--strict-ledgers",
	}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := srv.NewAgent(nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(ctx, cfg.Config, daemon.Options{Agent: ag,
		Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		d.Shutdown(sctx)
	}()

	// What the `nats` CLI does, with nats.go on a plain connection.
	nc, err := nats.Connect("", nats.InProcessServer(d.Embedded().Server()), nats.Name("readme-cli"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	verdicts, err := nc.SubscribeSync(ex.subVerdicts) // nats sub …verdicts…
	if err != nil {
		t.Fatal(err)
	}
	rejects, err := nc.SubscribeSync(ex.subRejects) // nats sub …rejects…
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		t.Fatal(err)
	}

	req := func() (ack struct {
		Stream    string `json:"stream"`
		Seq       uint64 `json:"seq"`
		Duplicate bool   `json:"duplicate"`
	}) {
		t.Helper()
		msg := nats.NewMsg(ex.reqSubject) // nats req <subject> --header Nats-Msg-Id:<id> "$(cat intent.json)"
		msg.Header.Set("Nats-Msg-Id", ex.msgID)
		msg.Data = ex.intent
		reply, err := nc.RequestMsgWithContext(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(reply.Data, &ack); err != nil {
			t.Fatalf("acknowledgement %q: %v", reply.Data, err)
		}
		return ack
	}
	ack := req()
	if ack.Stream != queue.IntentsStream || ack.Seq == 0 || ack.Duplicate {
		t.Fatalf("first publication acknowledged as %+v", ack)
	}

	m, err := verdicts.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatalf("no verdict on %s: %v", ex.subVerdicts, err)
	}
	var v reconciled.Verdict
	if err := decodeStrict(m.Data, &v); err != nil {
		t.Fatalf("verdict %s: %v", m.Data, err)
	}
	t.Logf("verdict on %s: %s", m.Subject, m.Data)
	// The example's stamp lies more than TW+D (24h+2m, from the example
	// ledgers file) before the ledger's certified time, and no block
	// matches: a final absent, the only verdict that allows a re-stamp.
	if v.IntentID != doc.IntentID || v.Seq != 1 || v.Status != reconciled.StatusAbsent || !v.Final || v.Block != nil {
		t.Fatalf("verdict %s", m.Data)
	}
	if v.Window == nil || uint64(v.Window.FromTS) != stamp-uint64(2*time.Minute) ||
		uint64(v.Window.ToTS) != stamp+uint64(24*time.Hour+2*time.Minute) {
		t.Fatalf("window %+v, want [stamp-2m, stamp+24h+2m] from the example ledgers file", v.Window)
	}
	if v.Evidence == nil || v.Evidence.Verified != "certificate+chain" || v.Evidence.CertifiedTime == nil ||
		uint64(*v.Evidence.CertifiedTime) <= uint64(v.Window.ToTS) {
		t.Fatalf("evidence %+v: want a certified time past the window", v.Evidence)
	}
	// The verdict example of docs/protocol.md shows this decision.
	if v.IntentHash != in.HashHex() {
		t.Fatalf("verdict intent_hash %q, want the example's %s", v.IntentHash, in.HashHex())
	}
	if documented.Status != v.Status || documented.Final != v.Final || documented.IntentID != v.IntentID ||
		documented.IntentHash != v.IntentHash ||
		documented.Window == nil || documented.Window.FromTS != v.Window.FromTS || documented.Window.ToTS != v.Window.ToTS {
		t.Errorf("docs/protocol.md: the verdict example (%s, window %+v) differs from the verdict the example gets:\n%s",
			documented.Status, documented.Window, m.Data)
	}

	// nats stream get RECONCILE_VERDICTS --last-for reconcile.verdicts.<id>
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, ex.getStream)
	if err != nil {
		t.Fatal(err)
	}
	// A core subscriber can see the verdict before the stream has stored
	// it: read until the stream holds it.
	var last *jetstream.RawStreamMsg
	for tick := time.NewTicker(5 * time.Millisecond); ; <-tick.C {
		if last, err = st.GetLastMsgForSubject(ctx, ex.getLastFor); !errors.Is(err, jetstream.ErrMsgNotFound) || ctx.Err() != nil {
			tick.Stop()
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(last.Data, m.Data) {
		t.Fatalf("stream get --last-for returned %s, the subscription %s", last.Data, m.Data)
	}

	// Publishing the same intent again within the dedup window is
	// acknowledged as a duplicate and changes nothing.
	if again := req(); !again.Duplicate || again.Seq != ack.Seq {
		t.Fatalf("re-publication acknowledged as %+v, want a duplicate of seq %d", again, ack.Seq)
	}
	if r, err := rejects.NextMsg(0); err == nil {
		t.Fatalf("unexpected reject %s", r.Data)
	}

	checkReadmeMetrics(t, ctx, readDoc(t, opsDocPath), d)
}

var metricRowRE = regexp.MustCompile("(?m)^\\| `(reconciled_[a-z_]+)` \\| (counter|gauge|histogram) \\|")

// checkReadmeMetrics holds the metrics table of docs/operations.md to what
// the daemon exposes: every counter the service defines plus what /metrics renders
// once a ledger has been read.
func checkReadmeMetrics(t *testing.T, ctx context.Context, readme string, d *daemon.Daemon) {
	t.Helper()
	var out strings.Builder
	if err := d.WriteMetrics(ctx, &out); err != nil {
		t.Fatal(err)
	}
	code := map[string]string{}
	for name := range reconcile.MetricHelp {
		code[name] = "counter"
		if reconcile.MetricGauges[name] {
			code[name] = "gauge"
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			// The standard Go runtime and process collectors are
			// documented by prefix, not one row each.
			if p, _, _ := strings.Cut(f[2], "_"); p == "go" || p == "process" {
				if !strings.Contains(readme, "`"+p+"_*`") {
					t.Errorf("metric %s: docs/operations.md does not mention `%s_*`", f[2], p)
				}
				continue
			}
			code[f[2]] = f[3]
		}
	}
	documented := map[string]string{}
	for _, m := range metricRowRE.FindAllStringSubmatch(readme, -1) {
		documented[m[1]] = m[2]
	}
	names := make([]string, 0, len(code))
	for n := range code {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if documented[n] != code[n] {
			t.Errorf("metric %s (%s) is documented as %q", n, code[n], documented[n])
		}
		delete(documented, n)
	}
	for n := range documented {
		t.Errorf("docs/operations.md documents metric %s, which the daemon does not expose", n)
	}
}

// TestReadmeExamplesAreTheContract: the README's short form of the wire
// contract shows the intent docs/protocol.md runs, and a verdict that decodes
// as one (no field the contract lacks).
func TestReadmeExamplesAreTheContract(t *testing.T) {
	readme := readDoc(t, readmePath)
	ex := parseNATSExample(t, readDoc(t, wireDocPath))
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(readme, -1)
	if len(blocks) != 2 {
		t.Fatalf("README: %d json blocks, want the intent and the verdict", len(blocks))
	}
	if blocks[0][1] != string(ex.intent)+"\n" {
		t.Errorf("README: the intent example differs from docs/protocol.md's:\n%s", blocks[0][1])
	}
	var v reconciled.Verdict
	if err := decodeStrict([]byte(blocks[1][1]), &v); err != nil {
		t.Errorf("README: the verdict example does not decode as a verdict: %v", err)
	}
	if v.IntentID != "p1-3f2a" || v.Status != reconciled.StatusFound || !v.Final || v.Block == nil {
		t.Errorf("README: the verdict example is %+v, want a final found verdict of the example intent", v)
	}
}

// The README says how to get the binary before it first calls it.
func TestReadmeSaysHowToBuildTheBinary(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	first := strings.Index(readme, "reconciled serve")
	if first < 0 {
		t.Fatal("the README never runs reconciled serve")
	}
	for _, want := range []string{"go install github.com/reconciled/reconciled/cmd/reconciled@", "go build -o reconciled ./cmd/reconciled"} {
		if i := strings.Index(readme, want); i < 0 || i > first {
			t.Errorf("the README does not say %q before it first runs the binary", want)
		}
	}
}

var (
	localSedRE = regexp.MustCompile(`(?m)^sed -e "s/(\S+)/\$TESTLEDGER_LEDGER/" -e 's/"([A-Za-z0-9_-]+)"/"([A-Za-z0-9_-]+)"/' intent\.json > local\.json$`)
	localReqRE = regexp.MustCompile(`(?m)^nats req "(\S+)\$TESTLEDGER_LEDGER" --header "Nats-Msg-Id:\$\(reconciled intent-hash --msg-id local\.json\)" "\$\(cat local\.json\)"$`)
)

// TestReadmeLocalNATSExample runs the local variant of docs/protocol.md's NATS
// example against a daemon reading a test ledger (which hosts no ledger
// under the example's mainnet id): the example's body is unreadable
// E_UNKNOWN_CANISTER there; edited as the page edits it, under the
// example's header it is dropped as a duplicate of the example, and under
// the header intent-hash prints it gets its verdict, absent. The edit gives
// it a new intent id: the example's is its body's once it reached the
// daemon.
func TestReadmeLocalNATSExample(t *testing.T) {
	readme := readDoc(t, wireDocPath)
	ex := parseNATSExample(t, readme)
	sed, req := localSedRE.FindStringSubmatch(readme), localReqRE.FindStringSubmatch(readme)
	if sed == nil || req == nil {
		t.Fatalf("docs/protocol.md: the local variant's sed or nats req line is missing (%q %q)", sed, req)
	}
	var doc struct {
		IntentID   string `json:"intent_id"`
		CanisterID string `json:"canister_id"`
	}
	if err := json.Unmarshal(ex.intent, &doc); err != nil {
		t.Fatal(err)
	}
	if sed[1] != doc.CanisterID || sed[2] != doc.IntentID || sed[3] == doc.IntentID {
		t.Fatalf("docs/protocol.md: the local variant replaces %s and %s by %s; the example's canister is %s, its id %s",
			sed[1], sed[2], sed[3], doc.CanisterID, doc.IntentID)
	}
	localID := sed[3]
	subj, err := queue.NewSubjects(queue.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	localVerdicts, _ := subj.Verdict(localID)
	localRejects, _ := subj.Reject(localID)
	for _, s := range []string{localVerdicts, localRejects} {
		if !strings.Contains(readme, "\nnats sub "+s+" &\n") {
			t.Errorf("docs/protocol.md: the local variant does not follow %s", s)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(6))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ledger, err := srv.NewLedger(ledgertest.LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	local := ledger.ID().Encode()
	body := bytes.ReplaceAll(ex.intent, []byte(sed[1]), []byte(local)) // sed -e "s/…/$TESTLEDGER_LEDGER/"
	body = bytes.ReplaceAll(body, []byte(`"`+sed[2]+`"`), []byte(`"`+localID+`"`))
	if want, _ := subj.Intent(local); req[1]+local != want {
		t.Fatalf("docs/protocol.md: the local variant publishes to %s$TESTLEDGER_LEDGER, want %s", req[1], want)
	}
	file := filepath.Join(t.TempDir(), "local.json")
	writeFile(t, file, body)
	code, out, errOut := runCLI(t, nil, "intent-hash", "--msg-id", file) // $(reconciled intent-hash --msg-id local.json)
	if code != 0 {
		t.Fatalf("intent-hash: exit %d: %s", code, errOut)
	}
	msgID := strings.TrimSpace(out)
	if msgID == ex.msgID || msgID != queue.IntentMsgID(localID, matcher.IntentHash(body)) {
		t.Fatalf("intent-hash --msg-id local.json = %s; the example's is %s", msgID, ex.msgID)
	}

	// reconciled serve --ic-url "$TESTLEDGER_URL" --fetch-root-key, no ledgers file.
	dir := t.TempDir()
	cfg, err := parseServeConfig([]string{"--data", filepath.Join(dir, "data"), "--instance", "local", "--http", "127.0.0.1:0",
		"--ic-url", srv.URL(), "--fetch-root-key"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := srv.NewAgent(nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(ctx, cfg.Config, daemon.Options{Agent: ag, Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		d.Shutdown(sctx)
	}()
	nc, err := nats.Connect("", nats.InProcessServer(d.Embedded().Server()), nats.Name("readme-cli"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	verdicts, err := nc.SubscribeSync(ex.subVerdicts)
	if err != nil {
		t.Fatal(err)
	}
	localSub, err := nc.SubscribeSync(localVerdicts)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	publish := func(subject, id string, data []byte) (duplicate bool) {
		t.Helper()
		msg := nats.NewMsg(subject)
		msg.Header.Set("Nats-Msg-Id", id)
		msg.Data = data
		reply, err := nc.RequestMsgWithContext(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		var ack struct {
			Seq       uint64 `json:"seq"`
			Duplicate bool   `json:"duplicate"`
		}
		if err := json.Unmarshal(reply.Data, &ack); err != nil || ack.Seq == 0 {
			t.Fatalf("acknowledgement %s: %v", reply.Data, err)
		}
		return ack.Duplicate
	}
	next := func(sub *nats.Subscription) reconciled.Verdict {
		t.Helper()
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatalf("no verdict: %v", err)
		}
		var v reconciled.Verdict
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	// The example as written, against this daemon.
	if publish(ex.reqSubject, ex.msgID, ex.intent) {
		t.Fatal("the example's first publication was a duplicate")
	}
	if v := next(verdicts); v.Status != reconciled.StatusUnreadable || v.Reason == nil || v.Reason.Code != "E_UNKNOWN_CANISTER" {
		t.Fatalf("the mainnet example against a test ledger: %s %+v, want unreadable E_UNKNOWN_CANISTER", v.Status, v.Reason)
	}
	// The edited body under the example's header: dropped by the stream.
	if !publish(req[1]+local, ex.msgID, body) {
		t.Fatal("the edited body under the example's Nats-Msg-Id was not dropped as a duplicate")
	}
	// Under its own header: decided.
	if publish(req[1]+local, msgID, body) {
		t.Fatal("the edited body under its own Nats-Msg-Id was a duplicate")
	}
	in, err := matcher.ParseIntent(body)
	if err != nil {
		t.Fatal(err)
	}
	if v := next(localSub); v.IntentHash != in.HashHex() || v.Status != reconciled.StatusAbsent || !v.Final {
		t.Fatalf("the local body's verdict: %s final=%t %+v", v.Status, v.Final, v.Reason)
	}
}
