package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

func TestWatchCount(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	const n = 2301
	for i := range n {
		id := fmt.Sprintf("w%04d", i)
		mustPut(t, s, intent(id, 1))
		if err := s.Watch(ctx, reconciled.Watch{IntentID: id, CanisterID: ledgerA, NextCheck: time.Unix(int64(i), 0)}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	ws, err := s.Watches(ctx)
	all := time.Since(start)
	if err != nil || len(ws) != n {
		t.Fatalf("Watches: %d %v", len(ws), err)
	}
	start = time.Now()
	got, err := s.WatchCount(ctx)
	count := time.Since(start)
	if err != nil || got != n {
		t.Fatalf("WatchCount = %d %v, want %d", got, err, n)
	}
	t.Logf("%d watches: Watches %s, WatchCount %s", n, all, count)
}
