package icagent_test

import (
	"context"
	"encoding/binary"
	"net/http"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icagent"
	"github.com/reconciled/reconciled/ledgertest"
)

func existenceOf(t *testing.T, srv *ledgertest.Server, id principal.Principal) (icagent.Existence, error) {
	t.Helper()
	ag, err := srv.NewAgent(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := icagent.New(icagent.Config{Agent: ag, Ledger: id, RootKey: srv.RootKey()})
	if err != nil {
		t.Fatal(err)
	}
	return c.CanisterExistence(context.Background())
}

// outOfRange is a canister id past the end of the replica's subnet range.
func outOfRange(in principal.Principal) principal.Principal {
	raw := append([]byte(nil), in.Raw...)
	binary.BigEndian.PutUint64(raw, binary.BigEndian.Uint64(raw)+1<<21)
	return principal.Principal{Raw: raw}
}

func TestCanisterExistenceFromCertifiedState(t *testing.T) {
	srv, l, _ := newLedgerConn(t, icagent.Config{})
	cases := []struct {
		name string
		id   principal.Principal
		want icagent.Existence
	}{
		{"installed ledger", l.ID(), icagent.CanisterInstalled},
		{"id in range, never created", srv.NewCanisterID(), icagent.CanisterMissing},
		{"created without code", srv.NewEmptyCanister(), icagent.CanisterEmpty},
	}
	for _, tc := range cases {
		got, err := existenceOf(t, srv, tc.id)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// Nothing but a fresh certificate of the responsible subnet, under the
// root key, proving the paths absent, may say a canister is missing: each
// of these lies or refusals must leave its existence unknown.
func TestCanisterExistenceRefusesUncertifiedAbsence(t *testing.T) {
	srv, _, _ := newLedgerConn(t, icagent.Config{})
	missing := func(f ledgertest.Faults) principal.Principal {
		id := srv.NewCanisterID()
		srv.SetFaults(id, f)
		return id
	}
	far := outOfRange(srv.NewCanisterID())
	srv.SetFaults(far, ledgertest.Faults{AnswerOutOfRange: true})
	cases := []struct {
		name string
		id   principal.Principal
	}{
		{"absence signed by another key", missing(ledgertest.Faults{WrongKey: true})},
		{"pruned tree instead of an absence proof", missing(ledgertest.Faults{PruneCanisters: true})},
		{"absence under a delegation whose range does not cover the id", far},
		{"boundary node's 400 canister_not_found", outOfRange(srv.NewCanisterID())},
		{"HTTP 404", missing(ledgertest.Faults{HTTPStatus: http.StatusNotFound})},
		{"HTTP 400", missing(ledgertest.Faults{HTTPStatus: http.StatusBadRequest})},
		{"an hour-old certificate", missing(ledgertest.Faults{StaleTime: time.Hour})},
	}
	for _, tc := range cases {
		got, err := existenceOf(t, srv, tc.id)
		if err == nil || got != icagent.ExistenceUnknown {
			t.Errorf("%s: %v, %v; want unknown with an error", tc.name, got, err)
		}
		t.Logf("%s: %v", tc.name, err)
	}
}

// Without a delegation the certificate is the root subnet's, whose own
// canister range is not in it: its absence proof cannot say the id is
// that subnet's to answer for.
func TestCanisterExistenceNeedsADelegationForAbsence(t *testing.T) {
	srv, err := ledgertest.NewServer(ledgertest.WithSeed(22), ledgertest.WithRootSubnet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	l, err := srv.NewLedger(ledgertest.LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := existenceOf(t, srv, l.ID()); err != nil || got != icagent.CanisterInstalled {
		t.Fatalf("installed ledger: %v, %v", got, err)
	}
	if got, err := existenceOf(t, srv, srv.NewCanisterID()); err == nil || got != icagent.ExistenceUnknown {
		t.Fatalf("absence without a delegation: %v, %v; want unknown", got, err)
	}
}
