package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestRunExitStatus(t *testing.T) {
	var ret error
	a := &App{Name: "x", Hint: func(n string) string {
		if n == "old" {
			return "moved"
		}
		return ""
	}}
	a.Register(Command{Name: "c", Summary: "a command", Run: func(context.Context, []string, io.Writer, io.Writer) error { return ret }})
	for _, c := range []struct {
		args []string
		err  error
		code int
		out  string
	}{
		{[]string{"c"}, nil, 0, ""},
		{[]string{"c"}, flag.ErrHelp, 0, ""},
		{[]string{"c"}, errors.New("boom"), 1, "x c: boom"},
		{[]string{"c"}, ParseFlags(flag.NewFlagSet("c", flag.ContinueOnError), []string{"--nope"}), 2, "flag provided but not defined"},
		{[]string{"c"}, WithExitCode(3, errors.New("late")), 3, "x c: late"},
		{[]string{"old"}, nil, 2, "x: moved"},
		{nil, nil, 2, ""},
	} {
		ret = c.err
		var stderr bytes.Buffer
		if got := a.Run(c.args, io.Discard, &stderr); got != c.code || !strings.Contains(stderr.String(), c.out) {
			t.Errorf("Run(%q) with %v = %d, stderr %q; want %d containing %q", c.args, c.err, got, stderr.String(), c.code, c.out)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "0.0.0.0:1": false, "10.0.0.1:1": false, "example:1": false, "nohost": false} {
		if err := LoopbackOnly(addr); (err == nil) != ok {
			t.Errorf("LoopbackOnly(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
}
