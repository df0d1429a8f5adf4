package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
)

var searchStamp = time.Date(2026, 11, 30, 7, 5, 0, 0, time.UTC)

// payment is a transfer the matcher accepts, from the anonymous principal
// to ledgerA's principal.
func payment(t *testing.T, id, amount, memo string, stamp time.Time) reconciled.IntentRecord {
	t.Helper()
	body := fmt.Sprintf(`{"intent_id":%q,"canister_id":%q,"method":"icrc1_transfer","caller":"2vxsx-fae",`+
		`"args":{"from_subaccount":null,"to":%q,"amount":%q,"fee":null,"memo":%q,"created_at_time":"%d"},"after":"unknown"}`,
		id, ledgerA, ledgerA, amount, hex.EncodeToString([]byte(memo)), stamp.UnixNano())
	in, err := matcher.ParseIntent([]byte(body))
	if err != nil {
		t.Fatalf("payment %s: %v", id, err)
	}
	return reconciled.IntentRecord{IntentID: id, CanisterID: ledgerA, Caller: "2vxsx-fae", Method: "icrc1_transfer",
		Body: []byte(body), Hash: in.Hash(), FirstSeen: stamp.Add(time.Minute)}
}

func found(t *testing.T, s *Store, id string, block, near uint64, decided time.Time) {
	t.Helper()
	v := verdict(id, 1, reconciled.StatusFound)
	v.Block.Index = reconciled.U64(block)
	v.NearMisses = []reconciled.NearMiss{{Index: reconciled.U64(near), Differs: []string{"amount"}}}
	v.DecidedAt = decided
	if err := s.AppendVerdict(context.Background(), v, nil); err != nil {
		t.Fatal(err)
	}
}

func searchIDs(t *testing.T, s *Store, f ListFilter) map[string][]string {
	t.Helper()
	rows, next, err := s.ListIntents(context.Background(), f)
	if err != nil || next != "" {
		t.Fatalf("list %+v: %v (next %q)", f, err, next)
	}
	out := map[string][]string{}
	for _, r := range rows {
		out[r.IntentID] = r.Matches
	}
	return out
}

