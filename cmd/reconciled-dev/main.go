// Command reconciled-dev runs what is for trying reconciled out and for
// testing against it, on this machine only: the demo (everything in one
// process against a local test replica) and the local test ledger that
// integration tests and the walkthroughs serve. It links the test replica
// (ledgertest), whose keys derive from a public seed, so it is a command of
// its own: the production binary, cmd/reconciled, links none of it
// (internal/deptest holds that fence).
package main

import (
	"flag"
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/reconciled/reconciled/internal/cli"
)

// app holds the subcommands; each registers itself in init.
var app = &cli.App{Name: "reconciled-dev", About: "For trying reconciled out and testing against it, on this machine only."}

type command = cli.Command

func register(c command) { app.Register(c) }

// errUsage marks errors whose message is a usage problem (exit code 2).
var errUsage = cli.ErrUsage

func parseFlags(fs *flag.FlagSet, args []string) error { return cli.ParseFlags(fs, args) }

// newLogger writes JSON lines at level to w.
func newLogger(level zapcore.Level, w io.Writer) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), level))
}

func main() { app.Main() }

func run(args []string, stdout, stderr io.Writer) int { return app.Run(args, stdout, stderr) }
