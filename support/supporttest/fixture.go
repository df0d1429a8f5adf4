package supporttest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/store"
)

// Fixed identities and times of the fixture.
var (
	// Ledger is a ledger with 8 decimals and symbol ICP (see Ledgers).
	Ledger = principal.Principal{Raw: []byte{0, 0, 0, 0, 2, 0, 0, 1, 1, 1}}.Encode()
	// OtherLedger is a ledger Ledgers knows nothing about.
	OtherLedger = principal.Principal{Raw: []byte{0, 0, 0, 0, 2, 0, 0, 2, 1, 1}}.Encode()
	Caller      = principal.Principal{Raw: []byte{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 2}}.Encode()
	OtherCaller = principal.Principal{Raw: []byte{8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 2}}.Encode()
	// Payee is the owner of every "to" account.
	Payee = principal.Principal{Raw: []byte{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 2}}.Encode()
	// PayeeSub is Payee with subaccount 1, the "to" of IDNotYet.
	PayeeSub = icrc3.Account{Owner: principal.Principal{Raw: []byte{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 2}},
		Subaccount: append(make([]byte, 31), 1)}.String()

	// Base is when the first fixture intent was seen; each next one a
	// minute later.
	Base = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	// Stamp is every intent's created_at_time (2026-11-29T11:59:00Z).
	Stamp = uint64(time.Date(2026, 11, 29, 11, 59, 0, 0, time.UTC).UnixNano())
)

// Intent ids of the fixture, one per status.
const (
	IDFound      = "pay-found"
	IDAbsent     = "pay-absent"
	IDNotYet     = "pay-notyet"
	IDUnreadable = "pay-unreadable"
	IDInvalid    = "pay-invalid"
	IDNone       = "pay-new"
	// IDRemote has verdicts but no stored body: another sidecar decided it.
	IDRemote = "remote-found"
)

// FoundBlock is IDFound's block; NearMissBlock is a near miss of IDFound
// and IDAbsent.
const (
	FoundBlock    = 1042
	NearMissBlock = 1040
	RemoteBlock   = 77
)

// Ledgers is the Config.Ledgers of the fixture.
func Ledgers(canister string) (uint8, string, bool) {
	if canister == Ledger {
		return 8, "ICP", true
	}
	return 0, "", false
}

// Now is the store's clock in the fixture: a constant, so that every
// record time (updated_at, and first_seen of intents known only from
// verdicts) is the same whatever the store's internals do, and output that
// shows them can be compared exactly.
func Now() time.Time { return Base.Add(time.Hour) }

