// Package cli is the subcommand frame the project's binaries share: a set
// of named commands, their usage text, flag parsing whose failures are
// usage errors, and the exit status a command's error maps to (0 done or
// help, 2 usage, a code the command chose, else 1).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// ErrUsage marks errors whose message is a usage problem (exit status 2).
var ErrUsage = errors.New("usage")

// ParseFlags parses args into fs: a request for help comes back as
// flag.ErrHelp (exit 0, the usage already printed), any other failure as
// ErrUsage (exit 2).
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return nil
}

// exitError carries the exit status a command's failure ends the process
// with, where 1 would hide something the caller acts on.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// WithExitCode makes err end the process with code.
func WithExitCode(code int, err error) error { return &exitError{code: code, err: err} }

// App is a binary's set of subcommands.
type App struct {
	// Name is the binary's name, in usage and error lines.
	Name string
	// About, when set, is a line printed under the usage line.
	About string
	// Hint, when set, may return a line for an unknown command name (a
	// command that moved elsewhere).
	Hint func(name string) string
	// Quote, when set, renders an error's text for the terminal (an error
	// can quote what a server or an input said).
	Quote func(string) string

	commands map[string]Command
}

// Register adds c; a second command of the same name replaces the first.
func (a *App) Register(c Command) {
	if a.commands == nil {
		a.commands = map[string]Command{}
	}
	a.commands[c.Name] = c
}

// Unregister removes the command name (for tests that add one).
func (a *App) Unregister(name string) { delete(a.commands, name) }

// Has reports whether a command name is registered.
func (a *App) Has(name string) bool { _, ok := a.commands[name]; return ok }

// Usage writes the usage text and the command list to w.
func (a *App) Usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n", a.Name)
	if a.About != "" {
		fmt.Fprintf(w, "\n%s\n", a.About)
	}
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(a.commands))
	for n := range a.commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, a.commands[n].Summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> --help' for a command's flags.\n", a.Name)
}

// Main runs the command os.Args names and exits with its status.
func (a *App) Main() { os.Exit(a.Run(os.Args[1:], os.Stdout, os.Stderr)) }

// Run runs the command args[0] names with the rest of args, until it
// returns or SIGINT/SIGTERM cancels its context, and returns the exit
// status.
func (a *App) Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		a.Usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := a.commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q\n", a.Name, args[0])
		if a.Hint != nil {
			if h := a.Hint(args[0]); h != "" {
				fmt.Fprintf(stderr, "%s: %s\n", a.Name, h)
			}
		}
		a.Usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.Run(ctx, args[1:], stdout, stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	msg := err.Error()
	if a.Quote != nil {
		msg = a.Quote(msg)
	}
	fmt.Fprintf(stderr, "%s %s: %s\n", a.Name, c.Name, msg)
	var ee *exitError
	switch {
	case errors.As(err, &ee) && ee.code != 0:
		return ee.code
	case errors.Is(err, ErrUsage):
		return 2
	default:
		return 1
	}
}

// LoopbackOnly refuses an address beyond this machine: a listener that
// must not be reachable from elsewhere takes a loopback host:port only.
func LoopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%q is not a loopback address", addr)
	}
	return nil
}
