package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/internal/cli"
	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

func init() {
	register(command{
		Name:    "demo",
		Summary: "run everything in one process against a local test ledger and print a verdict table",
		Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			fs := flag.NewFlagSet("demo", flag.ContinueOnError)
			fs.SetOutput(stderr)
			verbose := fs.Bool("v", false, "log the daemon's JSON lines to stderr")
			serve := fs.Bool("serve", false, "then keep the daemon running with its support page and print the page's URL with a token link; Ctrl-C stops it")
			httpAddr := fs.String("http", "127.0.0.1:0", "with --serve: the support page's listen address (loopback only; port 0 picks a free one)")
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			var log *zap.Logger
			if *verbose {
				log = newLogger(zapcore.InfoLevel, stderr)
			}
			var sv *demoServe
			if *serve {
				if err := cli.LoopbackOnly(*httpAddr); err != nil {
					return fmt.Errorf("%w: --http: %v", errUsage, err)
				}
				sv = &demoServe{addr: *httpAddr}
			}
			return runDemo(ctx, log, stdout, stderr, sv)
		},
	})
}

// demoRow is one line of the demo's table.
type demoRow struct {
	intent, method, story string
	v                     reconciled.Verdict
}

// toolLayerActions is what a tool layer does on each status, as the
// README's verdict table says.
var toolLayerActions = [][2]string{
	{"found", "it executed, in the block shown: report success; never send it again"},
	{"absent", "it did not execute and no longer can: now, and only now, pay again with a new created_at_time"},
	{"not_yet", "it may still execute: wait, without re-stamping; the daemon publishes the final verdict itself"},
	{"unreadable", "nothing is known yet: wait, the daemon retries; never treat it as absent"},
	{"invalid", "the intent is malformed: fix it and publish it under a new intent_id"},
}

// demoServe keeps the demo's daemon serving its support page on addr.
type demoServe struct{ addr string }

