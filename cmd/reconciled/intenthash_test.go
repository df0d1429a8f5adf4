package main

import (
	"os"
	"strings"
	"testing"

	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

// TestIntentHashCommand: `reconciled intent-hash FILE` (or - for stdin)
// prints the intent_hash the daemon computes for a body and the
// Nats-Msg-Id to publish it with, and --msg-id the header value alone.
func TestIntentHashCommand(t *testing.T) {
	ex := parseNATSExample(t, readDoc(t, wireDocPath))
	in, err := matcher.ParseIntent(ex.intent)
	if err != nil {
		t.Fatal(err)
	}
	file := t.TempDir() + "/intent.json"
	writeFile(t, file, ex.intent)
	want := "intent_hash  " + in.HashHex() + "\nNats-Msg-Id  " + queue.IntentMsgID(in.ID, matcher.IntentHash(ex.intent)) + "\nsubject      reconcile.intents." + in.Canister.Encode() + "\n"

	code, out, errOut := runCLI(t, nil, "intent-hash", file)
	if code != 0 {
		t.Fatalf("intent-hash FILE: exit %d: %s", code, errOut)
	}
	diff(t, "intent-hash FILE", out, want)

	old := askStdin
	defer func() { askStdin = old }()
	askStdin = strings.NewReader(string(ex.intent))
	code, out, errOut = runCLI(t, nil, "intent-hash", "--msg-id", "-")
	if code != 0 || out != ex.msgID+"\n" {
		t.Errorf("intent-hash --msg-id -: exit %d, %q %s; want the README's %s", code, out, errOut, ex.msgID)
	}

	// A body the daemon would answer invalid is refused with its reason.
	writeFile(t, file, []byte(strings.Replace(string(ex.intent), `"created_at_time": "1791547201000000000"`, `"created_at_time": null`, 1)))
	code, out, errOut = runCLI(t, nil, "intent-hash", file)
	if code != 2 || !strings.Contains(out, "refused E_NO_STAMP") {
		t.Errorf("intent-hash of an invalid intent: exit %d, %q %q", code, out, errOut)
	}
	if code, _, _ := runCLI(t, nil, "intent-hash"); code != 2 {
		t.Errorf("intent-hash without FILE: exit %d, want 2", code)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
