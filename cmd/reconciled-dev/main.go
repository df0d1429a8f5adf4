// Command reconciled-dev runs what is for trying reconciled out and for
// testing against it, on this machine only: the demo (everything in one
// process against a local test replica) and the local test ledger that
// integration tests and the walkthroughs serve. It links the test replica
// (ledgertest), whose keys derive from a public seed, so it is a command of
// its own: the production binary, cmd/reconciled, links none of it
// (internal/deptest holds that fence).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// command is one subcommand; each registers itself in init.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

// errUsage marks errors whose message is a usage problem (exit code 2).
var errUsage = errors.New("usage")

// parseFlags parses args into fs: a request for help comes back as
// flag.ErrHelp (exit 0, the usage already printed), any other failure as
// errUsage (exit 2).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// newLogger writes JSON lines at level to w.
func newLogger(level zapcore.Level, w io.Writer) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), level))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: reconciled-dev <command> [flags]")
	fmt.Fprintln(w, "\nFor trying reconciled out and testing against it, on this machine only.")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'reconciled-dev <command> --help' for a command's flags.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "reconciled-dev: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.run(ctx, args[1:], stdout, stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "reconciled-dev %s: %v\n", c.name, err)
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}
