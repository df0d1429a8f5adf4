package reconcile_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icagent"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// One follow-up round of the instance holding a ledger's lease, with
// 10,000 open intents of that ledger in its SQLite store and ten new
// blocks on the ledger since the previous round: what a round costs in IC
// queries and CPU, the figure that bounds how many open intents one
// ledger's holder can follow up per poll interval.
func BenchmarkFollowUpRound10k(b *testing.B) {
	const open = 10_000
	e := newEnv(b, envOpt{})
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "reconciled.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ledger := e.ledger.ID()
	eng := reconcile.NewEngine(func(string) (reconcile.History, reconcile.LedgerConfig, error) {
		return e.client, reconcile.LedgerConfig{}, nil
	}, st, nil)
	svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: eng, Store: st, Sink: newFakeSink(),
		Owns: func(l string) bool { return l == ledger.Encode() }})
	if err != nil {
		b.Fatal(err)
	}
	payer := principalN(1)
	e.fund(acct(payer, nil), 1_000_000_000)
	stamp := e.srv.Now()
	for i := range open {
		raw := transferIntent{id: fmt.Sprintf("open-%05d", i), caller: payer, to: acct(principalN(2), nil),
			amount: uint64(1000 + i), stamp: stamp}.json(ledger)
		in := e.intent(raw)
		if _, err := st.PutIntent(ctx, reconciled.IntentRecord{IntentID: in.ID, CanisterID: ledger.Encode(), Caller: payer.Encode(),
			Method: string(in.Method), Body: in.Canonical(), Hash: in.Hash()}); err != nil {
			b.Fatal(err)
		}
		v := reconciled.Verdict{IntentID: in.ID, Seq: 1, Status: reconciled.StatusNotYet, DecidedAt: time.Now().UTC()}
		if err := st.AppendVerdict(ctx, v, &reconciled.Watch{IntentID: in.ID, CanisterID: ledger.Encode(), NextCheck: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	// A first round verifies the chain up to the tip.
	if err := svc.FollowUp(ctx); err != nil {
		b.Fatal(err)
	}
	var queries, tips uint64
	var cpu time.Duration
	rounds := 0
	for b.Loop() {
		b.StopTimer()
		for k := range 10 {
			if _, err := e.ledger.Transfer(payer, icrc1.TransferArg{To: acct(principalN(3), nil).ToCandid(),
				Amount: icrc1.IDLNat(icrc3.NatFromUint64(uint64(rounds*10 + k + 1)))}); err != nil {
				b.Fatal(err)
			}
		}
		s0, c0 := e.client.Stats(), testutil.CPUTime(b)
		b.StartTimer()
		if err := svc.FollowUp(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s1 := e.client.Stats()
		queries += s1.Total - s0.Total
		tips += tipQueries(s1) - tipQueries(s0)
		cpu += testutil.CPUTime(b) - c0
		rounds++
		b.StartTimer()
	}
	if ws, err := st.Watches(ctx); err != nil || len(ws) != open {
		b.Fatalf("%d watches (%v), want %d still open", len(ws), err, open)
	}
	b.ReportMetric(float64(queries)/float64(rounds), "queries/round")
	b.ReportMetric(float64(tips)/float64(rounds), "tip-queries/round")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(rounds), "cpu-ms/round")
	b.ReportMetric(open, "open-intents")
}

// tipQueries counts the certified-tip reads among a client's queries.
func tipQueries(s icagent.Stats) uint64 {
	return s.Queries["ledger:icrc3_get_tip_certificate"] + s.Queries["ledger:get_data_certificate"]
}
