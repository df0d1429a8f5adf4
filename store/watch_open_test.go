package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

// Open intents imported without a watch entry (as a store written before
// every store watched the fleet's open intents holds them) are adopted;
// final ones and watched ones are left alone.
func TestWatchOpenIntents(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(id string) {
		rec := reconciled.IntentRecord{IntentID: id, CanisterID: "mxzaz-hqaaa-aaaar-qaada-cai", Caller: "2vxsx-fae", Method: "icrc1_transfer",
			Body: []byte(`{"intent_id":"` + id + `"}`)}
		rec.Hash[0] = byte(len(id))
		if _, err := s.PutIntent(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	verdict := func(id string, seq uint64, st reconciled.Status) reconciled.Verdict {
		return reconciled.Verdict{IntentID: id, Seq: seq, Status: st, Final: st.Final(), DecidedAt: time.Now().UTC()}
	}
	put("open-1")
	if err := s.AppendVerdict(ctx, verdict("open-1", 1, reconciled.StatusNotYet), nil); err != nil {
		t.Fatal(err)
	}
	put("done-2")
	if err := s.AppendVerdict(ctx, verdict("done-2", 1, reconciled.StatusAbsent), nil); err != nil {
		t.Fatal(err)
	}
	put("watched-3")
	if err := s.AppendVerdict(ctx, verdict("watched-3", 1, reconciled.StatusUnreadable), &reconciled.Watch{IntentID: "watched-3", CanisterID: "mxzaz-hqaaa-aaaar-qaada-cai", NextCheck: time.Now().Add(time.Hour), Attempts: 3}); err != nil {
		t.Fatal(err)
	}
	n, err := s.WatchOpenIntents(ctx)
	if err != nil || n != 1 {
		t.Fatalf("adopted %d (%v), want 1", n, err)
	}
	ws, err := s.Watches(ctx)
	if err != nil || len(ws) != 2 || ws[0].IntentID != "open-1" || ws[0].LastStatus != reconciled.StatusNotYet || ws[1].Attempts != 3 {
		t.Fatalf("watches %+v (%v)", ws, err)
	}
	if n, err := s.WatchOpenIntents(ctx); err != nil || n != 0 {
		t.Fatalf("second call adopted %d (%v)", n, err)
	}
}
