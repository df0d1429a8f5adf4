package supporttest

import (
	"context"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/store"
)

// Intents of the console fixture, added by SeedConsole on top of Seed.
const (
	// IDOrder paid 40.25 ICP with memo MemoOrder, stamped at OrderStamp;
	// found in OrderBlock.
	IDOrder = "pay-order"
	// IDNearAbsent is absent, but a block with its stamp and sending
	// account moved NearAmount to someone else.
	IDNearAbsent = "pay-absent-near"
	// IDApprove is an approve that was found.
	IDApprove = "pay-approve"
	// Bulk intents are named BulkPrefix + three digits, BulkCount of them.
	BulkPrefix = "bulk-"
	BulkCount  = 130

	MemoOrder      = "order-10100"
	OrderBlock     = 2001
	NearMissBlock2 = 2005
	ApproveBlock   = 2010
	// NearAmount is what the near miss of IDNearAbsent moved: 2.5 ICP.
	NearAmount = "250000000"
)

var (
	// OrderStamp is IDOrder's created_at_time: 2026-11-30T07:05:00Z.
	OrderStamp = time.Date(2026, 11, 30, 7, 5, 0, 0, time.UTC)
	// BulkStamp is the first bulk intent's stamp; each next one a minute
	// later.
	BulkStamp = time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
)

// Args is the args object of a fixture intent; nil values are JSON null.
type Args map[string]any

