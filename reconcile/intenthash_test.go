package reconcile_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
)

// Every verdict names the body it answers: decided, invalid (hash of the
// raw body), stored, followed up and imported ones alike.
func TestVerdictsCarryIntentHash(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	body := intentBody("h-1", 1)
	in, err := matcher.ParseIntent(body)
	if err != nil {
		t.Fatal(err)
	}
	want := in.HashHex()
	if got := reconcile.IntentHash(body); got != want {
		t.Fatalf("IntentHash of a valid body = %s, want its canonical hash %s", got, want)
	}
	e.dec.set("h-1", reconcile.Verdict{Status: reconcile.StatusNotYet})
	e.handle(body)
	e.dec.set("h-1", reconcile.Verdict{Status: reconcile.StatusFound, Block: &reconcile.BlockRef{Index: 3}})
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	stored, err := e.st.Verdicts(ctx, "h-1")
	if err != nil || len(stored) != 2 {
		t.Fatalf("stored %+v %v", stored, err)
	}
	for _, v := range append(stored, e.sink.verdicts["h-1"]...) {
		if v.IntentHash != want {
			t.Errorf("verdict seq %d (%s) carries intent_hash %q, want %s", v.Seq, v.Status, v.IntentHash, want)
		}
	}
	doc, _ := json.Marshal(stored[1])
	if !json.Valid(doc) || !contains(doc, `"intent_hash":"`+want+`"`) {
		t.Errorf("verdict JSON %s lacks intent_hash", doc)
	}

	// An invalid body is named by the SHA-256 of its bytes as received.
	bad := []byte(`{"intent_id":"h-bad","method":"icrc1_transfer"}`)
	e.handle(bad)
	raw := sha256.Sum256(bad)
	if got := reconcile.IntentHash(bad); got != hex.EncodeToString(raw[:]) {
		t.Fatalf("IntentHash of an invalid body = %s", got)
	}
	vs, err := e.st.Verdicts(ctx, "h-bad")
	if err != nil || len(vs) != 1 || vs[0].Status != reconcile.StatusInvalid || vs[0].IntentHash != hex.EncodeToString(raw[:]) {
		t.Fatalf("invalid verdict %+v %v", vs, err)
	}

	// A verdict decided elsewhere by a version that did not stamp it gets
	// the hash of the body its header carries.
	other := intentBody("h-2", 2)
	oin, _ := matcher.ParseIntent(other)
	v := reconcile.Verdict{IntentID: "h-2", Seq: 1, Status: reconcile.StatusAbsent, Final: true, DecidedAt: e.clock}
	if err := e.svc.ImportVerdict(ctx, v, &reconcile.IntentHeader{Body: oin.Canonical(), Hash: oin.Hash()}); err != nil {
		t.Fatal(err)
	}
	got, err := e.st.LatestVerdict(ctx, "h-2")
	if err != nil || got.IntentHash != oin.HashHex() {
		t.Fatalf("imported verdict %+v %v, want intent_hash %s", got, err, oin.HashHex())
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }
