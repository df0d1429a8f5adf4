package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
)

func TestAskRefusesInvalidIntentLocally(t *testing.T) {
	f := filepath.Join(t.TempDir(), "intent.json")
	if err := os.WriteFile(f, []byte(`{"intent_id":"x","canister_id":"mxzaz-hqaaa-aaaar-qaada-cai"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// No NATS server is contacted: the refusal comes first.
	code := run([]string{"ask", "--nats-url", "nats://127.0.0.1:1", f}, &out, io.Discard)
	if code != 2 || !strings.HasPrefix(out.String(), "refused E_") {
		t.Fatalf("exit %d, output %q", code, out.String())
	}
}

func TestAskPrintsVerdictsUntilFinal(t *testing.T) {
	w := newWorld(t)
	alice, bob := w.user(1), w.user(2)
	l := w.ledger(ledgertest.LedgerConfig{InitialBalances: funded(alice.Principal())})
	d := w.daemon("ask", t.TempDir(), 20*time.Millisecond)
	defer stop(d, time.Second)

	arg := transferArg(bob.Principal(), 42, u64(w.srv.Now()), "ask")
	doc := toollayer.Transfer("ask-1", l.ID(), alice.Principal(), arg)
	in, err := matcher.ParseIntent(doc.JSON())
	if err != nil {
		t.Fatal(err)
	}
	// Open window, never executed: ask times out after the not_yet.
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Second)
	err = askAndPrint(ctx, w.tool, in, doc.JSON(), &out)
	cancel()
	if !errors.Is(err, errTimeout) || !strings.Contains(out.String(), "seq=1 status=not_yet final=false") {
		t.Fatalf("open intent: %v, output %q", err, out.String())
	}
	// It executes; asking again follows it to the final verdict.
	idx, err := l.Transfer(alice.Principal(), arg)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := askAndPrint(w.ctx, w.tool, in, doc.JSON(), &out); err != nil {
		t.Fatalf("%v, output %q", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	if want := "status=found final=true block=" + strconv.FormatUint(idx, 10); !strings.Contains(last, want) {
		t.Fatalf("last line %q, want %q", last, want)
	}

}

// An intent larger than the fleet's limit is refused before anything is
// published: the daemon would refuse it, and ask would wait for nothing.
func TestAskRefusesOversizedIntentLocally(t *testing.T) {
	body, err := os.ReadFile("../../testdata/intents/valid_transfer.json")
	if err != nil {
		t.Fatal(err)
	}
	// Whitespace keeps it a valid intent, 41 KiB long.
	body = append(bytes.TrimRight(body, "\n}"), []byte(strings.Repeat(" ", 41<<10-len(body))+"}")...)
	if _, err := matcher.ParseIntent(body); err != nil {
		t.Fatalf("padded intent does not parse: %v", err)
	}
	f := filepath.Join(t.TempDir(), "intent.json")
	if err := os.WriteFile(f, body, 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run([]string{"ask", "--nats-url", "nats://127.0.0.1:1", "--timeout", "2s", f}, io.Discard, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "larger than") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
