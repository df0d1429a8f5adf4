package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

func verdict(id string, seq uint64, st reconciled.Status) reconciled.Verdict {
	tip := reconciled.U64(1500 + seq)
	ct := reconciled.U64(1791547201000000000 + seq)
	first := reconciled.U64(998)
	v := reconciled.Verdict{
		IntentID: id,
		Seq:      seq,
		Status:   st,
		Final:    st.Final(),
		Window: &reconciled.Window{
			FromTS: 1791547081000000000, ToTS: 1791633721000000000, FirstBlock: &first,
		},
		Evidence:  &reconciled.Evidence{Verified: "certificate+chain", TipIndex: &tip, CertifiedTime: &ct, BlocksRead: 313},
		DecidedAt: time.Date(2026, 11, 29, 15, 0, int(seq), 500, time.UTC),
	}
	switch st {
	case reconciled.StatusFound:
		v.Block = &reconciled.BlockRef{Index: 1042, TS: 1791547201733000000, Hash: "ab12", Kind: "1xfer"}
		v.NearMisses = []reconciled.NearMiss{{Index: 1040, Differs: []string{"amount"}}}
	case reconciled.StatusUnreadable, reconciled.StatusInvalid:
		v.Reason = &reconciled.Reason{Code: "E_TRANSPORT", Message: "connection refused"}
	}
	return v
}

func mustPut(t *testing.T, s *Store, rec reconciled.IntentRecord) {
	t.Helper()
	if r, err := s.PutIntent(context.Background(), rec); err != nil || r != reconciled.PutCreated {
		t.Fatalf("put intent %s: %v %v", rec.IntentID, r, err)
	}
}

func TestVerdictSeqRules(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	mustPut(t, s, intent("i1", 1))

	if err := s.AppendVerdict(ctx, verdict("i1", 2, reconciled.StatusNotYet), nil); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("first verdict at seq 2: %v, want ErrSeqGap", err)
	}
	if err := s.AppendVerdict(ctx, verdict("i1", 0, reconciled.StatusNotYet), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("seq 0: %v, want ErrInvalid", err)
	}
	v1 := verdict("i1", 1, reconciled.StatusNotYet)
	if err := s.AppendVerdict(ctx, v1, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendVerdict(ctx, v1, nil); err != nil {
		t.Fatalf("identical re-append: %v, want no-op", err)
	}
	c1 := v1
	c1.Status, c1.Reason = reconciled.StatusUnreadable, &reconciled.Reason{Code: "E_X", Message: "x"}
	if err := s.AppendVerdict(ctx, c1, nil); !errors.Is(err, ErrSeqConflict) {
		t.Fatalf("different verdict at seq 1: %v, want ErrSeqConflict", err)
	}
	if err := s.AppendVerdict(ctx, verdict("i1", 3, reconciled.StatusNotYet), nil); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("gap: %v, want ErrSeqGap", err)
	}
	if err := s.AppendVerdict(ctx, verdict("i1", 2, reconciled.StatusUnreadable), nil); err != nil {
		t.Fatal(err)
	}
	final := verdict("i1", 3, reconciled.StatusAbsent)
	if err := s.AppendVerdict(ctx, final, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendVerdict(ctx, verdict("i1", 4, reconciled.StatusNotYet), nil); !errors.Is(err, ErrFinal) {
		t.Fatalf("after final: %v, want ErrFinal", err)
	}
	if err := s.AppendVerdict(ctx, verdict("i1", 4, reconciled.StatusFound), nil); !errors.Is(err, ErrFinal) {
		t.Fatalf("final after final: %v, want ErrFinal", err)
	}
	// The final verdict arriving again from the stream is still a no-op,
	// and an older one too.
	if err := s.AppendVerdict(ctx, final, nil); err != nil {
		t.Fatalf("re-append final: %v", err)
	}
	if err := s.AppendVerdict(ctx, v1, nil); err != nil {
		t.Fatalf("re-append old: %v", err)
	}

	vs, err := s.Verdicts(ctx, "i1")
	if err != nil {
		t.Fatal(err)
	}
	want := []reconciled.Status{reconciled.StatusNotYet, reconciled.StatusUnreadable, reconciled.StatusAbsent}
	if len(vs) != len(want) {
		t.Fatalf("%d verdicts, want %d", len(vs), len(want))
	}
	for i, v := range vs {
		if v.Seq != uint64(i+1) || v.Status != want[i] {
			t.Errorf("verdict %d: seq %d status %s, want %d %s", i, v.Seq, v.Status, i+1, want[i])
		}
	}
	latest, err := s.LatestVerdict(ctx, "i1")
	if err != nil || !reflect.DeepEqual(latest, final) {
		t.Fatalf("latest %+v %v\nwant %+v", latest, err, final)
	}
	sum, _, err := s.ListIntents(ctx, ListFilter{})
	if err != nil || len(sum) != 1 || sum[0].Status != reconciled.StatusAbsent || !sum[0].Final || sum[0].LatestSeq != 3 {
		t.Fatalf("status cache %+v %v", sum, err)
	}
}