func TestSearchKeys(t *testing.T) {
	s := openTest(t)
	mustPut(t, s, payment(t, "order-a", "4025000000", "order-10100", searchStamp))
	mustPut(t, s, payment(t, "order-b", "7", "lunch", searchStamp.Add(time.Hour)))
	mustPut(t, s, intent("refused", 1)) // the matcher refuses it: found by caller only
	found(t, s, "order-a", 2001, 2005, searchStamp.Add(2*time.Hour))

	anon, _ := icrc3.ParseAccount("2vxsx-fae")
	aid, err := icp.AccountIDOf(anon)
	if err != nil {
		t.Fatal(err)
	}
	id := aid.String()
	for _, c := range []struct {
		name string
		f    ListFilter
		want map[string][]string
	}{
		{"owner", ListFilter{Keys: []Key{OwnerKey("2vxsx-fae", false)}},
			map[string][]string{"order-a": {"caller"}, "order-b": {"caller"}, "refused": {"caller"}}},
		{"owner prefix, any case", ListFilter{Keys: []Key{OwnerKey("2VXSX", true)}},
			map[string][]string{"order-a": {"caller"}, "order-b": {"caller"}, "refused": {"caller"}}},
		{"to", ListFilter{Keys: []Key{OwnerKey(ledgerA, false)}}, map[string][]string{
			"order-a": {"canister", "to"}, "order-b": {"canister", "to"}, "refused": {"canister"}}},
		{"account id", ListFilter{Keys: []Key{AccountIDKey(id, false)}},
			map[string][]string{"order-a": {"caller"}, "order-b": {"caller"}}},
		{"account id prefix", ListFilter{Keys: []Key{AccountIDKey(id[:10], true)}},
			map[string][]string{"order-a": {"caller"}, "order-b": {"caller"}}},
		{"account", ListFilter{Keys: []Key{AccountKey(anon)}}, map[string][]string{"order-a": {"caller"}, "order-b": {"caller"}}},
		{"amount", ListFilter{Keys: []Key{AmountKey(ledgerA, "4025000000")}}, map[string][]string{"order-a": {"amount"}}},
		{"amount on another ledger", ListFilter{Keys: []Key{AmountKey("aaaaa-aa", "4025000000")}}, map[string][]string{}},
		{"memo", ListFilter{Keys: []Key{MemoKey(hex.EncodeToString([]byte("order-10100")), false)}},
			map[string][]string{"order-a": {"memo"}}},
		{"memo prefix", ListFilter{Keys: []Key{MemoKey(hex.EncodeToString([]byte("order")), true)}},
			map[string][]string{"order-a": {"memo"}}},
		{"memo prefix is not exact", ListFilter{Keys: []Key{MemoKey(hex.EncodeToString([]byte("order")), false)}},
			map[string][]string{}},
		{"block", ListFilter{Keys: []Key{BlockKey(2001)}}, map[string][]string{"order-a": {"block"}}},
		{"near miss", ListFilter{Keys: []Key{BlockKey(2005)}}, map[string][]string{"order-a": {"near_miss"}}},
		{"id prefix", ListFilter{IDPrefix: "order-"}, map[string][]string{"order-a": {"intent_id"}, "order-b": {"intent_id"}}},
		{"either", ListFilter{IDPrefix: "ref", Keys: []Key{BlockKey(2001)}},
			map[string][]string{"order-a": {"block"}, "refused": {"intent_id"}}},
		{"stamp range", ListFilter{StampFrom: searchStamp, StampTo: searchStamp.Add(time.Minute)}, map[string][]string{"order-a": nil}},
		{"stamp range and key", ListFilter{StampFrom: searchStamp.Add(time.Minute), Keys: []Key{OwnerKey("2vxsx-fae", false)}},
			map[string][]string{"order-b": {"caller"}}},
	} {
		if got := searchIDs(t, s, c.f); !mapsEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	rows, _, err := s.ListIntents(context.Background(), ListFilter{IDPrefix: "order-a"})
	if err != nil || len(rows) != 1 || rows[0].Stamp != uint64(searchStamp.UnixNano()) ||
		!rows[0].DecidedAt.Equal(searchStamp.Add(2*time.Hour)) || len(rows[0].Body) == 0 {
		t.Errorf("summary: %+v %v", rows, err)
	}
}

func mapsEqual(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

// A database whose intents were stored before the search keys existed is
// indexed when it is opened.
func TestSearchIndexBackfill(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "recon.db")
	s := openAt(t, path)
	mustPut(t, s, payment(t, "old", "4025000000", "order-10100", searchStamp))
	found(t, s, "old", 2001, 2005, searchStamp.Add(time.Hour))
	// What migration 0004 leaves for a row stored before it: the verdict's
	// terms and times, but no body terms.
	if _, err := s.w.ExecContext(ctx, `DELETE FROM intent_keys WHERE role NOT IN ('block', 'near_miss');
		UPDATE intent_facts SET indexed = 0, stamp = NULL`); err != nil {
		t.Fatal(err)
	}
	if got := searchIDs(t, s, ListFilter{Keys: []Key{AmountKey(ledgerA, "4025000000")}}); len(got) != 0 {
		t.Fatalf("the wipe left the amount key: %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	if got := searchIDs(t, s, ListFilter{Keys: []Key{AmountKey(ledgerA, "4025000000"), BlockKey(2005)}}); !mapsEqual(got,
		map[string][]string{"old": {"amount", "near_miss"}}) {
		t.Errorf("after reopen: %v", got)
	}
	if got := searchIDs(t, s, ListFilter{StampFrom: searchStamp}); len(got) != 1 {
		t.Errorf("stamp after reopen: %v", got)
	}
}

func TestListByDecided(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	// First seen a, b, c; decided c, a, b; d has no verdict.
	for i, id := range []string{"a", "b", "c", "d"} {
		mustPut(t, s, payment(t, id, "1", "", searchStamp.Add(time.Duration(i)*time.Minute)))
	}
	found(t, s, "c", 1, 2, searchStamp.Add(time.Hour))
	found(t, s, "a", 3, 4, searchStamp.Add(2*time.Hour))
	found(t, s, "b", 5, 6, searchStamp.Add(3*time.Hour))
	var got []string
	f := ListFilter{ByDecided: true, Newest: true, Limit: 1}
	for {
		rows, next, err := s.ListIntents(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got = append(got, r.IntentID)
		}
		if next == "" {
			break
		}
		if _, _, err := s.ListIntents(ctx, ListFilter{Newest: true, Cursor: next}); !errors.Is(err, ErrInvalid) {
			t.Errorf("a decided-order cursor in first-seen order: %v", err)
		}
		f.Cursor = next
	}
	if !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Errorf("newest decided first: %v", got)
	}
}

// Migration 0004 indexes what a database written before it holds: the
// verdicts' blocks and decided times in SQL, the bodies when the store opens.
func TestSearchMigrationOfOlderDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "recon.db")
	s := openAt(t, path)
	mustPut(t, s, payment(t, "old", "4025000000", "order-10100", searchStamp))
	found(t, s, "old", 2001, 2005, searchStamp.Add(time.Hour))
	if _, err := s.w.ExecContext(ctx, `DROP TABLE intent_keys; DROP TABLE intent_facts;
		DELETE FROM schema_version WHERE version = 4`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	got := searchIDs(t, s, ListFilter{Keys: []Key{BlockKey(2001), BlockKey(2005), MemoKey(hex.EncodeToString([]byte("order-10100")), false)}})
	if !mapsEqual(got, map[string][]string{"old": {"block", "memo", "near_miss"}}) {
		t.Errorf("after migration: %v", got)
	}
	rows, _, err := s.ListIntents(ctx, ListFilter{ByDecided: true})
	if err != nil || len(rows) != 1 || !rows[0].DecidedAt.Equal(searchStamp.Add(time.Hour)) {
		t.Errorf("decided time after migration: %+v %v", rows, err)
	}
}