// IntentBody is an intent's JSON with the given method and args.
func IntentBody(id, canister, method, caller string, args Args) []byte {
	b := fmt.Appendf(nil, `{"intent_id":%q,"canister_id":%q,"method":%q,"caller":%q,"args":{`, id, canister, method, caller)
	first := true
	for _, k := range []string{"from_subaccount", "spender_subaccount", "from", "to", "spender", "amount",
		"expected_allowance", "expires_at", "fee", "memo", "created_at_time"} {
		v, ok := args[k]
		if !ok {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		if v == nil {
			b = fmt.Appendf(b, "%q:null", k)
		} else {
			b = fmt.Appendf(b, "%q:%q", k, v)
		}
	}
	return append(b, `},"after":"unknown"}`...)
}

// PutBody stores an intent the matcher accepts.
func PutBody(t testing.TB, st *store.Store, body []byte, seen time.Time) {
	t.Helper()
	in, err := matcher.ParseIntent(body)
	if err != nil {
		t.Fatalf("fixture intent %s: %v", body, err)
	}
	put(t, st, reconciled.IntentRecord{IntentID: in.ID, CanisterID: in.Canister.Encode(), Caller: in.Caller.Encode(),
		Method: string(in.Method), Body: body, Hash: in.Hash(), FirstSeen: seen})
}

func ns(t time.Time) string { return fmt.Sprint(t.UnixNano()) }

// SeedConsole adds, on top of Seed, what the support page's browser test
// looks for: a payment with a text memo, an absent intent with a near miss
// that moved money, a found approve, a watch entry for the unreadable
// intent, and BulkCount found intents whose decided order is the reverse of
// their first-seen order.
func SeedConsole(t testing.TB, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	memo := hex.EncodeToString([]byte(MemoOrder))
	PutBody(t, st, IntentBody(IDOrder, Ledger, "icrc1_transfer", Caller, Args{"from_subaccount": nil, "to": Payee,
		"amount": "4025000000", "fee": nil, "memo": memo, "created_at_time": ns(OrderStamp)}), Base.Add(10*time.Minute))
	Append(t, st, reconciled.Verdict{IntentID: IDOrder, Seq: 1, Status: reconciled.StatusFound,
		Block: &reconciled.BlockRef{Index: OrderBlock, TS: reconciled.U64(OrderStamp.Add(800 * time.Millisecond).UnixNano()),
			Hash: "c0ffee01", Kind: "xfer"},
		Window: Window(), Evidence: Evidence(Base.Add(time.Hour)), DecidedAt: Base.Add(70 * time.Minute)})

	nearStamp := OrderStamp.Add(time.Second)
	PutBody(t, st, IntentBody(IDNearAbsent, Ledger, "icrc1_transfer", Caller, Args{"from_subaccount": nil, "to": Payee,
		"amount": "200000000", "fee": nil, "memo": hex.EncodeToString([]byte("order-10200")), "created_at_time": ns(nearStamp)}),
		Base.Add(11*time.Minute))
	ev := Evidence(Base.Add(26 * time.Hour))
	ev.BlocksRead = 0
	Append(t, st, reconciled.Verdict{IntentID: IDNearAbsent, Seq: 1, Status: reconciled.StatusAbsent,
		NearMisses: []reconciled.NearMiss{nearMiss(nearStamp)},
		Window:     Window(), Evidence: ev, DecidedAt: Base.Add(71 * time.Minute)})

	PutBody(t, st, IntentBody(IDApprove, Ledger, "icrc2_approve", Caller, Args{"from_subaccount": nil, "spender": OtherCaller,
		"amount": "100000000", "expected_allowance": nil, "expires_at": nil, "fee": nil, "memo": nil,
		"created_at_time": ns(OrderStamp.Add(2 * time.Second))}), Base.Add(12*time.Minute))
	Append(t, st, reconciled.Verdict{IntentID: IDApprove, Seq: 1, Status: reconciled.StatusFound,
		Block: &reconciled.BlockRef{Index: ApproveBlock, TS: reconciled.U64(OrderStamp.Add(3 * time.Second).UnixNano()),
			Hash: "c0ffee10", Kind: "approve"},
		Window: Window(), Evidence: Evidence(Base.Add(time.Hour)), DecidedAt: Base.Add(72 * time.Minute)})

	if err := st.Watch(ctx, reconciled.Watch{IntentID: IDUnreadable, CanisterID: Ledger,
		NextCheck: Base.Add(90 * time.Minute), Attempts: 4, LastStatus: reconciled.StatusUnreadable}); err != nil {
		t.Fatalf("watch %s: %v", IDUnreadable, err)
	}

	for i := range BulkCount {
		id := fmt.Sprintf("%s%03d", BulkPrefix, i)
		stamp := BulkStamp.Add(time.Duration(i) * time.Minute)
		PutBody(t, st, IntentBody(id, Ledger, "icrc1_transfer", OtherCaller, Args{"from_subaccount": nil, "to": Payee,
			"amount": fmt.Sprint((i + 1) * 1_000_000), "fee": nil, "memo": nil, "created_at_time": ns(stamp)}),
			Base.Add(20*time.Minute+time.Duration(i)*time.Second))
		Append(t, st, reconciled.Verdict{IntentID: id, Seq: 1, Status: reconciled.StatusFound,
			Block: &reconciled.BlockRef{Index: reconciled.U64(3000 + i), TS: reconciled.U64(stamp.Add(time.Second).UnixNano()),
				Hash: fmt.Sprintf("b%03d", i), Kind: "xfer"},
			Window: Window(), Evidence: Evidence(Base.Add(time.Hour)), DecidedAt: Base.Add(5*time.Hour - time.Duration(i)*time.Minute)})
	}
}

// nearMiss is IDNearAbsent's near miss: the same stamp and sender, but 2.5
// ICP to OtherCaller.
func nearMiss(stamp time.Time) reconciled.NearMiss {
	memo := hex.EncodeToString([]byte("order-10200"))
	return reconciled.NearMiss{Index: NearMissBlock2, Differs: []string{"to", "amount"},
		Block: &reconciled.NearMissBlock{Kind: "xfer", TS: reconciled.U64(stamp.Add(400 * time.Millisecond).UnixNano()),
			From: Caller, To: OtherCaller, Amount: NearAmount, Fee: "10000", Memo: &memo}}
}
