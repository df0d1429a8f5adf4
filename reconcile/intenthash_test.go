package reconcile_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
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
	if got := matcher.IntentHash(body); got != want {
		t.Fatalf("IntentHash of a valid body = %s, want its canonical hash %s", got, want)
	}
	e.dec.set("h-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	e.handle(body)
	e.dec.set("h-1", reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: 3}})
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
	if got := matcher.IntentHash(bad); got != hex.EncodeToString(raw[:]) {
		t.Fatalf("IntentHash of an invalid body = %s", got)
	}
	vs, err := e.st.Verdicts(ctx, "h-bad")
	if err != nil || len(vs) != 1 || vs[0].Status != reconciled.StatusInvalid || vs[0].IntentHash != hex.EncodeToString(raw[:]) {
		t.Fatalf("invalid verdict %+v %v", vs, err)
	}

	// A verdict decided elsewhere by a version that did not stamp it gets
	// the hash of the body its header carries.
	other := intentBody("h-2", 2)
	oin, _ := matcher.ParseIntent(other)
	v := reconciled.Verdict{IntentID: "h-2", Seq: 1, Status: reconciled.StatusAbsent, Final: true, DecidedAt: e.clock}
	if err := e.svc.ImportVerdict(ctx, v, &reconciled.IntentHeader{Body: oin.Canonical(), Hash: oin.Hash()}); err != nil {
		t.Fatal(err)
	}
	got, err := e.st.LatestVerdict(ctx, "h-2")
	if err != nil || got.IntentHash != oin.HashHex() {
		t.Fatalf("imported verdict %+v %v, want intent_hash %s", got, err, oin.HashHex())
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

// Two stores can each take a different body under one id first; the
// verdict stream holds the one decided first, and the other body's
// publisher is refused rather than left without an answer.
func TestConflictingBodyReachesDaemonOfAnotherStore(t *testing.T) {
	e := newSvcEnv(t)
	taken := intentBody("x-1", 1)
	e.sink.verdicts["x-1"] = []reconciled.Verdict{{IntentID: "x-1", IntentHash: matcher.IntentHash(taken), Seq: 1, Status: reconciled.StatusNotYet}}
	e.dec.set("x-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := e.handle(intentBody("x-1", 2)); o.Kind != reconciled.Ack {
		t.Fatalf("outcome %+v, want ack", o)
	}
	if len(e.sink.rejects) != 1 || e.sink.rejects[0] != "x-1:E_INTENT_CONFLICT" {
		t.Fatalf("rejects %v, want E_INTENT_CONFLICT", e.sink.rejects)
	}
	if got := e.sink.seqs("x-1"); len(got) != 1 {
		t.Fatalf("stream seqs %v: the other body's history must stay", got)
	}
	// Published again, the body this store holds is refused again.
	if o := e.handle(intentBody("x-1", 2)); o.Kind != reconciled.Ack || len(e.sink.rejects) != 2 {
		t.Fatalf("re-publication: %+v, rejects %v", o, e.sink.rejects)
	}
}
