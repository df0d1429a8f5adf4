package historytest_test

import (
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/family"
	"github.com/reconciled/reconciled/icphistory"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/ledgertest/testworld"
	"github.com/reconciled/reconciled/reconcile/historytest"
)

// archiving makes every ledger of these fixtures archive: walks cross
// from archives to the ledger and between archives.
var archiving = ledgertest.LedgerConfig{ArchiveThreshold: 12, ArchiveBatch: 6, ArchiveCapacity: 12}

func edgesOf(archives []ledgertest.ArchiveInfo) []uint64 {
	var es []uint64
	for _, a := range archives {
		es = append(es, a.Start, a.End)
	}
	return es
}

// icrcLedger is an ICRC ledger of generated history.
type icrcLedger struct {
	srv *ledgertest.Server
	cfg ledgertest.LedgerConfig
	l   *ledgertest.Ledger
}

func (l *icrcLedger) Len() uint64            { return l.l.Len() }
func (l *icrcLedger) Minting() icrc3.Account { return l.l.MintingAccount() }
func (l *icrcLedger) Edges() []uint64        { return edgesOf(l.l.Archives()) }
func (l *icrcLedger) Reset() error {
	cfg := l.cfg
	cfg.ID = l.l.ID()
	nl, err := l.srv.NewLedger(cfg)
	if err != nil {
		return err
	}
	if err := nl.GenerateHistory(int(l.l.Len())+9, 2, time.Hour); err != nil {
		return err
	}
	l.l = nl
	return nil
}

// newICRC is an ICRC ledger (cfg) read by icrc3history.Client.
func newICRC(t *testing.T, cfg ledgertest.LedgerConfig) historytest.Fixture {
	tw := testworld.New(t, testworld.Options{Seed: 21, Ledger: cfg, Blocks: 40, HistorySeed: 1, HistorySpan: time.Hour,
		Client: &icrc3history.ClientConfig{Concurrency: 2, PageSize: 5}, ReplicaClock: true})
	return historytest.Fixture{History: tw.Client, Ledger: &icrcLedger{srv: tw.Server, cfg: cfg, l: tw.Ledger}}
}

// icpLedger is an ICP-style ledger of minted blocks.
type icpLedger struct {
	srv *ledgertest.Server
	cfg ledgertest.LedgerConfig
	l   *ledgertest.ICPLedger
}

func (l *icpLedger) Len() uint64            { return l.l.Len() }
func (l *icpLedger) Minting() icrc3.Account { return l.l.MintingAccount() }
func (l *icpLedger) Edges() []uint64        { return edgesOf(l.l.Archives()) }
func (l *icpLedger) Reset() error {
	cfg := l.cfg
	cfg.ID = l.l.ID()
	nl, err := l.srv.NewICPLedger(cfg)
	if err != nil {
		return err
	}
	if err := mint(l.srv, nl, int(l.l.Len())+9, 0xcc); err != nil {
		return err
	}
	l.l = nl
	return nil
}

func mint(srv *ledgertest.Server, l *ledgertest.ICPLedger, n int, tag byte) error {
	for i := range n {
		srv.Advance(time.Second)
		to := icrc3.Account{Owner: principal.Principal{Raw: []byte{tag, byte(i), 0x01}}}
		if _, err := l.Mint(to, icrc3.NatFromUint64(uint64(1000+i))); err != nil {
			return err
		}
	}
	return nil
}

// newICP is an ICP ledger read by the ICP family: through Choose (as the
// daemon reads it) or by icphistory.History itself.
func newICP(t *testing.T, chooser bool) historytest.Fixture {
	tw := testworld.New(t, testworld.Options{Seed: 22, ICP: true, Ledger: archiving,
		Client: &icrc3history.ClientConfig{Concurrency: 2}, ReplicaClock: true})
	if err := mint(tw.Server, tw.ICP, 40, 0xbb); err != nil {
		t.Fatal(err)
	}
	f := historytest.Fixture{Ledger: &icpLedger{srv: tw.Server, cfg: archiving, l: tw.ICP}}
	if chooser {
		f.History = family.Choose(tw.Client)
	} else {
		f.History = icphistory.New(tw.Client.Conn, 2)
	}
	return f
}

func TestICRC3(t *testing.T) {
	historytest.Run(t, func(t *testing.T) historytest.Fixture { return newICRC(t, archiving) })
}

func TestICRCLegacy(t *testing.T) {
	cfg := archiving
	cfg.DisableICRC3 = true
	historytest.Run(t, func(t *testing.T) historytest.Fixture { return newICRC(t, cfg) })
}

func TestICP(t *testing.T) {
	historytest.Run(t, func(t *testing.T) historytest.Fixture { return newICP(t, false) })
}

func TestICPChosen(t *testing.T) {
	historytest.Run(t, func(t *testing.T) historytest.Fixture { return newICP(t, true) })
}
