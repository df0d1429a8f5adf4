package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3/ledgertest"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// world is one test replica, one embedded NATS server, and the tool
// layer's NATS connection: what the daemons under test share.
type world struct {
	t    *testing.T
	ctx  context.Context
	srv  *ledgertest.Server
	nats *queue.Embedded
	tool *queue.Conn
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(11))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	emb, err := queue.StartEmbedded(queue.EmbeddedConfig{DataDir: filepath.Join(t.TempDir(), "nats")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	tool, err := queue.Connect(ctx, queue.ConnConfig{Embedded: emb, Name: "tool-layer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tool.Close)
	if err := tool.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	return &world{t: t, ctx: ctx, srv: srv, nats: emb, tool: tool}
}

// daemon starts an instance on dir (reused across restarts) with the
// follow-up period poll (long: tests trigger rounds themselves).
func (w *world) daemon(name, dir string, poll time.Duration, quiet bool) *daemon {
	w.t.Helper()
	return w.daemonWith(name, dir, poll, quiet, nil)
}

// daemonWith is daemon with an adjustment of every ledger client's config.
func (w *world) daemonWith(name, dir string, poll time.Duration, quiet bool, cc func(*icrc3.ClientConfig)) *daemon {
	w.t.Helper()
	ag, err := w.srv.NewAgent(nil)
	if err != nil {
		w.t.Fatal(err)
	}
	cfg := &serveConfig{DataDir: dir, Instance: name, SubjectPrefix: "reconcile", PollInterval: poll,
		MaxInflight: 32, MaxMessageBytes: 32 << 10, Grace: 5 * time.Second, Ledgers: map[string]ledgerSpec{}}
	var log *zap.Logger
	if !quiet {
		log = zaptest.NewLogger(w.t, zaptest.Level(zap.WarnLevel)).Named(name)
	}
	d, err := startDaemon(w.ctx, daemonOpts{cfg: cfg, log: log, agent: ag, embedded: w.nats, clientConfig: cc})
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

// stop shuts a daemon down with the given grace.
func stop(d *daemon, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	d.shutdown(ctx)
}

func (w *world) ledger(cfg ledgertest.LedgerConfig) *ledgertest.Ledger {
	w.t.Helper()
	l, err := w.srv.NewLedger(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	return l
}

func (w *world) user(seed byte) *toolUser {
	w.t.Helper()
	u, err := newToolUser(w.srv, seed)
	if err != nil {
		w.t.Fatal(err)
	}
	return u
}

func funded(p principal.Principal) []ledgertest.Balance {
	return []ledgertest.Balance{{Account: icrc3.Account{Owner: p}, Amount: icrc3.NatFromUint64(1_000_000_000_000)}}
}

func transferArg(to principal.Principal, amount uint64, stamp *uint64, memo string) icrc3.TransferArg {
	a := icrc3.TransferArg{To: icrc3.Account{Owner: to}.ToCandid(), Amount: icrc3.IDLNat(icrc3.NatFromUint64(amount)), CreatedAtTime: stamp}
	if memo != "" {
		m := []byte(memo)
		a.Memo = &m
	}
	return a
}

func u64(v uint64) *uint64 { return &v }

// ask publishes and waits for the first verdict satisfying until.
func (w *world) ask(doc intentDoc, until func(reconcile.Verdict) bool) reconcile.Verdict {
	w.t.Helper()
	v, err := publishAndWait(w.ctx, w.tool, doc.Canister, doc.ID, doc.json(), until)
	if err != nil {
		w.t.Fatal(err)
	}
	return v
}

func (w *world) wait(id string, until func(reconcile.Verdict) bool) reconcile.Verdict {
	w.t.Helper()
	v, err := waitVerdict(w.ctx, w.tool, id, until)
	if err != nil {
		w.t.Fatal(err)
	}
	return v
}

// eventually polls cond until it holds or the deadline passes: for state
// that no subscription announces (another instance's store).
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached before the deadline; last state: %s", what, state)
		}
		<-tick.C
	}
}

// history returns an intent's stored verdicts and checks their seqs run
// 1..n without gaps.
func history(t *testing.T, st *store.Store, id string) []reconcile.Verdict {
	t.Helper()
	vs, err := st.Verdicts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if v.Seq != uint64(i+1) {
			t.Fatalf("%s: verdict #%d has seq %d: %s", id, i+1, v.Seq, describe(vs))
		}
	}
	return vs
}

func describe(vs []reconcile.Verdict) string {
	s := ""
	for _, v := range vs {
		s += fmt.Sprintf("[%d %s]", v.Seq, v.Status)
	}
	return s
}

// streamCount counts the messages the verdict stream holds for an intent.
func (w *world) streamCount(id string) uint64 {
	w.t.Helper()
	st, err := w.tool.JetStream().Stream(w.ctx, queue.VerdictsStream)
	if err != nil {
		w.t.Fatal(err)
	}
	info, err := st.Info(w.ctx, jetstream.WithSubjectFilter("reconcile.verdicts."+id))
	if err != nil {
		w.t.Fatal(err)
	}
	return info.State.Subjects["reconcile.verdicts."+id]
}
