// Command reconciled settles unknown outcomes of payments on Internet
// Computer ICRC ledgers. See README.md.
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
)

// command is one subcommand. Each lives in its own file and registers itself
// in init, so subcommands stay independent of each other.
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

// exitError carries the exit code a command's failure should end the
// process with, when 1 would hide something the caller acts on (ask's
// timeout: the intent may still be open).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withExitCode makes err end the process with code.
func withExitCode(code int, err error) error { return &exitError{code: code, err: err} }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: reconciled <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'reconciled <command> --help' for a command's flags.")
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
		fmt.Fprintf(stderr, "reconciled: unknown command %q\n", args[0])
		if args[0] == "demo" || args[0] == "testledger" {
			fmt.Fprintf(stderr, "reconciled: %s\n", demoMoved)
		}
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.run(ctx, args[1:], stdout, stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	// An error can quote what a server, a ledger or an intent said.
	fmt.Fprintf(stderr, "reconciled %s: %s\n", c.name, safeText(err.Error()))
	var ee *exitError
	switch {
	case errors.As(err, &ee) && ee.code != 0:
		return ee.code
	case errors.Is(err, errUsage):
		return 2
	default:
		return 1
	}
}
