package reconcile_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

// dirBytes is the size of the files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Sizing of the streams: what one intent costs in NATS, per replica. The
// intent stream holds an intent until every consumer acknowledged it (the
// intake purges acknowledged ranges); the verdict stream holds every
// verdict, with the intent's body in its headers, for its max age (30 d),
// whatever the stores' retention. `go test ./reconcile -run
// TestSizingStreams -v` prints the figures docs/sizing.md quotes.
func TestSizingStreams(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "nats")
	c := jetStreamIn(t, dir)
	empty := dirBytes(t, dir)
	sink := queue.Sink{C: c, Origin: "sizing"}
	const n = 2000
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		id := fmt.Sprintf("pay-%08d", i)
		body := intentBody(id, 100000+i)
		if _, err := c.PublishIntent(ctx, "mxzaz-hqaaa-aaaar-qaada-cai", id, body, matcher.IntentHash(body)); err != nil {
			t.Fatal(err)
		}
		hdr := reconciled.IntentHeader{Body: body, Hash: sha256.Sum256(body)}
		tip, ct, first := reconciled.U64(1500), reconciled.U64(1791547201000000000), reconciled.U64(998)
		v := reconciled.Verdict{IntentID: id, Seq: 1, Status: reconciled.StatusNotYet,
			Window:    &reconciled.Window{FromTS: 1791547081000000000, ToTS: 1791633721000000000, FirstBlock: &first},
			Evidence:  &reconciled.Evidence{Verified: "certificate+chain", TipIndex: &tip, CertifiedTime: &ct, BlocksRead: 313},
			DecidedAt: at}
		if err := sink.PublishVerdict(ctx, v, hdr); err != nil {
			t.Fatal(err)
		}
		v.Seq, v.Status, v.Final, v.DecidedAt = 2, reconciled.StatusFound, true, at.Add(10*time.Second)
		v.Block = &reconciled.BlockRef{Index: reconciled.U64(1_000_000 + i), TS: 1791547201733000000, Hash: "ab12", Kind: "1xfer"}
		v.NearMisses = []reconciled.NearMiss{{Index: 1040, Differs: []string{"amount"}}}
		if err := sink.PublishVerdict(ctx, v, hdr); err != nil {
			t.Fatal(err)
		}
	}
	js := c.JetStream()
	var total uint64
	for _, name := range []string{queue.IntentsStream, queue.VerdictsStream} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += info.State.Bytes
		t.Logf("%-10s %6d msgs %9d bytes  %5.0f bytes/intent", name, info.State.Msgs, info.State.Bytes, float64(info.State.Bytes)/n)
		if info.State.Msgs == 0 {
			t.Fatalf("%s holds nothing", name)
		}
	}
	disk := dirBytes(t, dir) - empty
	t.Logf("on disk under the JetStream directory: %d bytes, %.0f bytes/intent (messages %.0f)", disk, float64(disk)/n, float64(total)/n)
}