// runDemo runs an embedded NATS server, a loopback test replica with two
// ledgers, the daemon, and a tool layer that pays with replies lost and
// asks for verdicts, then prints them. With serve set it then serves the
// daemon's support page until ctx ends.
func runDemo(ctx context.Context, log *zap.Logger, stdout, stderr io.Writer, serve *demoServe) error {
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if log == nil {
		log = zap.NewNop()
	}
	dir, err := os.MkdirTemp("", "reconciled-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	srv, err := ledgertest.NewServer(ledgertest.WithSeed(42))
	if err != nil {
		return err
	}
	defer srv.Close()
	alice, err := toollayer.NewUser(srv, 1)
	if err != nil {
		return err
	}
	bob, err := toollayer.NewUser(srv, 2)
	if err != nil {
		return err
	}
	carol := icrc3.Account{Owner: mustUser(srv, 3).Principal()}
	funds := []ledgertest.Balance{{Account: icrc3.Account{Owner: alice.Principal()}, Amount: icrc3.NatFromUint64(10_000_000_000)}}
	ledger, err := srv.NewLedger(ledgertest.LedgerConfig{InitialBalances: funds, ArchiveThreshold: 400, ArchiveBatch: 200})
	if err != nil {
		return err
	}
	// Some history in front, with archives, so the scan has work to do.
	if err := ledger.GenerateHistory(1_000, 7, time.Hour); err != nil {
		return err
	}
	broken, err := srv.NewLedger(ledgertest.LedgerConfig{InitialBalances: funds})
	if err != nil {
		return err
	}
	srv.SetFaults(broken.ID(), ledgertest.Faults{WrongKey: true})

	daemonAgent, err := srv.NewAgent(nil)
	if err != nil {
		return err
	}
	cfg := daemon.Config{DataDir: dir, Instance: "demo", SubjectPrefix: "reconcile", PollInterval: time.Hour,
		MaxInflight: 4, MaxMessageBytes: 32 << 10, Grace: 5 * time.Second, Ledgers: map[string]reconcile.LedgerConfig{}}
	if serve != nil {
		// The support page is served by the daemon itself, with a fresh
		// token that travels in the URL's fragment (browsers never send it).
		tok := make([]byte, 16)
		if _, err := rand.Read(tok); err != nil {
			return fmt.Errorf("support token: %w", err)
		}
		cfg.HTTPAddr, cfg.SupportToken = serve.addr, hex.EncodeToString(tok)
		// While it serves, open intents are followed up as by a real
		// daemon, so that the page's attempts and next retry move on.
		cfg.PollInterval = 5 * time.Second
		// And its NATS server listens on loopback, so that a tool layer,
		// nats or reconciled ask can publish intents to it.
		cfg.NATSListen = "127.0.0.1:0"
	}
	d, err := daemon.New(ctx, cfg, daemon.Options{Log: log, Agent: daemonAgent})
	if err != nil {
		return err
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), cfg.Grace)
		defer scancel()
		d.Shutdown(sctx)
	}()
	tool, err := queue.Connect(ctx, queue.ConnConfig{Embedded: d.Embedded(), Name: "demo-tool-layer"})
	if err != nil {
		return err
	}
	defer tool.Close()

	fmt.Fprintf(stdout, "test replica %s; ledger %s (%d blocks, archived), ledger %s (certificates signed by a wrong key)\n\n",
		srv.URL(), ledger.ID(), ledger.Len(), broken.ID())
	rows, err := demoScenario(ctx, srv, d, tool, ledger, broken, alice, bob, carol)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INTENT\tMETHOD\tSTATUS\tFINAL\tBLOCK\tREASON\tWHAT HAPPENED")
	for _, r := range rows {
		block, reason := "-", "-"
		if r.v.Block != nil {
			block = fmt.Sprint(uint64(r.v.Block.Index))
		}
		if r.v.Reason != nil {
			reason = r.v.Reason.Code
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\t%s\n", r.intent, r.method, r.v.Status, r.v.Final, block, reason, r.story)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nwhat the tool layer does with each status (only with a verdict of its own intent_hash):")
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, a := range toolLayerActions {
		fmt.Fprintf(tw, "  %s\t%s\n", a[0], a[1])
	}
	if err := tw.Flush(); err != nil || serve == nil {
		if err == nil {
			fmt.Fprintln(stdout, "\nwith --serve the daemon keeps running, with its support page and a NATS server to publish intents to")
		}
		return err
	}
	natsURL := d.Embedded().ClientURL()
	fmt.Fprintf(stdout, "\nsupport page: http://%s/ui/#token=%s\n", d.HTTPAddr(), cfg.SupportToken)
	fmt.Fprintf(stdout, "NATS: %s (intents to %s.intents.<canister_id>, verdicts on %s.verdicts.<intent_id>; e.g. reconciled ask --nats-url %s intent.json)\n",
		natsURL, cfg.SubjectPrefix, cfg.SubjectPrefix, natsURL)
	fmt.Fprintln(stdout, "the daemon keeps running (follow-ups included); Ctrl-C stops the demo")
	// The test ledger's clock can only run ahead of the wall clock (a
	// certificate behind it is refused), and the demo moved it a day on.
	fmt.Fprintf(stdout, "the demo's ledger clock runs %s ahead of this computer's (moved on to close a window);\n"+
		"payments made after that show times tomorrow, and the page says they are ahead\n",
		(time.Duration(srv.Now()) - time.Duration(time.Now().UnixNano())).Round(time.Minute))
	<-outer.Done()
	return nil
}

func mustUser(srv *ledgertest.Server, seed byte) *toollayer.User {
	u, err := toollayer.NewUser(srv, seed)
	if err != nil {
		panic(err) // a fixed seed and a local replica: cannot fail but for a bug
	}
	return u
}

