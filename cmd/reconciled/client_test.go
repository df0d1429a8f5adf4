package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

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

// runCLI runs a subcommand with the token in the environment.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	old := osGetenv
	osGetenv = func(k string) string { return env[k] }
	defer func() { osGetenv = old }()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestDump(t *testing.T) {
	_, srv := supportServer(t)
	env := map[string]string{"RECONCILED_TOKEN": cliToken}
	for _, args := range [][]string{
		{"get", "--server", srv.URL, supporttest.IDFound},
		{"get", "--server", srv.URL, supporttest.IDInvalid},
		{"list", "--server", srv.URL},
	} {
		code, out, errOut := runCLI(t, env, args...)
		t.Logf("%v -> %d\n%s\n%s", args, code, out, errOut)
	}
	_ = context.Background
	_ = strings.Contains
}
