package icrc3

import (
	"fmt"

	"github.com/aviate-labs/agent-go/principal"
)

// CandidAccount is the ICRC-1 Candid `record { owner: principal; subaccount: opt blob }`.
type CandidAccount struct {
	Owner      principal.Principal `ic:"owner"`
	Subaccount *[]byte             `ic:"subaccount,omitempty"`
}

// ToCandid returns a's Candid form, keeping an absent subaccount absent.
func (a Account) ToCandid() CandidAccount {
	c := CandidAccount{Owner: a.Owner}
	if a.Subaccount != nil {
		s := append([]byte(nil), a.Subaccount...)
		c.Subaccount = &s
	}
	return c
}

// Account returns the account as sent, keeping an absent subaccount absent.
// A subaccount must be 32 bytes: the DFINITY ledger rejects other lengths at
// Candid decoding.
func (c CandidAccount) Account() (Account, error) {
	a := Account{Owner: c.Owner}
	if c.Subaccount != nil {
		if len(*c.Subaccount) != 32 {
			return Account{}, fmt.Errorf("icrc3: subaccount must be 32 bytes, got %d", len(*c.Subaccount))
		}
		a.Subaccount = append([]byte(nil), (*c.Subaccount)...)
	}
	return a, nil
}