// A record handed over with its parsed intent, as the service hands a
// canonical body with the parse of the body it received, is indexed as its
// body alone would be.
func TestParsedIntentIndexesAsItsBody(t *testing.T) {
	bodies := []string{
		string(payment(t, "pay-1", "150000000", "lunch", searchStamp).Body),
		`{"intent_id":"tf-1","canister_id":"mxzaz-hqaaa-aaaar-qaada-cai","method":"icrc2_transfer_from","caller":"2vxsx-fae",` +
			`"args":{"spender_subaccount":null,"from":"2vxsx-fae","to":"mxzaz-hqaaa-aaaar-qaada-cai","amount":"5","fee":"10","memo":null,"created_at_time":"1791547201000000000"}}`,
		`{"intent_id":"ap-1","canister_id":"mxzaz-hqaaa-aaaar-qaada-cai","method":"icrc2_approve","caller":"2vxsx-fae",` +
			`"args":{"from_subaccount":null,"spender":"mxzaz-hqaaa-aaaar-qaada-cai","amount":"5","expected_allowance":null,"expires_at":null,"fee":null,"memo":"00ff","created_at_time":"1791547201000000000"}}`,
	}
	for _, b := range bodies {
		in, err := matcher.ParseIntent([]byte(b))
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		rec := reconciled.IntentRecord{IntentID: in.ID, CanisterID: in.Canister.Encode(), Caller: in.Caller.Encode(), Body: in.Canonical()}
		want, wantStamp := bodyTerms(&rec)
		rec.Parsed = in
		got, gotStamp := bodyTerms(&rec)
		if !slices.Equal(got, want) || gotStamp == nil || wantStamp == nil || *gotStamp != *wantStamp {
			t.Errorf("%s: parsed terms %v stamp %v, from the body %v stamp %v", in.ID, got, gotStamp, want, wantStamp)
		}
		if len(want) < 6 {
			t.Errorf("%s: %d terms %v: want the caller's, the accounts', the ledger's and the amount's", in.ID, len(want), want)
		}
	}
}
