package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

// A scrape reads the store's figures only when the store has been written
// since the last reading, and counts the watch list instead of reading it.
func TestMetricsStoreGaugesCached(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := New(ctx, Config{Instance: "t", DataDir: t.TempDir()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(ctx)
	gauge := func() string {
		var b bytes.Buffer
		if err := d.WriteMetrics(ctx, &b); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, "reconciled_watch_list_size ") {
				return l
			}
		}
		t.Fatalf("no reconciled_watch_list_size in\n%s", b.String())
		return ""
	}
	if g := gauge(); g != "reconciled_watch_list_size 0" {
		t.Fatalf("%q", g)
	}
	body := []byte(`{"intent_id":"w1","method":"icrc1_transfer"}`)
	st := d.Store()
	if _, err := st.PutIntent(ctx, reconciled.IntentRecord{IntentID: "w1", CanisterID: "ryjl3-tyaaa-aaaaa-aaaba-cai", Method: "icrc1_transfer",
		Body: body, Hash: sha256.Sum256(body)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Watch(ctx, reconciled.Watch{IntentID: "w1", CanisterID: "ryjl3-tyaaa-aaaaa-aaaba-cai", NextCheck: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if g := gauge(); g != "reconciled_watch_list_size 1" {
		t.Fatalf("after a write: %q, want 1", g)
	}
	// Without a write in between, a scrape does not read the store.
	for range 3 {
		gen := st.Changes()
		gauge()
		d.gauges.mu.Lock()
		read := d.gauges.gen
		d.gauges.mu.Unlock()
		gauge()
		d.gauges.mu.Lock()
		again := d.gauges.gen
		d.gauges.mu.Unlock()
		if st.Changes() == gen && again != read {
			t.Fatalf("the store was read again with no write since (generation %d -> %d)", read, again)
		}
	}
}
