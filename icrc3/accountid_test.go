package icrc3

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/aviate-labs/agent-go/principal"
)

func TestICPAddressVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/icp_account_identifier_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Hash28  string `json:"hash28_hex"`
			Address string `json:"address32_hex"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(b, &f); err != nil || len(f.Vectors) == 0 {
		t.Fatalf("vectors: %v (%d)", err, len(f.Vectors))
	}
	for _, v := range f.Vectors {
		h, err := hex.DecodeString(v.Hash28)
		if err != nil {
			t.Fatal(err)
		}
		if got := ICPAddress(h); got != v.Address {
			t.Errorf("address of %s = %s, want %s", v.Hash28, got, v.Address)
		}
	}
}

func TestICPAccountID(t *testing.T) {
	// The anonymous principal's default account, as the ICP ledger and its
	// dashboard show it.
	anon := Account{Owner: principal.Principal{Raw: []byte{4}}}
	const want = "1c7a48ba6a562aa9eaa2481a9049cdf0433b9738c992d698c31d8abf89cadc79"
	if got := anon.ICPAccountIDHex(); got != want {
		t.Errorf("anonymous account id %s, want %s", got, want)
	}
	// An all-zero subaccount is the default one.
	zero := Account{Owner: anon.Owner, Subaccount: make([]byte, 32)}
	if zero.ICPAccountIDHex() != want {
		t.Error("all-zero subaccount differs from the default")
	}
	id := anon.ICPAccountID()
	if ICPAddress(id[4:]) != want {
		t.Error("ICPAddress disagrees with ICPAccountID")
	}
	sub := Account{Owner: anon.Owner, Subaccount: append(make([]byte, 31), 1)}
	if sub.ICPAccountIDHex() == want {
		t.Error("subaccount 1 has the default account's id")
	}
}
