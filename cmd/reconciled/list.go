package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reconciled/reconciled/support"
)

func init() {
	register(command{
		Name:    "list",
		Summary: "list intents and their latest verdicts (support API)",
		Run:     runList,
	})
}

func runList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: reconciled list [--status S[,S…]] [--canister C] [--caller P] [--since T] [--open] [--newest] [--limit N] [--wide] [--json]")
		fs.PrintDefaults()
	}
	client := clientFlags(fs, osGetenv)
	status := fs.String("status", "", "keep these latest statuses: found, absent, not_yet, unreadable, invalid, none (comma-separated)")
	canister := fs.String("canister", "", "keep intents for this ledger canister")
	caller := fs.String("caller", "", "keep intents of this caller principal")
	since := fs.String("since", "", "keep intents first seen at or after this RFC 3339 time, or this long ago (24h)")
	open := fs.Bool("open", false, "keep intents without a final verdict")
	newest := fs.Bool("newest", false, "newest first (default oldest first)")
	limit := fs.Int("limit", 0, "print at most N intents (default all)")
	asJSON := fs.Bool("json", false, "print a JSON array of intents, for scripts")
	wide := fs.Bool("wide", false, "add the method, the caller and when each intent last changed (rows wider than 100 characters)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *limit < 0 {
		return fmt.Errorf("%w: --limit %d is negative", errUsage, *limit)
	}
	q := url.Values{}
	if *status != "" {
		if _, err := support.ParseStatuses(*status); err != nil {
			return fmt.Errorf("%w: --status: %v", errUsage, err)
		}
		q.Set("status", *status)
	}
	if *since != "" {
		// Resolved here, so "24h" means 24 hours before now on this
		// machine and every page uses the same instant.
		t, err := support.ParseSince(*since, time.Now())
		if err != nil {
			return fmt.Errorf("%w: --since: %v", errUsage, err)
		}
		q.Set("since", t.UTC().Format(time.RFC3339Nano))
	}
	for k, v := range map[string]string{"canister": *canister, "caller": *caller} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *open {
		q.Set("open", "1")
	}
	if *newest {
		q.Set("order", "newest")
	}
	c, err := client()
	if err != nil {
		return err
	}
	items, err := c.listAll(ctx, q, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		if items == nil {
			items = []support.IntentItem{}
		}
		return writeJSON(stdout, items)
	}
	return printList(stdout, items, *wide)
}

// printList prints one row an intent: its id, latest status, ledger and
// when it was first seen, to the second — rows of 98 characters for intent
// ids as long as the TypeScript client derives (35). wide adds the method,
// the caller and when the intent last changed.
func printList(w io.Writer, items []support.IntentItem, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cols := []string{"INTENT", "STATUS", "CANISTER", "FIRST SEEN (UTC)"}
	if wide {
		cols = append(cols, "METHOD", "CALLER", "UPDATED (UTC)")
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, it := range items {
		st := string(it.Status)
		if st == "" {
			st = "none"
		}
		row := []string{it.IntentID, st, dash(it.CanisterID), utcSeconds(it.FirstSeen)}
		if wide {
			row = append(row, dash(it.Method), dash(it.Caller), utcSeconds(it.UpdatedAt))
		}
		for i := range row {
			row[i] = safeText(row[i])
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	open := 0
	for _, it := range items {
		if !it.Final {
			open++
		}
	}
	_, err := fmt.Fprintf(w, "%d intents, %d open\n", len(items), open)
	return err
}

// utcSeconds is t in UTC, RFC 3339 to the second (truncated: never later
// than t).
func utcSeconds(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Truncate(time.Second).Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
