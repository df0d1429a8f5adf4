package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/reconciled/reconciled/queue"
)

func init() {
	register(command{
		Name:    "migrate-intents",
		Summary: "move a work-queue intent stream to limits retention (fleet stopped, no intent open)",
		Run:     runMigrateIntents,
	})
}

func runMigrateIntents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate-intents", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: reconciled migrate-intents --nats-url URL [--subject-prefix P] [--nats-creds FILE | --nats-token T]")
		fmt.Fprintf(stderr, "Deletes %s and creates it again with limits retention, refusing while it holds any intent.\n", queue.IntentsStream)
		fmt.Fprintln(stderr, "Stop every instance first; start them again afterwards.")
		fs.PrintDefaults()
	}
	conn := natsFlags(fs, "reconciled-migrate-intents")
	timeout := fs.Duration("timeout", 30*time.Second, "bound of the whole move")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	cfg, err := conn()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := queue.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	moved, err := c.MoveIntentsToLimits(ctx)
	if err != nil {
		return err
	}
	if !moved {
		fmt.Fprintf(stdout, "%s already has limits retention: nothing to do\n", queue.IntentsStream)
		return nil
	}
	fmt.Fprintf(stdout, "%s now has limits retention; start the fleet\n", queue.IntentsStream)
	return nil
}
