package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

func TestCheckRetentionRefusesBelowHorizon(t *testing.T) {
	if err := CheckRetention(DefaultRetention, DefaultRepublishHorizon); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if err := CheckRetention(25*time.Hour, 25*time.Hour); err != nil {
		t.Fatalf("retention at the horizon: %v", err)
	}
	if err := CheckRetention(24*time.Hour, 25*time.Hour); !errors.Is(err, ErrRetentionTooShort) {
		t.Fatalf("retention below the horizon: %v, want ErrRetentionTooShort", err)
	}
	if err := CheckRetention(time.Hour, 0); err == nil {
		t.Fatal("a zero horizon was accepted")
	}
}

// A retention round prunes the final intents decided longer ago than the
// retention, counts them in reconciled_store_pruned_intents_total and logs
// the round.
func TestRetentionRoundPrunesAndCounts(t *testing.T) {
	ctx := context.Background()
	d, logs := bareDaemon(t, Config{Retention: 48 * time.Hour, RepublishHorizon: DefaultRepublishHorizon, BlockCacheMargin: time.Hour})
	st := d.store
	d.engine = reconcile.NewEngine(nil, st, nil)
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	for id, age := range map[string]time.Duration{"old": 72 * time.Hour, "young": 24 * time.Hour} {
		body := fmt.Sprintf(`{"intent_id":%q,"canister_id":"l","method":"icrc1_transfer"}`, id)
		rec := reconciled.IntentRecord{IntentID: id, CanisterID: "l", Method: "icrc1_transfer",
			Body: []byte(body), Hash: sha256.Sum256([]byte(body))}
		v := reconciled.Verdict{IntentID: id, Seq: 1, Status: reconciled.StatusAbsent, Final: true, DecidedAt: now.Add(-age)}
		if _, err := st.PutIntentDecided(ctx, rec, v, nil); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkPublished(ctx, id, 1); err != nil {
			t.Fatal(err)
		}
	}
	d.retentionRound(ctx, now)
	if got := gaugeByLabel(t, d, "reconciled_store_pruned_intents_total", "")[""]; got != 1 {
		t.Fatalf("reconciled_store_pruned_intents_total %v, want 1", got)
	}
	if _, err := st.Intent(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old intent after the round: %v", err)
	}
	if _, err := st.Intent(ctx, "young"); err != nil {
		t.Fatalf("young intent after the round: %v", err)
	}
	es := logs.FilterMessage("retention pruned final intents").All()
	if len(es) != 1 || es[0].ContextMap()["intents"] != int64(1) {
		t.Fatalf("round logged %+v", es)
	}
}