func TestVerdictValidation(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	bad := verdict("i1", 1, reconciled.StatusFound)
	bad.Final = false
	if err := s.AppendVerdict(ctx, bad, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("found but not final: %v", err)
	}
	bad = verdict("i1", 1, "maybe")
	if err := s.AppendVerdict(ctx, bad, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown status: %v", err)
	}
	bad = verdict("i1", 1, reconciled.StatusNotYet)
	bad.DecidedAt = time.Time{}
	if err := s.AppendVerdict(ctx, bad, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no decided_at: %v", err)
	}
	if _, err := s.LatestVerdict(ctx, "i1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest of nothing: %v", err)
	}
	if vs, err := s.Verdicts(ctx, "i1"); err != nil || len(vs) != 0 {
		t.Fatalf("verdicts of nothing: %v %v", vs, err)
	}
}

// The same verdict reaches the store twice: from the engine that decided it
// and, decoded from JSON, from the verdict stream. Both must compare equal.
func TestVerdictFromStreamIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	local := verdict("i1", 1, reconciled.StatusFound)
	local.NearMisses = append(local.NearMisses, reconciled.NearMiss{Index: 7, Differs: []string{}})
	// A local decision carries a monotonic reading and a local zone.
	local.DecidedAt = time.Now().In(time.FixedZone("X", 3600))
	if err := s.AppendVerdict(ctx, local, nil); err != nil {
		t.Fatal(err)
	}
	wire, err := json.Marshal(local)
	if err != nil {
		t.Fatal(err)
	}
	var remote reconciled.Verdict
	if err := json.Unmarshal(wire, &remote); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendVerdict(ctx, remote, nil); err != nil {
		t.Fatalf("stream copy: %v", err)
	}
	empty := verdict("i2", 1, reconciled.StatusNotYet)
	empty.NearMisses = []reconciled.NearMiss{}
	if err := s.AppendVerdict(ctx, empty, nil); err != nil {
		t.Fatal(err)
	}
	empty.NearMisses = nil
	if err := s.AppendVerdict(ctx, empty, nil); err != nil {
		t.Fatalf("nil vs empty near misses: %v", err)
	}
	got, err := s.LatestVerdict(ctx, "i1")
	if err != nil || !got.DecidedAt.Equal(local.DecidedAt) {
		t.Fatalf("decided_at %v %v, want %v", got.DecidedAt, err, local.DecidedAt)
	}
}

func TestAppendVerdictMaintainsWatch(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	mustPut(t, s, intent("w1", 1))
	mustPut(t, s, intent("w2", 1))
	due := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)

	v1 := verdict("w1", 1, reconciled.StatusNotYet)
	if err := s.AppendVerdict(ctx, v1, &reconciled.Watch{IntentID: "w1", CanisterID: ledgerA, NextCheck: due}); err != nil {
		t.Fatal(err)
	}
	ws, err := s.Watches(ctx)
	if err != nil || len(ws) != 1 {
		t.Fatalf("watches %+v %v", ws, err)
	}
	want := reconciled.Watch{IntentID: "w1", CanisterID: ledgerA, NextCheck: due,
		WindowToTS: uint64(v1.Window.ToTS), LastStatus: reconciled.StatusNotYet}
	if !reflect.DeepEqual(ws[0], want) {
		t.Fatalf("watch %+v\nwant %+v", ws[0], want)
	}

	// A non-final verdict without an entry refreshes the existing one.
	v2 := verdict("w1", 2, reconciled.StatusUnreadable)
	v2.Window.ToTS += 5
	if err := s.AppendVerdict(ctx, v2, nil); err != nil {
		t.Fatal(err)
	}
	ws, _ = s.Watches(ctx)
	if len(ws) != 1 || ws[0].LastStatus != reconciled.StatusUnreadable || ws[0].WindowToTS != uint64(v2.Window.ToTS) ||
		!ws[0].NextCheck.Equal(due) {
		t.Fatalf("after unreadable: %+v", ws)
	}
	// ...and does not create one for an unwatched intent.
	if err := s.AppendVerdict(ctx, verdict("w2", 1, reconciled.StatusNotYet), nil); err != nil {
		t.Fatal(err)
	}
	if ws, _ = s.Watches(ctx); len(ws) != 1 {
		t.Fatalf("unwatched intent got watched: %+v", ws)
	}

	// A final verdict unwatches, in the same transaction.
	if err := s.AppendVerdict(ctx, verdict("w1", 3, reconciled.StatusFound), &reconciled.Watch{IntentID: "w1", CanisterID: ledgerA, NextCheck: due}); err != nil {
		t.Fatal(err)
	}
	if ws, _ = s.Watches(ctx); len(ws) != 0 {
		t.Fatalf("final intent still watched: %+v", ws)
	}
	if err := s.Watch(ctx, reconciled.Watch{IntentID: "w1", CanisterID: ledgerA, NextCheck: due}); !errors.Is(err, ErrFinal) {
		t.Fatalf("watch a final intent: %v, want ErrFinal", err)
	}
	// A rejected append leaves the watch list alone.
	if err := s.Watch(ctx, reconciled.Watch{IntentID: "w2", CanisterID: ledgerA, NextCheck: due}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendVerdict(ctx, verdict("w2", 3, reconciled.StatusAbsent), nil); !errors.Is(err, ErrSeqGap) {
		t.Fatalf("gap: %v", err)
	}
	if ws, _ = s.Watches(ctx); len(ws) != 1 || ws[0].IntentID != "w2" {
		t.Fatalf("rejected append touched the watch list: %+v", ws)
	}
}

