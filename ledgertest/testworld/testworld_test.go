package testworld_test

import (
	"context"
	"testing"
	"time"

	"github.com/reconciled/reconciled/family"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/ledgertest/testworld"
)

// The client New builds reads the ledger New made, verified against the
// replica's root key: its certified tip is the generated history's last
// block.
func TestNewReadsItsOwnLedger(t *testing.T) {
	w := testworld.New(t, testworld.Options{Seed: 3, Ledger: ledgertest.LedgerConfig{ArchiveThreshold: 10, ArchiveBatch: 5},
		Blocks: 25, HistorySeed: 1, HistorySpan: time.Hour, Client: &icrc3history.ClientConfig{}, ReplicaClock: true})
	tip, err := w.Client.Tip(context.Background())
	if err != nil {
		t.Fatalf("tip: %v", err)
	}
	if tip.Empty || tip.Index != 24 {
		t.Fatalf("certified tip %+v of a ledger of 25 blocks", tip)
	}
}

// With ICP set the ledger is ICP-style, and the client reads it as one.
func TestNewICPLedger(t *testing.T) {
	w := testworld.New(t, testworld.Options{Seed: 3, ICP: true, Client: &icrc3history.ClientConfig{}, ReplicaClock: true})
	if w.Ledger != nil || w.ICP == nil || !w.ID().Equal(w.ICP.ID()) {
		t.Fatalf("ICP world: ledger %v, ICP ledger %v", w.Ledger, w.ICP)
	}
	fam := family.Choose(w.Client)
	if _, err := fam.Detect(context.Background()); err != nil || !fam.IsICPLedger() {
		t.Fatalf("the client does not read an ICP ledger: %v", err)
	}
}
