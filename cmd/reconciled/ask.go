package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

func init() {
	register(command{
		Name:    "ask",
		Summary: "publish an intent and print its verdicts until a final one",
		Run:     runAsk,
	})
}

// errTimeout: no final verdict in time (exit 3).
var errTimeout = errors.New("no final verdict before the timeout")

// askStdin is where `ask -` and `intent-hash -` read; tests replace it.
var askStdin io.Reader = os.Stdin

func runAsk(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ask", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := natsFlags(fs, "reconciled-ask")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for a final verdict")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want exactly one FILE or -", errUsage)
	}
	connCfg, err := conn()
	if err != nil {
		return err
	}
	body, err := readIntentArg(fs.Arg(0))
	if err != nil {
		return err
	}
	in, err := matcher.ParseIntent(body)
	if err != nil {
		var me *matcher.Error
		if errors.As(err, &me) {
			fmt.Fprintf(stdout, "refused %s %s %s\n", safeText(me.Code), safeText(me.Field), safeText(me.Message))
		}
		return fmt.Errorf("%w: intent refused locally: %v", errUsage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := queue.Connect(ctx, connCfg)
	if err != nil {
		return err
	}
	err = askAndPrint(ctx, c, in, body, stdout)
	c.Close()
	if errors.Is(err, errTimeout) && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errors.New("interrupted before a final verdict")
	}
	if errors.Is(err, errTimeout) {
		// A timeout is a distinct answer (the intent may still be open):
		// scripts tell it from a failure by its exit code.
		return withExitCode(3, fmt.Errorf("%w (%s)", err, *timeout))
	}
	return err
}

// askAndPrint publishes an intent and prints every verdict (and reject) as
// it arrives until a final verdict (nil) or ctx ends (errTimeout).
//
// Only verdicts whose intent_hash is this body's answer it. A verdict of
// another body under the same id (the id was taken first by that body) is
// printed as "foreign" and never acted on: the daemon refuses this body
// with E_INTENT_CONFLICT, and ask fails with that reject.
func askAndPrint(ctx context.Context, c *queue.Conn, in *matcher.Intent, body []byte, stdout io.Writer) error {
	own := in.HashHex()
	// foreign: a verdict of another body was seen; answered: one of this
	// body's, which makes it the stored body, so a reject on the id is
	// about someone else's conflicting body, not this one.
	foreign, answered := false, false
	var mu sync.Mutex
	rejected := make(chan struct{})
	var once sync.Once
	if err := c.SubscribeRejects(ctx, in.ID, func(r queue.Reject) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(stdout, rejectLine(r))
		if !answered {
			once.Do(func() { close(rejected) })
		}
	}); err != nil {
		return err
	}
	if _, err := c.PublishIntent(ctx, in.Canister.Encode(), in.ID, body, matcher.IntentHash(body)); err != nil {
		return err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-rejected:
			stop()
		case <-wctx.Done():
		}
	}()
	err := c.WatchIntent(wctx, in.ID, func(v reconciled.Verdict) error {
		mu.Lock()
		defer mu.Unlock()
		if v.IntentHash != own {
			foreign = true
			fmt.Fprintf(stdout, "foreign %s intent_hash=%s, not this body's %s: refused\n", verdictLine(v), safeText(orNone(v.IntentHash)), own)
			return nil
		}
		answered = true
		fmt.Fprintln(stdout, verdictLine(v))
		if v.Final {
			return queue.ErrStop
		}
		return nil
	})
	mu.Lock()
	sawForeign := foreign
	mu.Unlock()
	select {
	case <-rejected:
		if sawForeign {
			return fmt.Errorf("intent %s refused: its id holds verdicts of another body", in.ID)
		}
		return fmt.Errorf("intent %s refused", in.ID)
	default:
	}
	if err != nil {
		if sawForeign && ctx.Err() != nil {
			// Not a timeout to wait out: this body can never be answered
			// under this id.
			return fmt.Errorf("intent %s: the verdict stream holds only verdicts of another body under this id (no reject seen before the deadline)", in.ID)
		}
		if ctx.Err() != nil {
			return errTimeout
		}
		return err
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// rejectLine: the reject's intent id, code and message.
func rejectLine(r queue.Reject) string {
	return fmt.Sprintf("reject %s %s %s", safeText(r.IntentID), safeText(r.Code), safeText(r.Message))
}

// verdictLine: seq, status, final, block, reason.
func verdictLine(v reconciled.Verdict) string {
	block, reason := "-", "-"
	if v.Block != nil {
		block = fmt.Sprint(uint64(v.Block.Index))
	}
	if v.Reason != nil {
		reason = v.Reason.Code
		if v.Reason.Field != "" {
			reason += "(" + v.Reason.Field + ")"
		}
	}
	return fmt.Sprintf("seq=%d status=%s final=%t block=%s reason=%s", v.Seq, safeText(string(v.Status)), v.Final, block, safeText(reason))
}

// readIntentArg reads the intent named on the command line (FILE, or - for
// standard input), refusing one larger than the fleet takes: the intent
// stream refuses it at publish, so a tool says so before it connects.
func readIntentArg(name string) ([]byte, error) {
	var body []byte
	var err error
	if name == "-" {
		body, err = io.ReadAll(io.LimitReader(askStdin, queue.MaxIntentBytes+1))
	} else {
		body, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read intent: %v", errUsage, err)
	}
	if len(body) > queue.MaxIntentBytes {
		return nil, fmt.Errorf("%w: intent of %d bytes is larger than the limit of %d bytes", errUsage, len(body), queue.MaxIntentBytes)
	}
	return body, nil
}