// Open opens a store in a temporary directory, closed at the end of the test.
func Open(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.OpenWith(context.Background(), t.TempDir()+"/support.db", store.Options{Now: Now, ReadConns: 2})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

// Body is a transfer intent's JSON.
func Body(id, canister, caller, to, amount string) []byte {
	return fmt.Appendf(nil, `{"intent_id":%q,"canister_id":%q,"method":"icrc1_transfer","caller":%q,`+
		`"args":{"from_subaccount":null,"to":%q,"amount":%q,"fee":null,"memo":"6c756e6368","created_at_time":"%d"},`+
		`"after":"Err.TooOld"}`, id, canister, caller, to, amount, Stamp)
}

// PutIntent stores a transfer intent first seen at seen.
func PutIntent(t testing.TB, st *store.Store, id, canister, caller, to, amount string, seen time.Time) {
	t.Helper()
	body := Body(id, canister, caller, to, amount)
	in, err := matcher.ParseIntent(body)
	if err != nil {
		t.Fatalf("fixture intent %s: %v", id, err)
	}
	put(t, st, reconciled.IntentRecord{IntentID: id, CanisterID: canister, Caller: caller, Method: "icrc1_transfer",
		Body: body, Hash: in.Hash(), FirstSeen: seen})
}

func put(t testing.TB, st *store.Store, rec reconciled.IntentRecord) {
	t.Helper()
	if res, err := st.PutIntent(context.Background(), rec); err != nil || res != reconciled.PutCreated {
		t.Fatalf("put intent %s: %v %v", rec.IntentID, res, err)
	}
}

// PutRefused stores a body the matcher refuses, first seen at seen: it has
// no canonical hash of its own, so the body's digest stands in.
func PutRefused(t testing.TB, st *store.Store, id string, body []byte, seen time.Time) {
	t.Helper()
	put(t, st, reconciled.IntentRecord{IntentID: id, CanisterID: Ledger, Caller: OtherCaller,
		Method: "icrc1_transfer", Body: body, Hash: sha256.Sum256(body), FirstSeen: seen})
}

// Append stores the next verdict.
func Append(t testing.TB, st *store.Store, v reconciled.Verdict) {
	t.Helper()
	v.Final = v.Status.Final()
	if err := st.AppendVerdict(context.Background(), v, nil); err != nil {
		t.Fatalf("append verdict %s/%d: %v", v.IntentID, v.Seq, err)
	}
}

func u64p(v uint64) *reconciled.U64 { u := reconciled.U64(v); return &u }

// Window is the fixture's window: stamp − 2 min .. stamp + 24 h + 2 min,
// blocks 998..1311.
func Window() *reconciled.Window {
	return &reconciled.Window{
		FromTS: reconciled.U64(Stamp - uint64(2*time.Minute)), ToTS: reconciled.U64(Stamp + uint64(24*time.Hour+2*time.Minute)),
		FirstBlock: u64p(998), LastBlock: u64p(1311),
	}
}

// Evidence is the fixture's evidence, certified at certified.
func Evidence(certified time.Time) *reconciled.Evidence {
	return &reconciled.Evidence{Verified: "certificate+chain", TipIndex: u64p(1500),
		TipHash: "ab12", CertifiedTime: u64p(uint64(certified.UnixNano())), BlocksRead: 314}
}

// Seed stores one intent of every status (and one without a verdict, and one
// known only from verdicts), first seen a minute apart from Base in the
// order found, absent, not_yet, unreadable, invalid, none.
func Seed(t testing.TB, st *store.Store) {
	t.Helper()
	at := func(i int) time.Time { return Base.Add(time.Duration(i) * time.Minute) }
	decided := func(i int) time.Time { return Base.Add(time.Hour + time.Duration(i)*time.Minute) }

	PutIntent(t, st, IDFound, Ledger, Caller, Payee, "150000000", at(0))
	Append(t, st, reconciled.Verdict{IntentID: IDFound, Seq: 1, Status: reconciled.StatusNotYet,
		Window: Window(), Evidence: Evidence(Base), DecidedAt: decided(0)})
	Append(t, st, reconciled.Verdict{IntentID: IDFound, Seq: 2, Status: reconciled.StatusFound,
		Block: &reconciled.BlockRef{Index: FoundBlock, TS: reconciled.U64(Stamp + uint64(733*time.Millisecond)),
			Hash: "9f3c0e5d7a", Kind: "xfer"},
		NearMisses: []reconciled.NearMiss{{Index: NearMissBlock, Differs: []string{"amount"}}},
		Window:     Window(), Evidence: Evidence(Base.Add(time.Minute)), DecidedAt: decided(1)})

	PutIntent(t, st, IDAbsent, Ledger, OtherCaller, Payee, "2500000000", at(1))
	Append(t, st, reconciled.Verdict{IntentID: IDAbsent, Seq: 1, Status: reconciled.StatusAbsent,
		NearMisses: []reconciled.NearMiss{{Index: NearMissBlock, Differs: []string{"to", "memo"}}},
		Window:     Window(), Evidence: Evidence(Base.Add(25 * time.Hour)), DecidedAt: decided(2)})

	PutIntent(t, st, IDNotYet, OtherLedger, Caller, PayeeSub, "42", at(2))
	Append(t, st, reconciled.Verdict{IntentID: IDNotYet, Seq: 1, Status: reconciled.StatusNotYet,
		Window: Window(), Evidence: Evidence(Base.Add(2 * time.Minute)), DecidedAt: decided(3)})

	PutIntent(t, st, IDUnreadable, Ledger, Caller, Payee, "1", at(3))
	Append(t, st, reconciled.Verdict{IntentID: IDUnreadable, Seq: 1, Status: reconciled.StatusUnreadable,
		Reason:    &reconciled.Reason{Code: "E_CERTIFICATE", Message: "tip certificate signature does not verify"},
		DecidedAt: decided(4)})

	// Refused by the matcher (no created_at_time), so it carries no
	// canonical hash of its own: any non-zero digest of the body will do.
	bad := fmt.Appendf(nil, `{"intent_id":%q,"canister_id":%q,"method":"icrc1_transfer","caller":%q,`+
		`"args":{"to":%q,"amount":"5"}}`, IDInvalid, Ledger, OtherCaller, Payee)
	put(t, st, reconciled.IntentRecord{IntentID: IDInvalid, CanisterID: Ledger, Caller: OtherCaller,
		Method: "icrc1_transfer", Body: bad, Hash: sha256.Sum256(bad), FirstSeen: at(4)})
	Append(t, st, reconciled.Verdict{IntentID: IDInvalid, Seq: 1, Status: reconciled.StatusInvalid,
		Reason:    &reconciled.Reason{Code: "E_NO_STAMP", Field: "args.created_at_time", Message: "created_at_time is required"},
		DecidedAt: decided(5)})

	PutIntent(t, st, IDNone, Ledger, OtherCaller, Payee, "7", at(5))

	Append(t, st, reconciled.Verdict{IntentID: IDRemote, Seq: 1, Status: reconciled.StatusFound,
		Block:    &reconciled.BlockRef{Index: RemoteBlock, TS: reconciled.U64(Stamp), Hash: "77aa", Kind: "xfer"},
		Evidence: Evidence(Base), DecidedAt: decided(6)})
}
