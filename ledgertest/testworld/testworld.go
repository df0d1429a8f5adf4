package testworld

import (
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
)

// Options say what New sets up. The zero value is an ICRC ledger with no
// history on a replica of seed 0, an agent, and no client.
type Options struct {
	// Seed is the replica's key and canister id seed; Server adds options.
	Seed   int64
	Server []ledgertest.Option
	// Ledger configures the ledger; ICP makes it an ICP-style one.
	Ledger ledgertest.LedgerConfig
	ICP    bool
	// Blocks of generated history (seed HistorySeed, timestamps spread
	// over HistorySpan before the replica's now) on an ICRC ledger.
	Blocks      int
	HistorySeed int64
	HistorySpan time.Duration
	// Agent configures the agent (signed-query verification is on unless
	// it turns it off); the replica fills in its host and root key.
	Agent agent.Config
	// Client, when set, is the verified history client to build: New
	// fills in the agent, the ledger and the replica's root key, and with
	// ReplicaClock the replica's certified clock as its Now.
	Client       *icrc3history.ClientConfig
	ReplicaClock bool
}

// World is what New set up.
type World struct {
	Server *ledgertest.Server
	// Ledger is the ICRC ledger; with Options.ICP it is nil and ICP is set.
	Ledger *ledgertest.Ledger
	ICP    *ledgertest.ICPLedger
	Agent  *agent.Agent
	// Client is the verified client of Options.Client (nil without one).
	Client *icrc3history.Client
}

// New sets up a world; a failure fails t, and the replica stops when the
// test ends.
func New(t testing.TB, o Options) *World {
	t.Helper()
	srv, err := ledgertest.NewServer(append([]ledgertest.Option{ledgertest.WithSeed(o.Seed)}, o.Server...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	w := &World{Server: srv}
	if o.ICP {
		if w.ICP, err = srv.NewICPLedger(o.Ledger); err != nil {
			t.Fatal(err)
		}
	} else if w.Ledger, err = srv.NewLedger(o.Ledger); err != nil {
		t.Fatal(err)
	}
	if o.Blocks > 0 {
		if w.Ledger == nil {
			t.Fatal("testworld: generated history is for an ICRC ledger")
		}
		if err := w.Ledger.GenerateHistory(o.Blocks, o.HistorySeed, o.HistorySpan); err != nil {
			t.Fatal(err)
		}
	}
	if w.Agent, err = srv.NewAgentWithConfig(o.Agent); err != nil {
		t.Fatal(err)
	}
	if o.Client != nil {
		cfg := *o.Client
		cfg.RootKey = srv.RootKey()
		if o.ReplicaClock {
			cfg.Now = func() time.Time { return time.Unix(0, int64(srv.Now())) }
		}
		w.Client = w.NewClient(t, cfg)
	}
	return w
}

// ID is the ledger's canister id.
func (w *World) ID() principal.Principal {
	if w.ICP != nil {
		return w.ICP.ID()
	}
	return w.Ledger.ID()
}

// NewClient is a verified history client of the ledger through the
// world's agent; cfg's other fields (its root key included) are the
// caller's.
func (w *World) NewClient(t testing.TB, cfg icrc3history.ClientConfig) *icrc3history.Client {
	t.Helper()
	cfg.Agent = w.Agent
	cfg.Ledger = w.ID()
	c, err := icrc3history.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
