package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/queue"
)

// withCommand registers a command for one test.
func withCommand(t *testing.T, name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	t.Helper()
	if app.Has(name) {
		t.Fatalf("command %s exists", name)
	}
	register(command{Name: name, Summary: "test", Run: run})
	t.Cleanup(func() { app.Unregister(name) })
}

func TestRunExitCodes(t *testing.T) {
	var ret error
	withCommand(t, "exit-test", func(context.Context, []string, io.Writer, io.Writer) error { return ret })
	for _, c := range []struct {
		err  error
		code int
		msg  string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{errors.New("boom"), 1, "reconciled exit-test: boom\n"},
		{fmt.Errorf("%w: want one FILE", errUsage), 2, "reconciled exit-test: usage: want one FILE\n"},
		{withExitCode(3, errors.New("no final verdict")), 3, "reconciled exit-test: no final verdict\n"},
		// Wrapped further, the code still comes through, and it wins over
		// the usage mark it wraps.
		{fmt.Errorf("ask: %w", withExitCode(4, fmt.Errorf("%w: x", errUsage))), 4, "reconciled exit-test: ask: usage: x\n"},
		// Code 0 carries no meaning of its own: the error still fails.
		{withExitCode(0, errors.New("odd")), 1, "reconciled exit-test: odd\n"},
	} {
		ret = c.err
		var stderr bytes.Buffer
		if code := run([]string{"exit-test"}, io.Discard, &stderr); code != c.code || stderr.String() != c.msg {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", c.err, code, stderr.String(), c.code, c.msg)
		}
	}
	if code := run([]string{"no-such-command"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
}

// ask ends with exit code 3 when no final verdict comes in time, through
// run, without ending the test process.
func TestAskTimeoutExitCode(t *testing.T) {
	emb, err := queue.StartEmbedded(queue.EmbeddedConfig{DataDir: filepath.Join(t.TempDir(), "nats"), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := queue.Connect(ctx, queue.ConnConfig{Embedded: emb, Name: "setup"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	// No daemon consumes it: no verdict ever comes.
	ledger := principal.MustDecode("mxzaz-hqaaa-aaaar-qaada-cai")
	caller := principal.MustDecode("xevnm-gaaaa-aaaar-qafnq-cai")
	doc := toollayer.Transfer("exit-3", ledger, caller, transferArg(caller, 5, u64(uint64(time.Now().UnixNano())), ""))
	f := filepath.Join(t.TempDir(), "intent.json")
	if err := os.WriteFile(f, doc.JSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run([]string{"ask", "--nats-url", emb.ClientURL(), "--timeout", "300ms", f}, io.Discard, &stderr)
	if code != 3 || !strings.Contains(stderr.String(), errTimeout.Error()) {
		t.Fatalf("exit %d, stderr %q; want 3 and a timeout", code, stderr.String())
	}
}
