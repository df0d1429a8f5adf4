package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/support"
)

func init() {
	register(command{
		Name:    "get",
		Summary: "show an intent: every verdict, its evidence, near misses and block (support API)",
		Run:     runGet,
	})
}

func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: reconciled get [--server URL] [--token T] [--json] INTENT_ID")
		fs.PrintDefaults()
	}
	client := clientFlags(fs, osGetenv)
	asJSON := fs.Bool("json", false, "print the API's JSON reply")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want exactly one INTENT_ID", errUsage)
	}
	id := fs.Arg(0)
	if !reconciled.ValidIntentID(id) {
		return fmt.Errorf("%w: intent id %q is not [A-Za-z0-9_-]{1,128}", errUsage, id)
	}
	c, err := client()
	if err != nil {
		return err
	}
	var d support.Detail
	if err := c.get(ctx, "/api/v1/intents/"+id, nil, &d); err != nil {
		if e, ok := err.(*errAPI); ok && e.Code == "E_NOT_FOUND" {
			return fmt.Errorf("no intent %s on %s", id, c.base.Redacted())
		}
		return fmt.Errorf("%s: %w", id, err)
	}
	if *asJSON {
		return writeJSON(stdout, d)
	}
	return printDetail(stdout, &d)
}

// writeJSON prints v as indented JSON, hidden runes escaped (safeJSON).
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(safeJSON(b), '\n'))
	return err
}

// parseInterspersed parses flags given before and after the positional
// arguments ("get ID --json" as well as "get --json ID").
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(pos)
}

func utc(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func utcp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return utc(*t)
}

func u64p(v *reconciled.U64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatUint(uint64(*v), 10)
}

// amountText formats raw units with the ledger's decimals and symbol when
// the server knows them; the raw units are always shown too, because they
// are what the ledger records.
func amountText(units string, l *support.Ledger) string {
	if l == nil {
		return units + " units"
	}
	return support.FormatAmount(units, l.Decimals, l.Symbol) + " (" + units + " units)"
}

// argOrder is each method's args in the standard's order.
var argOrder = map[string][]string{
	"icrc1_transfer":      {"from_subaccount", "to", "amount", "fee", "memo", "created_at_time"},
	"icrc2_transfer_from": {"spender_subaccount", "from", "to", "amount", "fee", "memo", "created_at_time"},
	"icrc2_approve":       {"from_subaccount", "spender", "amount", "expected_allowance", "expires_at", "fee", "memo", "created_at_time"},
}

// intentArgs reads the args of the stored body for display. The body is
// shown as received, so it is read loosely: whatever is not a string (an
// invalid intent's odd field) is shown as its JSON.
func intentArgs(body json.RawMessage, method string) [][2]string {
	var in struct {
		Args  map[string]json.RawMessage `json:"args"`
		After string                     `json:"after"`
	}
	if json.Unmarshal(body, &in) != nil || in.Args == nil {
		return nil
	}
	order := argOrder[method]
	seen := map[string]bool{}
	var keys []string
	for _, k := range order {
		if _, ok := in.Args[k]; ok {
			keys = append(keys, k)
			seen[k] = true
		}
	}
	for k := range in.Args {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	// Args outside the standard's order come last, sorted, so the output
	// does not depend on map order.
	slices.Sort(keys[len(seen):])
	var out [][2]string
	for _, k := range keys {
		raw := in.Args[k]
		if string(raw) == "null" {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw)
		}
		switch k {
		case "created_at_time", "expires_at":
			if ns, err := strconv.ParseUint(s, 10, 64); err == nil {
				if t := support.LedgerTime(ns); t != nil {
					s = utc(*t) + " (" + s + ")"
				}
			}
		}
		out = append(out, [2]string{k, s})
	}
	if in.After != "" {
		out = append(out, [2]string{"after", in.After})
	}
	return out
}

func printDetail(w io.Writer, d *support.Detail) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", safeText(k), safeText(v)) }
	status := string(d.Status)
	switch {
	case d.Status == "":
		status = "no verdict yet"
	case d.Final:
		status += fmt.Sprintf(" (final, verdict #%d)", d.LatestSeq)
	default:
		status += fmt.Sprintf(" (not final, verdict #%d)", d.LatestSeq)
	}
	row("intent", d.IntentID)
	row("status", status)
	row("tell them", d.Advice)
	if d.HasBody {
		row("canister", d.CanisterID)
		row("method", d.Method)
		row("caller", d.Caller)
		for _, kv := range intentArgs(d.Intent, d.Method) {
			v := kv[1]
			switch kv[0] {
			case "amount", "fee", "expected_allowance":
				if strings.Trim(v, "0123456789") == "" {
					v = amountText(v, d.Ledger)
				}
			}
			row(kv[0], v)
		}
		row("first seen", utc(d.FirstSeen))
	} else {
		row("intent body", "not stored here (decided by another instance)")
	}
	if b := d.Block; b != nil {
		row("block", fmt.Sprintf("%d  at %s  kind %s  hash %s", b.Index, utcp(b.Time), b.Kind, b.Hash))
	} else {
		row("block", "-")
	}
	if wv := d.Window; wv != nil {
		s := fmt.Sprintf("%s .. %s  blocks %s..%s", utcp(wv.From), utcp(wv.To), u64p(wv.FirstBlock), u64p(wv.LastBlock))
		if wv.NarrowedBy != "" {
			s += "  narrowed by " + wv.NarrowedBy
		}
		row("window", s)
	} else {
		row("window", "-")
	}
	if e := d.Evidence; e != nil {
		row("evidence", fmt.Sprintf("%s  tip %s  certified %s  blocks read %d",
			e.Verified, u64p(e.TipIndex), utcp(e.CertifiedAt), e.BlocksRead))
	} else {
		row("evidence", "-")
	}
	if r := d.Reason; r != nil {
		s := r.Code + ": " + r.Message
		if r.Field != "" {
			s = r.Code + " (" + r.Field + "): " + r.Message
		}
		row("reason", s)
	}
	if len(d.NearMisses) == 0 {
		row("near misses", "none")
	} else {
		for i, nm := range d.NearMisses {
			k := ""
			if i == 0 {
				k = "near misses"
			}
			row(k, fmt.Sprintf("block %d differs in %s", nm.Index, strings.Join(nm.Differs, ", ")))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nverdicts (%d)\n", len(d.Verdicts))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SEQ\tSTATUS\tFINAL\tDECIDED (UTC)\tBLOCK\tREASON")
	for _, v := range d.Verdicts {
		block, reason := "-", "-"
		if v.Block != nil {
			block = strconv.FormatUint(uint64(v.Block.Index), 10)
		}
		if v.Reason != nil {
			reason = v.Reason.Code
		}
		final := "no"
		if v.Final {
			final = "yes"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", v.Seq, safeText(string(v.Status)), final, utc(v.DecidedAt), block, safeText(reason))
	}
	return tw.Flush()
}
