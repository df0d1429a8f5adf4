package main

import (
	"bytes"
	"strings"
	"testing"
)

// The demo and the test ledger live in cmd/reconciled-dev: whoever still
// asks this binary for them is told where they went, with a usage exit.
func TestDemoAndTestLedgerSayWhereTheyWent(t *testing.T) {
	for _, args := range [][]string{{"demo"}, {"testledger", "--listen", "127.0.0.1:0"}, {"serve", "--demo"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("reconciled %s: exit %d, want 2\n%s", strings.Join(args, " "), code, errOut.String())
		}
		if !strings.Contains(errOut.String(), "go run ./cmd/reconciled-dev demo") {
			t.Errorf("reconciled %s does not say where the demo went:\n%s", strings.Join(args, " "), errOut.String())
		}
	}
}
