package queue

import (
	"fmt"
	"testing"

	"github.com/reconciled/reconciled"
)

// A follower forgotten (its store started empty) reads the whole stream
// again under the same name; forgetting one that does not exist is no
// error.
func TestForgetFollowerReadsTheStreamAgain(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	if err := c.ForgetFollower(ctx, "store"); err != nil {
		t.Fatalf("forget a follower that never was: %v", err)
	}
	for i := 1; i <= 2; i++ {
		if err := c.PublishVerdict(ctx, verdict(fmt.Sprintf("f-%d", i), 1, reconciled.StatusAbsent)); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(vs []reconciled.Verdict) string {
		var s []string
		for _, v := range vs {
			s = append(s, v.IntentID)
		}
		return fmt.Sprint(s)
	}
	if got := ids(followN(t, c, FollowConfig{Durable: "store"}, 2)); got != "[f-1 f-2]" {
		t.Fatalf("first follow %s", got)
	}
	if err := c.PublishVerdict(ctx, verdict("f-3", 1, reconciled.StatusAbsent)); err != nil {
		t.Fatal(err)
	}
	if err := c.ForgetFollower(ctx, "store"); err != nil {
		t.Fatal(err)
	}
	if got := ids(followN(t, c, FollowConfig{Durable: "store"}, 3)); got != "[f-1 f-2 f-3]" {
		t.Fatalf("after forgetting: %s, want the whole stream", got)
	}
}
