// Command reconciled settles unknown outcomes of payments on Internet
// Computer ICRC ledgers. See README.md.
package main

import (
	"flag"
	"io"

	"github.com/reconciled/reconciled/internal/cli"
)

// app holds the subcommands. Each lives in its own file and registers
// itself in init, so subcommands stay independent of each other.
var app = &cli.App{
	Name:  "reconciled",
	Quote: safeText,
	Hint: func(name string) string {
		if name == "demo" || name == "testledger" {
			return demoMoved
		}
		return ""
	},
}

type command = cli.Command

func register(c command) { app.Register(c) }

// errUsage marks errors whose message is a usage problem (exit code 2).
var errUsage = cli.ErrUsage

func parseFlags(fs *flag.FlagSet, args []string) error { return cli.ParseFlags(fs, args) }

// withExitCode makes err end the process with code, where 1 would hide
// something the caller acts on (ask's timeout: the intent may still be
// open).
func withExitCode(code int, err error) error { return cli.WithExitCode(code, err) }

func main() { app.Main() }

func run(args []string, stdout, stderr io.Writer) int { return app.Run(args, stdout, stderr) }
