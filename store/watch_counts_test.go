package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

// WatchCounts counts each ledger's watch entries, and names no ledger
// without one.
func TestWatchCounts(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.WatchCounts(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v %v", got, err)
	}
	for i, l := range []string{"a", "b", "a", "a"} {
		id := string(rune('p' + i))
		rec := reconciled.IntentRecord{IntentID: id, CanisterID: l, Caller: "2vxsx-fae", Method: "icrc1_transfer", Body: []byte(`{"intent_id":"` + id + `"}`)}
		rec.Hash[0] = byte(i + 1)
		if _, err := s.PutIntent(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := s.Watch(ctx, reconciled.Watch{IntentID: id, CanisterID: l, NextCheck: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.WatchCounts(ctx)
	if err != nil || len(got) != 2 || got["a"] != 3 || got["b"] != 1 {
		t.Fatalf("counts %v %v, want a:3 b:1", got, err)
	}
}
