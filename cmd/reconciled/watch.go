package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/support"
)

func init() {
	register(command{
		Name:    "watch",
		Summary: "print verdicts as they arrive, by polling the support API",
		Run:     runWatch,
	})
}

func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: reconciled watch [--status S[,S…]] [--interval 2s] [--json]")
		fs.PrintDefaults()
	}
	client := clientFlags(fs, osGetenv)
	status := fs.String("status", "", "print only verdicts with these statuses (comma-separated)")
	interval := fs.Duration("interval", 2*time.Second, "time between polls")
	asJSON := fs.Bool("json", false, "print each verdict as a JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *interval < 100*time.Millisecond {
		return fmt.Errorf("%w: --interval %s is below 100ms", errUsage, *interval)
	}
	w := &watcher{json: *asJSON, out: stdout, errOut: stderr}
	if *status != "" {
		st, err := support.ParseStatuses(*status)
		if err != nil {
			return fmt.Errorf("%w: --status: %v", errUsage, err)
		}
		w.statuses = st
	}
	c, err := client()
	if err != nil {
		return err
	}
	w.c = c
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	fmt.Fprintf(stderr, "watching %s every %s (interrupt to stop)\n", c.base.Redacted(), *interval)
	return w.run(ctx, tick.C)
}

// watcher polls the intent listing and prints every verdict it has not
// printed yet. The listing carries each intent's latest seq, so one pass
// over it finds what changed; only changed intents are fetched in full.
type watcher struct {
	c        *apiClient
	statuses []reconciled.Status
	json     bool
	out      io.Writer
	errOut   io.Writer
	// seen is the latest seq known per intent; absent before the first
	// poll that listed it.
	seen map[string]uint64
	// polled, when set, is called after each poll (tests).
	polled func()
}

func (w *watcher) run(ctx context.Context, tick <-chan time.Time) error {
	// The first poll only learns the current state: watch prints what
	// arrives from now on.
	first := true
	for {
		err := w.poll(ctx, first)
		switch {
		case err == nil:
			first = false
		case ctx.Err() != nil:
			return nil
		case isAuth(err):
			return err
		default:
			// A restarting daemon or a dropped connection: keep going.
			fmt.Fprintf(w.errOut, "watch: %s (retrying)\n", safeText(err.Error()))
		}
		if w.polled != nil {
			w.polled()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
	}
}

func (w *watcher) poll(ctx context.Context, baseline bool) error {
	items, err := w.c.listAll(ctx, url.Values{}, 0)
	if err != nil {
		return err
	}
	if w.seen == nil {
		w.seen = map[string]uint64{}
	}
	for _, it := range items {
		known, ok := w.seen[it.IntentID]
		if baseline || it.LatestSeq <= known {
			w.seen[it.IntentID] = max(known, it.LatestSeq)
			continue
		}
		var d support.Detail
		if err := w.c.get(ctx, "/api/v1/intents/"+it.IntentID, nil, &d); err != nil {
			return fmt.Errorf("get %s: %w", it.IntentID, err)
		}
		for _, v := range d.Verdicts {
			// An intent that appeared after the first poll is new: all its
			// verdicts arrived while watching.
			if ok && v.Seq <= known {
				continue
			}
			if err := w.print(v); err != nil {
				return err
			}
		}
		w.seen[it.IntentID] = max(known, d.LatestSeq, it.LatestSeq)
	}
	return nil
}

func (w *watcher) print(v reconciled.Verdict) error {
	if len(w.statuses) > 0 && !slices.Contains(w.statuses, v.Status) {
		return nil
	}
	if w.json {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode verdict %s/%d: %w", v.IntentID, v.Seq, err)
		}
		_, err = fmt.Fprintf(w.out, "%s\n", safeJSON(b))
		return err
	}
	_, err := fmt.Fprintf(w.out, "%s  %s  #%d  %s  %s\n", utc(v.DecidedAt), safeText(v.IntentID), v.Seq, safeText(string(v.Status)),
		safeText(support.Advice(&v)))
	return err
}
