package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

var listBase = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fillSome stores 20 intents: first seen one second apart except that
// pairs share a second (so the id breaks ties), on two ledgers and two
// callers, with statuses cycling through none, not_yet, found, absent.
func fillSome(t *testing.T, s *Store) []string {
	t.Helper()
	var ids []string
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("i%02d", 19-i) // ids do not sort like first_seen
		rec := intent(id, 1)
		rec.FirstSeen = listBase.Add(time.Duration(i/2) * time.Second)
		if i%2 == 1 {
			rec.CanisterID = "ryjl3-tyaaa-aaaaa-aaaba-cai"
		}
		if i%4 < 2 {
			rec.Caller = "caller-x"
		}
		mustPut(t, s, rec)
		switch i % 4 {
		case 1:
			mustAppend(t, s, verdict(id, 1, reconciled.StatusNotYet))
		case 2:
			mustAppend(t, s, verdict(id, 1, reconciled.StatusNotYet))
			mustAppend(t, s, verdict(id, 2, reconciled.StatusFound))
		case 3:
			mustAppend(t, s, verdict(id, 1, reconciled.StatusAbsent))
		}
		ids = append(ids, id)
	}
	return ids
}

func mustAppend(t *testing.T, s *Store, v reconciled.Verdict) {
	t.Helper()
	if err := s.AppendVerdict(context.Background(), v, nil); err != nil {
		t.Fatalf("append %s/%d: %v", v.IntentID, v.Seq, err)
	}
}

// order is the listing order of fillSome's ids: by first_seen, then id.
func order(ids []string) []string {
	out := make([]string, len(ids))
	for i := 0; i < len(ids); i += 2 {
		a, b := ids[i], ids[i+1]
		if b < a {
			a, b = b, a
		}
		out[i], out[i+1] = a, b
	}
	return out
}

func listAll(t *testing.T, s *Store, f ListFilter) []string {
	t.Helper()
	var ids []string
	for {
		page, next, err := s.ListIntents(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page {
			ids = append(ids, p.IntentID)
		}
		if next == "" {
			return ids
		}
		f.Cursor = next
	}
}

func TestListFilters(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	all := order(fillSome(t, s))
	pick := func(keep func(i int) bool) []string {
		var out []string
		for i, id := range all {
			// all[i] came from fillSome's index j with the same i/2 pair;
			// recover j from the id.
			var j int
			fmt.Sscanf(id, "i%02d", &j)
			if keep(19 - j) {
				out = append(out, all[i])
			}
		}
		return out
	}
	cases := map[string]struct {
		f    ListFilter
		want []string
	}{
		"all":        {ListFilter{}, all},
		"found":      {ListFilter{Status: []reconciled.Status{reconciled.StatusFound}}, pick(func(i int) bool { return i%4 == 2 })},
		"final":      {ListFilter{Status: []reconciled.Status{reconciled.StatusFound, reconciled.StatusAbsent}}, pick(func(i int) bool { return i%4 >= 2 })},
		"no verdict": {ListFilter{Status: []reconciled.Status{""}}, pick(func(i int) bool { return i%4 == 0 })},
		"open":       {ListFilter{Open: true}, pick(func(i int) bool { return i%4 < 2 })},
		"ledger":     {ListFilter{Canister: ledgerA}, pick(func(i int) bool { return i%2 == 0 })},
		"caller":     {ListFilter{Caller: "caller-x"}, pick(func(i int) bool { return i%4 < 2 })},
		"since":      {ListFilter{Since: listBase.Add(7 * time.Second)}, pick(func(i int) bool { return i >= 14 })},
		"combined": {ListFilter{Open: true, Canister: ledgerA, Since: listBase.Add(2 * time.Second)},
			pick(func(i int) bool { return i%4 == 0 && i >= 4 })},
		"small pages": {ListFilter{Limit: 3}, all},
	}
	for name, c := range cases {
		if got := listAll(t, s, c.f); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v\nwant %v", name, got, c.want)
		}
	}
	rev := make([]string, len(all))
	for i, id := range all {
		rev[len(all)-1-i] = id
	}
	if got := listAll(t, s, ListFilter{Newest: true, Limit: 7}); !reflect.DeepEqual(got, rev) {
		t.Errorf("newest first: %v", got)
	}

	counts, err := s.CountByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[reconciled.Status]int{"": 5, reconciled.StatusNotYet: 5, reconciled.StatusFound: 5, reconciled.StatusAbsent: 5}
	if !reflect.DeepEqual(counts, want) {
		t.Fatalf("counts %v, want %v", counts, want)
	}

	page, _, err := s.ListIntents(ctx, ListFilter{Limit: 1})
	if err != nil || len(page) != 1 {
		t.Fatal(page, err)
	}
	p := page[0]
	// all[0] is fillSome's second intent: the other ledger, caller-x, not_yet.
	if p.IntentID != all[0] || !p.HasBody || p.CanisterID == ledgerA || p.Caller != "caller-x" ||
		p.Method != "icrc1_transfer" || !p.FirstSeen.Equal(listBase) || p.Status != reconciled.StatusNotYet ||
		p.Final || p.LatestSeq != 1 {
		t.Fatalf("summary %+v", p)
	}
}

func TestListCursorStableAcrossInserts(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	old := order(fillSome(t, s))
	for _, newest := range []bool{false, true} {
		f := ListFilter{Limit: 4, Newest: newest}
		page, next, err := s.ListIntents(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, p := range page {
			seen[p.IntentID]++
		}
		// Rows arriving mid-listing: later, earlier and tied with the
		// cursor's first_seen.
		cur, _ := decodeCursor(next)
		for i, at := range []time.Time{listBase.Add(time.Hour), listBase.Add(-time.Hour), time.Unix(0, cur.seen)} {
			rec := intent(fmt.Sprintf("new%d-%t", i, newest), 1)
			rec.FirstSeen = at
			mustPut(t, s, rec)
		}
		for next != "" {
			f.Cursor = next
			if page, next, err = s.ListIntents(ctx, f); err != nil {
				t.Fatal(err)
			}
			for _, p := range page {
				seen[p.IntentID]++
			}
		}
		for _, id := range old {
			if seen[id] != 1 {
				t.Errorf("newest=%t: old row %s listed %d times", newest, id, seen[id])
			}
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("newest=%t: %s listed %d times", newest, id, n)
			}
		}
	}
}

func TestListRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	fillSome(t, s)
	_, next, err := s.ListIntents(ctx, ListFilter{Limit: 2})
	if err != nil || next == "" {
		t.Fatal(next, err)
	}
	for name, f := range map[string]ListFilter{
		"garbage cursor": {Cursor: "!!"},
		"forged cursor":  {Cursor: cursor{seen: 1, id: "a b"}.encode()},
		"order changed":  {Cursor: next, Newest: true},
		"negative limit": {Limit: -1},
		"unknown status": {Status: []reconciled.Status{"maybe"}},
	} {
		if _, _, err := s.ListIntents(ctx, f); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
