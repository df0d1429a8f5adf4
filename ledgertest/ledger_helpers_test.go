package ledgertest

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// fakeHost hosts canisters in memory so the ledger's rules are tested
// without HTTP; the end-to-end tests use the real Server.
type fakeHost struct {
	mu        sync.Mutex
	now       uint64
	next      uint64
	canisters map[string]Canister
	faults    map[string]Faults
	lastCert  []byte // data passed to the last DataCertificate call
}

func newFakeHost() *fakeHost {
	return &fakeHost{now: 1_700_000_000_000_000_000, canisters: map[string]Canister{}, faults: map[string]Faults{}}
}

func (h *fakeHost) NewCanisterID() principal.Principal {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	raw := make([]byte, 10)
	binary.BigEndian.PutUint64(raw, h.next)
	raw[8], raw[9] = 1, 1
	return principal.Principal{Raw: raw}
}

func (h *fakeHost) Install(c Canister) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.canisters[string(c.ID().Raw)] = c
}

func (h *fakeHost) Faults(id principal.Principal) Faults {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.faults[string(id.Raw)]
}

func (h *fakeHost) setFaults(id principal.Principal, f Faults) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults[string(id.Raw)] = f
}

func (h *fakeHost) Now() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *fakeHost) advance(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.now += uint64(d)
}

func (h *fakeHost) canister(id principal.Principal) Canister {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.canisters[string(id.Raw)]
}

// queryCtx is a query context whose "certificate" is the certified data
// itself, so tests can see which state a reply claims.
func (h *fakeHost) queryCtx() CallContext {
	return CallContext{Caller: principal.AnonymousID, Time: h.Now(), DataCertificate: func(d []byte) []byte {
		h.mu.Lock()
		h.lastCert = append([]byte(nil), d...)
		h.mu.Unlock()
		return append([]byte("cert:"), d...)
	}}
}

func testPrincipal(i int) principal.Principal {
	s := sha256.Sum224([]byte{byte(i), byte(i >> 8), 'p'})
	return principal.Principal{Raw: append(s[:28:28], 0x02)}
}

func sub(b byte) []byte {
	s := make([]byte, 32)
	s[31] = b
	return s
}

func ptr[T any](v T) *T { return &v }

func nat(n uint64) idl.Nat { return idl.NewNat(n) }

func acc(p principal.Principal, s []byte) icrc3.CandidAccount {
	return icrc3.Account{Owner: p, Subaccount: s}.ToCandid()
}

// newTestLedger creates a ledger with two funded accounts (alice, bob).
func newTestLedger(t *testing.T, h *fakeHost, cfg LedgerConfig) (*Ledger, principal.Principal, principal.Principal) {
	t.Helper()
	alice, bob := testPrincipal(1), testPrincipal(2)
	if cfg.InitialBalances == nil {
		cfg.InitialBalances = []Balance{
			{Account: icrc3.Account{Owner: alice}, Amount: icrc3.NatFromUint64(1_000_000_000)},
			{Account: icrc3.Account{Owner: bob}, Amount: icrc3.NatFromUint64(1_000_000_000)},
		}
	}
	l, err := newLedger(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, alice, bob
}

func asTransferErr(t *testing.T, err error) *icrc1.TransferError {
	t.Helper()
	var te *icrc1.TransferError
	if !errors.As(err, &te) {
		t.Fatalf("want *TransferError, got %T %v", err, err)
	}
	return te
}

func decodeOne(t *testing.T, b []byte, out any) {
	t.Helper()
	if err := candid.Unmarshal(b, []any{out}); err != nil {
		t.Fatalf("decode: %v", err)
	}
}

func mustEncode(t *testing.T, v ...any) []byte {
	t.Helper()
	b, err := candid.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// natOf reads a Nat field of a map value.
func natOf(t *testing.T, v icrc3.Value, path ...string) uint64 {
	t.Helper()
	for _, k := range path {
		var ok bool
		if v, ok = v.Get(k); !ok {
			t.Fatalf("no field %v", path)
		}
	}
	n, ok := v.Nat.Uint64()
	if v.Kind != icrc3.KindNat || !ok {
		t.Fatalf("field %v is not a small Nat: %+v", path, v)
	}
	return n
}
