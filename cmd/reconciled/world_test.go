package main

import (
	"context"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/internal/toollayer"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/queue"
)

// world is one test replica, one embedded NATS server, and the tool
// layer's NATS connection: what the daemons under test share.
type world struct {
	t    *testing.T
	ctx  context.Context
	rig  *daemontest.Rig
	srv  *ledgertest.Server
	tool *queue.Conn
}

func newWorld(t *testing.T) *world {
	t.Helper()
	r := daemontest.New(t, daemontest.Options{Seed: 11, Timeout: 3 * time.Minute, NoDaemon: true})
	return &world{t: t, ctx: r.Ctx, rig: r, srv: r.Replica, tool: r.Tool}
}

// daemon starts an instance on dir with the follow-up period poll (long:
// tests trigger rounds themselves).
func (w *world) daemon(name, dir string, poll time.Duration) *daemon.Daemon {
	w.t.Helper()
	return w.rig.Start(daemontest.Options{Instance: name, DataDir: dir, Poll: poll, MaxInflight: 32})
}

// stop shuts a daemon down with the given grace.
func stop(d *daemon.Daemon, grace time.Duration) { daemontest.Stop(d, grace) }

func (w *world) ledger(cfg ledgertest.LedgerConfig) *ledgertest.Ledger {
	w.t.Helper()
	l, err := w.srv.NewLedger(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	return l
}

func (w *world) user(seed byte) *toollayer.User {
	w.t.Helper()
	u, err := toollayer.NewUser(w.srv, seed)
	if err != nil {
		w.t.Fatal(err)
	}
	return u
}

func funded(p principal.Principal) []ledgertest.Balance {
	return []ledgertest.Balance{{Account: icrc3.Account{Owner: p}, Amount: icrc3.NatFromUint64(1_000_000_000_000)}}
}

func transferArg(to principal.Principal, amount uint64, stamp *uint64, memo string) icrc1.TransferArg {
	a := icrc1.TransferArg{To: icrc3.Account{Owner: to}.ToCandid(), Amount: icrc1.IDLNat(icrc3.NatFromUint64(amount)), CreatedAtTime: stamp}
	if memo != "" {
		m := []byte(memo)
		a.Memo = &m
	}
	return a
}

func u64(v uint64) *uint64 { return &v }

// ask publishes and waits for the first verdict satisfying until.
func (w *world) ask(doc toollayer.Intent, until func(reconciled.Verdict) bool) reconciled.Verdict {
	w.t.Helper()
	v, err := toollayer.PublishAndWait(w.ctx, w.tool, doc.Canister, doc.ID, doc.JSON(), until)
	if err != nil {
		w.t.Fatal(err)
	}
	return v
}
