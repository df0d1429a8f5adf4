package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A configured tw or drift narrower than the DFINITY ICRC ledger's own
// (24 h, 60 s) closes windows early, which turns a late execution into a
// wrong absent: refused unless the operator says the ledger is that narrow.
func TestLedgerConfigRefusesNarrowWindow(t *testing.T) {
	const id = "mxzaz-hqaaa-aaaar-qaada-cai"
	for _, tc := range []struct{ spec, want string }{
		{id + ",tw=1h", "tw 1h0m0s is narrower"},
		{id + ",drift=30s", "drift 30s is narrower"},
		{id + ",tw=23h59m,drift=2m", "tw 23h59m0s is narrower"},
		{id + ",tw=1h,allow_narrow_window=maybe", "allow_narrow_window"},
	} {
		_, err := parseServeConfig([]string{"--ledger", tc.spec, "--instance", "x"}, env(nil), io.Discard)
		if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--ledger %s: %v, want a usage error mentioning %q", tc.spec, err, tc.want)
		}
	}
	c, err := parseServeConfig([]string{"--ledger", id + ",tw=1h,drift=10s,allow_narrow_window=true", "--instance", "x"}, env(nil), io.Discard)
	if err != nil {
		t.Fatalf("explicit override: %v", err)
	}
	if r := c.Ledgers[id]; r.TW != time.Hour || r.Drift != 10*time.Second || !r.AllowNarrowWindow {
		t.Fatalf("override rules %+v", r)
	}
	if _, err := parseServeConfig([]string{"--ledger", id + ",tw=24h,drift=60s", "--instance", "x"}, env(nil), io.Discard); err != nil {
		t.Fatalf("the family's own window: %v", err)
	}

	dir := t.TempDir()
	file := func(body string) string {
		p := filepath.Join(dir, "ledgers.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	_, err = parseServeConfig([]string{"--ledgers-file", file(`[{"canister_id":"` + id + `","drift":"59s"}]`), "--instance", "x"}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "drift 59s is narrower") {
		t.Errorf("ledgers file with a narrow drift: %v", err)
	}
	c, err = parseServeConfig([]string{"--ledgers-file", file(`[{"canister_id":"` + id + `","tw":"2h","allow_narrow_window":true}]`), "--instance", "x"}, env(nil), io.Discard)
	if err != nil || c.Ledgers[id].TW != 2*time.Hour {
		t.Errorf("ledgers file with the override: %+v %v", c, err)
	}
}