func TestWatchList(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	base := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	ledgerB := "ryjl3-tyaaa-aaaaa-aaaba-cai"
	for i, id := range []string{"a", "b", "c", "d"} {
		rec := intent(id, 1)
		if i%2 == 1 {
			rec.CanisterID = ledgerB
		}
		mustPut(t, s, rec)
		if err := s.Watch(ctx, reconciled.Watch{IntentID: id, CanisterID: rec.CanisterID,
			NextCheck: base.Add(time.Duration(3-i) * time.Minute), Attempts: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Watch(ctx, reconciled.Watch{IntentID: "nope", CanisterID: ledgerA, NextCheck: base}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("watch unknown intent: %v, want ErrNotFound", err)
	}
	due, err := s.DueWatches(ctx, base.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if ids := watchIDs(due); !reflect.DeepEqual(ids, []string{"d", "c"}) {
		t.Fatalf("due %v, want [d c] (earliest first)", ids)
	}
	// Replacing an entry reschedules it.
	if err := s.Watch(ctx, reconciled.Watch{IntentID: "d", CanisterID: ledgerB, NextCheck: base.Add(time.Hour), Attempts: 4}); err != nil {
		t.Fatal(err)
	}
	if err := s.Unwatch(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unwatch(ctx, "a"); err != nil {
		t.Fatalf("second unwatch: %v", err)
	}
	all, err := s.Watches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids := watchIDs(all); !reflect.DeepEqual(ids, []string{"c", "b", "d"}) {
		t.Fatalf("watches %v, want [c b d]", ids)
	}
	if all[2].Attempts != 4 {
		t.Fatalf("replaced entry: %+v", all[2])
	}
	g := ByCanister(all)
	if len(g) != 2 || !reflect.DeepEqual(watchIDs(g[ledgerA]), []string{"c"}) ||
		!reflect.DeepEqual(watchIDs(g[ledgerB]), []string{"b", "d"}) {
		t.Fatalf("grouping %+v", g)
	}
}

func watchIDs(ws []reconciled.Watch) []string {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.IntentID
	}
	return ids
}

// A verdict stored in another encoding of the same meaning (an older
// program's field order and spacing) still matches its re-append: the store
// compares verdicts by what they decide.
func TestVerdictComparedByMeaning(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	v := verdict("i1", 1, reconciled.StatusNotYet)
	mustAppend(t, s, v)
	doc, err := json.MarshalIndent(map[string]any{
		"seq": 1, "intent_id": "i1", "status": "not_yet", "final": false, "block": nil,
		"near_misses": []any{}, "window": v.Window, "evidence": v.Evidence, "reason": nil,
		"decided_at": v.DecidedAt.In(time.FixedZone("Y", -7200)),
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE verdicts SET json = ? WHERE intent_id = 'i1' AND seq = 1`, string(doc)); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendVerdict(ctx, v, nil); err != nil {
		t.Fatalf("same meaning, other bytes: %v", err)
	}
	// What a verdict rests on is not what it decides (SameDecision): the
	// same decision with other evidence, as another instance computes it,
	// is the stored verdict, which stays as it is.
	again := v
	ev := *v.Evidence
	ev.BlocksRead++
	again.Evidence = &ev
	if err := s.AppendVerdict(ctx, again, nil); err != nil {
		t.Fatalf("same decision, other evidence: %v", err)
	}
	if got, err := s.LatestVerdict(ctx, "i1"); err != nil || got.Evidence.BlocksRead != v.Evidence.BlocksRead {
		t.Fatalf("stored verdict after a re-append: %+v, %v", got.Evidence, err)
	}
	other := v
	other.Status = reconciled.StatusUnreadable
	if err := s.AppendVerdict(ctx, other, nil); !errors.Is(err, ErrSeqConflict) {
		t.Fatalf("other decision: %v, want ErrSeqConflict", err)
	}
}
