package queue

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

// waitAckFloor waits until the follower has acked through seq (acks are
// sent without waiting for the server).
func waitAckFloor(t *testing.T, c *Conn, durable string, seq uint64) FollowerInfo {
	t.Helper()
	ctx := testCtx(t)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		fi, err := c.FollowerInfo(ctx, durable)
		if err != nil {
			t.Fatal(err)
		}
		if fi.AckFloor >= seq {
			return fi
		}
		select {
		case <-ctx.Done():
			t.Fatalf("ack floor %d, want %d", fi.AckFloor, seq)
		case <-tick.C:
		}
	}
}

// A follower names the store it feeds in its metadata (taking the name on
// a consumer created before consumers named one), reports its progress,
// and, created to start after a sequence, starts there.
func TestFollowerStoreProgressAndStart(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	publish := func(from, to int) {
		for i := from; i <= to; i++ {
			if err := c.PublishVerdict(ctx, verdict(fmt.Sprintf("f-%d", i), 1, reconciled.StatusAbsent)); err != nil {
				t.Fatal(err)
			}
		}
	}
	ids := func(vs []reconciled.Verdict) string {
		var s []string
		for _, v := range vs {
			s = append(s, v.IntentID)
		}
		return fmt.Sprint(s)
	}
	fi, err := c.FollowerInfo(ctx, "store")
	if err != nil || fi.Exists || fi.Stream == "" {
		t.Fatalf("before any follower: %+v %v", fi, err)
	}
	stream := fi.Stream
	publish(1, 3)
	followN(t, c, FollowConfig{Durable: "store"}, 3)
	if fi := waitAckFloor(t, c, "store", 3); !fi.Exists || fi.StoreID != "" || fi.Stream != stream {
		t.Fatalf("a follower without a store: %+v", fi)
	}

	publish(4, 4)
	var mu sync.Mutex
	var reports []FollowProgress
	cfg := FollowConfig{Durable: "store", StoreID: "store-a", StartAfter: 1, Progress: func(p FollowProgress) {
		mu.Lock()
		reports = append(reports, p)
		mu.Unlock()
	}}
	if got := ids(followN(t, c, cfg, 1)); got != "[f-4]" {
		t.Fatalf("an existing follower read %s, want it to continue (StartAfter applies to a new one)", got)
	}
	mu.Lock()
	if want := []FollowProgress{{Seq: 3, Pending: 1}, {Seq: 0, Pending: 1}, {Seq: 4, Pending: 0}}; !slices.Equal(reports, want) {
		t.Fatalf("progress %+v, want %+v", reports, want)
	}
	mu.Unlock()
	if fi := waitAckFloor(t, c, "store", 4); fi.StoreID != "store-a" {
		t.Fatalf("the follower's store after naming one: %+v", fi)
	}

	if err := c.ForgetFollower(ctx, "store"); err != nil {
		t.Fatal(err)
	}
	cfg.Progress = nil
	if got := ids(followN(t, c, cfg, 3)); got != "[f-2 f-3 f-4]" {
		t.Fatalf("a new follower to start after seq 1 read %s", got)
	}
}
