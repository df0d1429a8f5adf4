package icp

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/reconciled/reconciled/icrc3"
)

func TestAccountIDChecksumVector(t *testing.T) {
	raw, err := os.ReadFile("testdata/icp_account_identifier_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Hash28  string `json:"hash28_hex"`
			Address string `json:"address32_hex"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range f.Vectors {
		h, _ := hex.DecodeString(v.Hash28)
		var a AccountID
		copy(a[:], h)
		if got := a.String(); got != v.Address {
			t.Errorf("address of %s = %s, want %s", v.Hash28, got, v.Address)
		}
		back, err := ParseAccountID(v.Address)
		if err != nil || back != a {
			t.Errorf("parse %s = %x, %v", v.Address, back, err)
		}
		bad := []byte(v.Address)
		bad[0] ^= 1
		if _, err := ParseAccountID(string(bad)); err == nil {
			t.Errorf("a wrong checksum parsed")
		}
	}
}

func TestTransactionHashVector(t *testing.T) {
	raw, err := os.ReadFile("testdata/icp_transaction_hash_vector.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tx struct {
			From, To  string
			Amount    uint64 `json:"amount_e8s"`
			Fee       uint64 `json:"fee_e8s"`
			Memo      uint64
			CreatedAt uint64 `json:"created_at_time_nanos"`
		} `json:"transaction"`
		Want string `json:"expected_hash"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	from, err := ParseAccountID(f.Tx.From)
	if err != nil {
		t.Fatal(err)
	}
	to, err := ParseAccountID(f.Tx.To)
	if err != nil {
		t.Fatal(err)
	}
	tx := Transaction{Op: OpTransfer, From: &from, To: &to, Amount: f.Tx.Amount, Fee: &f.Tx.Fee,
		Memo: f.Tx.Memo, CreatedAtTime: &f.Tx.CreatedAt}
	if got := TxHashHex(&tx); got != f.Want {
		t.Fatalf("transaction hash %s, want %s", got, f.Want)
	}
}

// The anonymous principal's default account, as the ICP ledger and its
// dashboard show it; an all-zero subaccount is that same account.
func TestAccountIDOfAnonymous(t *testing.T) {
	anon, err := icrc3.ParseAccount("2vxsx-fae")
	if err != nil {
		t.Fatal(err)
	}
	const want = "1c7a48ba6a562aa9eaa2481a9049cdf0433b9738c992d698c31d8abf89cadc79"
	for _, sub := range [][]byte{nil, make([]byte, 32)} {
		a := anon
		a.Subaccount = sub
		if id, err := AccountIDOf(a); err != nil || id.String() != want {
			t.Errorf("subaccount %x: %v %v, want %s", sub, id, err, want)
		}
	}
	a := anon
	a.Subaccount = append(make([]byte, 31), 1)
	if id, _ := AccountIDOf(a); id.String() == want {
		t.Error("subaccount 1 has the default account's id")
	}
}
