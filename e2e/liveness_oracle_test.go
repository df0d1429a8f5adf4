package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

// TestLivenessOracle shows that the liveness oracle fails on what it must
// catch: a synthetic history of each kind of failure counts once in its
// own column and nowhere else, and a live world whose intake silently
// drops one intent counts that intent lost.
func TestLivenessOracle(t *testing.T) {
	t.Run("synthetic", func(t *testing.T) {
		ready := time.Unix(1_000, 0)
		allowed := 10 * time.Second
		v := func(seq uint64, st reconciled.Status) reconciled.Verdict {
			return reconciled.Verdict{IntentID: "x", IntentHash: "aa", Seq: seq, Status: st, Final: st.Final()}
		}
		absent := &plannedIntent{ID: "x", Class: classAbsent}
		cases := []struct {
			name    string
			vs      []reconciled.Verdict
			finalIn time.Duration // 0: never seen by the feed
			field   func(r *lvResult) int
		}{
			{"lost", nil, 0, func(r *lvResult) int { return r.lost }},
			{"stuck", []reconciled.Verdict{v(1, reconciled.StatusNotYet)}, 0, func(r *lvResult) int { return r.stuck }},
			{"late", []reconciled.Verdict{v(1, reconciled.StatusNotYet), v(2, reconciled.StatusAbsent)}, allowed + time.Second,
				func(r *lvResult) int { return r.late }},
			{"gap", []reconciled.Verdict{v(1, reconciled.StatusNotYet), v(3, reconciled.StatusAbsent)}, time.Second,
				func(r *lvResult) int { return r.gaps }},
			{"wrong", []reconciled.Verdict{v(1, reconciled.StatusFound)}, time.Second, func(r *lvResult) int { return r.wrong }},
			{"two bodies", []reconciled.Verdict{v(1, reconciled.StatusNotYet), func() reconciled.Verdict {
				x := v(2, reconciled.StatusAbsent)
				x.IntentHash = "bb"
				return x
			}()}, time.Second, func(r *lvResult) int { return r.wrong }},
		}
		for _, c := range cases {
			res := &lvResult{}
			fin := map[string]time.Time{}
			if c.finalIn > 0 {
				fin["x"] = ready.Add(c.finalIn)
			}
			judge(res, []*lvIntent{{plannedIntent: absent, readyAt: ready}}, map[string][]reconciled.Verdict{"x": c.vs}, fin, allowed)
			total := res.lost + res.stuck + res.late + res.gaps + res.wrong
			if c.field(res) != 1 || total != 1 || !res.failed() {
				t.Errorf("%s: counted lost %d stuck %d late %d gaps %d wrong %d; problems %v", c.name,
					res.lost, res.stuck, res.late, res.gaps, res.wrong, res.problems)
			}
		}
		// And a sound history passes.
		res := &lvResult{}
		judge(res, []*lvIntent{{plannedIntent: absent, readyAt: ready}},
			map[string][]reconciled.Verdict{"x": {v(1, reconciled.StatusNotYet), v(2, reconciled.StatusAbsent)}},
			map[string]time.Time{"x": ready.Add(time.Second)}, allowed)
		if res.failed() {
			t.Errorf("a sound history failed: %v", res.problems)
		}
	})
	t.Run("live", func(t *testing.T) {
		k := &lvKind{name: "dropped_intent", minInst: 1}
		w := newLvWorld(t, k, int64(*seedFlag), 4)
		w.allowed = 3 * time.Second
		victim := w.plan[1]
		msgID := queue.IntentMsgID(victim.ID, matcher.IntentHash(victim.Body))
		w.intake = func(_ int, dl *queue.Delivery) bool {
			if dl.MsgID != msgID {
				return true
			}
			// Acknowledged without a verdict: gone for good.
			_ = dl.Ack(t.Context())
			return false
		}
		w.burst(func() {}, func() {})
		w.finish()
		if w.res.lost != 1 || w.res.stuck+w.res.late+w.res.wrong+w.res.gaps+w.res.storeDiffs != 0 {
			t.Fatalf("one intent dropped by the intake: lost %d stuck %d late %d wrong %d gaps %d stores %d; %s",
				w.res.lost, w.res.stuck, w.res.late, w.res.wrong, w.res.gaps, w.res.storeDiffs, strings.Join(w.res.problems, "\n"))
		}
		if !strings.Contains(w.res.problems[0], victim.ID) {
			t.Fatalf("the loss is not named: %v", w.res.problems)
		}
	})
}
