package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// An intent that retention pruned from the store and that a tool layer
// then re-publishes is settled from the verdict stream: the same final
// verdict, and no fresh seq 1 history next to the stream's.
func TestServiceRepublishAfterPruneTakesTheStreams(t *testing.T) {
	ctx := context.Background()
	c := jetStream(t)
	dec := &scriptDecider{script: map[string]func() reconciled.Verdict{}, calls: map[string]int{}}
	clock := time.Unix(1_800_000_000, 0)
	st := openStore(t)
	svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: dec, Store: st,
		Sink: queue.Sink{C: c, Origin: "a"}, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	const id = "pruned-1"
	body := intentBody(id, 1)
	dec.set(id, reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := svc.HandleIntent(ctx, body); o.Kind != reconciled.Ack {
		t.Fatalf("first handling: %+v", o)
	}
	clock = clock.Add(time.Minute)
	dec.set(id, reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: 7}})
	if err := svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := st.LatestVerdict(ctx, id); err != nil || v.Seq != 2 || v.Status != reconciled.StatusFound {
		t.Fatalf("before prune: %+v %v, want found at seq 2", v, err)
	}

	clock = clock.Add(48 * time.Hour)
	if n, err := st.PruneFinals(ctx, clock.Add(-24*time.Hour), 0); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want the intent", n, err)
	}
	// Were the ledger asked again it would say otherwise (the payment's
	// blocks left the cache, a replica lies): the stream's final decides.
	dec.set(id, reconciled.Verdict{Status: reconciled.StatusAbsent})
	if o := svc.HandleIntent(ctx, body); o.Kind != reconciled.Ack {
		t.Fatalf("re-published: %+v", o)
	}
	v, err := st.LatestVerdict(ctx, id)
	if err != nil || v.Seq != 2 || v.Status != reconciled.StatusFound || v.Block == nil || v.Block.Index != 7 {
		t.Fatalf("after re-publish the store holds %+v (%v), want the stream's found at seq 2", v, err)
	}
	hist, err := c.VerdictHistory(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, sv := range hist {
		seqs = append(seqs, sv.Verdict.Seq)
	}
	if len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 || hist[1].Verdict.Status != reconciled.StatusFound {
		t.Fatalf("stream holds seqs %v, want [1 2] ending found", seqs)
	}
	if vs, _ := st.Verdicts(ctx, id); len(vs) != 2 {
		t.Fatalf("store holds seqs %v, want [1 2]", seqsOf(vs))
	}
	if ws, _ := st.Watches(ctx); len(ws) != 0 {
		t.Fatalf("a final intent is watched: %+v", ws)
	}
}
