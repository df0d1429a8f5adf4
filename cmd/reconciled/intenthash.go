package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

func init() {
	register(command{
		Name:    "intent-hash",
		Summary: "print an intent's intent_hash, the Nats-Msg-Id to publish it with, and its subject",
		Run:     runIntentHash,
	})
}

func runIntentHash(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("intent-hash", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: reconciled intent-hash [--msg-id] [--subject-prefix P] FILE|-")
		fs.PrintDefaults()
	}
	msgID := fs.Bool("msg-id", false, "print only the Nats-Msg-Id header's value, for scripts")
	prefix := fs.String("subject-prefix", queue.DefaultPrefix, "first token of every subject (the daemon's --subject-prefix)")
	if err := parseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want exactly one FILE or -", errUsage)
	}
	subj, err := queue.NewSubjects(*prefix)
	if err != nil {
		return fmt.Errorf("%w: --subject-prefix: %v", errUsage, err)
	}
	body, err := readIntentArg(fs.Arg(0))
	if err != nil {
		return err
	}
	// A body the daemon would answer invalid has no use for a dedup id:
	// say why, as ask does, rather than print one.
	in, err := matcher.ParseIntent(body)
	if err != nil {
		var me *matcher.Error
		if errors.As(err, &me) {
			fmt.Fprintf(stdout, "refused %s %s %s\n", safeText(me.Code), safeText(me.Field), safeText(me.Message))
		}
		return fmt.Errorf("%w: the daemon would answer this intent invalid: %v", errUsage, err)
	}
	id := queue.IntentMsgID(in.ID, matcher.IntentHash(body))
	if *msgID {
		_, err = fmt.Fprintln(stdout, id)
		return err
	}
	subject, err := subj.Intent(in.Canister.Encode())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "intent_hash  %s\nNats-Msg-Id  %s\nsubject      %s\n", in.HashHex(), id, subject)
	return err
}
