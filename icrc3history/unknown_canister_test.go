package icrc3history_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
)

// TestUnknownCanisterIsReportedAsSuch: a mistyped ledger id, one the
// replica does not host (inside its subnet's canister range) or one no
// subnet of it hosts (outside the range), is E_UNKNOWN_CANISTER, not a
// certificate failure.
func TestUnknownCanisterIsReportedAsSuch(t *testing.T) {
	e := newEnv(t, ledgertest.LedgerConfig{}, 0)
	lo, _ := e.srv.CanisterRange()
	// The id whose counter is just below the range.
	outside := append([]byte(nil), lo.Raw...)
	binary.BigEndian.PutUint64(outside, binary.BigEndian.Uint64(outside)-1)
	for name, id := range map[string]principal.Principal{
		"in-range":     e.srv.NewCanisterID(),
		"out-of-range": {Raw: outside},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := icrc3history.NewClient(icrc3history.ClientConfig{Agent: e.agent, Ledger: id, RootKey: e.srv.RootKey()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Tip(context.Background())
			if code := icrc3.ReasonCode(err); code != "E_UNKNOWN_CANISTER" {
				t.Fatalf("tip of canister %s that is not hosted: code %q (%v), want E_UNKNOWN_CANISTER", id, code, err)
			}
		})
	}
}
