package ledgertest

import (
	"testing"
	"github.com/aviate-labs/agent-go/candid/idl"
)

func TestZZQuery(t *testing.T) {
	s, err := NewServer(WithSeed(5))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.NewLedger(LedgerConfig{})
	if err != nil { t.Fatal(err) }
	a, _ := s.NewAgent(ledgerIdentity(t, 1))
	var fee idl.Nat
	if err := a.Query(l.ID(), "icrc1_fee", []any{}, []any{&fee}); err != nil {
		t.Fatal("fee", err)
	}
	var bal idl.Nat
	if err := a.Query(l.ID(), "icrc1_balance_of", []any{acc(testPrincipal(1), nil)}, []any{&bal}); err != nil {
		t.Fatal("bal", err)
	}
}