func demoScenario(ctx context.Context, srv *ledgertest.Server, d *daemon.Daemon, tool *queue.Conn,
	ledger, broken *ledgertest.Ledger, alice, bob *toollayer.User, carol icrc3.Account) ([]demoRow, error) {
	var rows []demoRow
	add := func(id, method, story string, v reconciled.Verdict) {
		rows = append(rows, demoRow{intent: id, method: method, story: story, v: v})
	}
	L := ledger.ID()
	srv.SetFaults(L, ledgertest.Faults{LoseReplies: true})

	// 1. A transfer whose reply is lost.
	now := srv.Now()
	xfer := icrc1.TransferArg{To: carol.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(150_000)),
		Memo: &[]byte{'l', 'u', 'n', 'c', 'h'}, CreatedAtTime: &now}
	var xres icrc1.TransferResult
	if alice.Call(L, "icrc1_transfer", xfer, &xres) {
		return nil, errors.New("demo: the transfer's reply was not lost")
	}
	// 2. An approve and a transfer_from by the spender, replies lost too.
	approveAt := srv.Now()
	appr := icrc1.ApproveArgs{Spender: icrc3.Account{Owner: bob.Principal()}.ToCandid(),
		Amount: icrc1.IDLNat(icrc3.NatFromUint64(1_000_000)), CreatedAtTime: &approveAt}
	var ares icrc1.ApproveResult
	if alice.Call(L, "icrc2_approve", appr, &ares) {
		return nil, errors.New("demo: the approve's reply was not lost")
	}
	fromAt := srv.Now()
	xfrom := icrc1.TransferFromArgs{From: icrc3.Account{Owner: alice.Principal()}.ToCandid(), To: carol.ToCandid(),
		Amount: icrc1.IDLNat(icrc3.NatFromUint64(250_000)), CreatedAtTime: &fromAt}
	var fres icrc1.TransferFromResult
	if bob.Call(L, "icrc2_transfer_from", xfrom, &fres) {
		return nil, errors.New("demo: the transfer_from's reply was not lost")
	}
	srv.SetFaults(L, ledgertest.Faults{})

	ask := func(doc toollayer.Intent, until func(reconciled.Verdict) bool) (reconciled.Verdict, error) {
		return toollayer.PublishAndWait(ctx, tool, doc.Canister, doc.ID, doc.JSON(), until)
	}

	// 3. A transfer that was never sent: not_yet while its window is open.
	stamp := srv.Now()
	never := icrc1.TransferArg{To: carol.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(99)), CreatedAtTime: &stamp}
	neverDoc := toollayer.Transfer("demo-never-sent", L, alice.Principal(), never)
	if _, err := ask(neverDoc, toollayer.AnyVerdict); err != nil {
		return nil, err
	}

	for _, c := range []struct {
		doc   toollayer.Intent
		story string
	}{
		{toollayer.Transfer("demo-lost-reply", L, alice.Principal(), xfer), "transfer executed, reply lost"},
		{toollayer.Approve("demo-approve", L, alice.Principal(), appr), "approve executed, reply lost"},
		{toollayer.TransferFrom("demo-transfer-from", L, bob.Principal(), xfrom), "transfer_from executed, reply lost"},
	} {
		v, err := ask(c.doc, toollayer.AnyVerdict)
		if err != nil {
			return nil, err
		}
		add(c.doc.ID, c.doc.Method, c.story, v)
	}

	// The ledger's clock moves past the never-sent transfer's window; the
	// daemon's follow-up settles it on the certified time by itself.
	srv.Advance(24*time.Hour + 3*time.Minute)
	d.FollowUpNow()
	v, err := toollayer.WaitVerdict(ctx, tool, neverDoc.ID, toollayer.FinalVerdict)
	if err != nil {
		return nil, err
	}
	add(neverDoc.ID, neverDoc.Method, "never sent; window closed in certified time", v)

	// 4. Never sent, window open.
	stamp2 := srv.Now()
	open := icrc1.TransferArg{To: carol.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(77)), CreatedAtTime: &stamp2}
	openDoc := toollayer.Transfer("demo-window-open", L, alice.Principal(), open)
	if v, err = ask(openDoc, toollayer.AnyVerdict); err != nil {
		return nil, err
	}
	add(openDoc.ID, openDoc.Method, "never sent; may still execute, watched", v)

	// 5. A ledger whose certificates do not verify.
	stamp3 := srv.Now()
	bad := icrc1.TransferArg{To: carol.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(5)), CreatedAtTime: &stamp3}
	badDoc := toollayer.Transfer("demo-forged-cert", broken.ID(), alice.Principal(), bad)
	if v, err = ask(badDoc, toollayer.AnyVerdict); err != nil {
		return nil, err
	}
	add(badDoc.ID, badDoc.Method, "certificate signed by a wrong key; retried with backoff", v)

	// 6. No created_at_time: nothing to match on.
	invDoc := toollayer.Transfer("demo-no-stamp", L, alice.Principal(), icrc1.TransferArg{To: carol.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(1))})
	var m map[string]any
	_ = json.Unmarshal(invDoc.JSON(), &m)
	delete(m["args"].(map[string]any), "created_at_time")
	body, _ := json.Marshal(m)
	if v, err = toollayer.PublishAndWait(ctx, tool, invDoc.Canister, invDoc.ID, body, toollayer.AnyVerdict); err != nil {
		return nil, err
	}
	add(invDoc.ID, invDoc.Method, "malformed: no created_at_time", v)
	return rows, nil
}
