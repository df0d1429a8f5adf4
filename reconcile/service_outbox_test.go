package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/store"
)

// restart is a new process on the same store and the same stream: nothing
// of the old Service's memory survives.
func (e *svcEnv) restart(log *zap.Logger) {
	e.t.Helper()
	svc, err := reconcile.NewService(reconcile.ServiceConfig{Decider: e.dec, Store: e.st, Sink: e.sink,
		Log: log, Now: func() time.Time { return e.clock }})
	if err != nil {
		e.t.Fatal(err)
	}
	e.svc = svc
}

func (e *svcEnv) outbox() []store.OutboxEntry {
	e.t.Helper()
	es, err := e.st.Outbox(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return es
}

// finalFailSink refuses to publish final verdicts, like a process killed
// between storing one and publishing it.
type finalFailSink struct{ *fakeSink }

func (s finalFailSink) PublishVerdict(ctx context.Context, v reconciled.Verdict, in reconciled.IntentHeader) error {
	if v.Final {
		return errors.New("process killed before publishing")
	}
	return s.fakeSink.PublishVerdict(ctx, v, in)
}

// A final follow-up verdict is stored (its watch deleted in the same
// transaction) and the process dies before publishing it: the intent left
// the work queue long ago and is watched no more, so only the outbox can
// bring it to the stream.
func TestServiceFollowUpVerdictSurvivesCrashBeforePublish(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	e.dec.set("c-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := e.handle(intentBody("c-1", 1)); o.Kind != reconciled.Ack {
		t.Fatalf("%+v", o)
	}
	if got := e.outbox(); len(got) != 0 {
		t.Fatalf("a published verdict stayed in the outbox: %+v", got)
	}

	dying, err := reconcile.NewService(reconcile.ServiceConfig{Decider: e.dec, Store: e.st,
		Sink: finalFailSink{e.sink}, Now: func() time.Time { return e.clock }})
	if err != nil {
		t.Fatal(err)
	}
	e.dec.set("c-1", reconciled.Verdict{Status: reconciled.StatusAbsent})
	if err := dying.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := e.st.LatestVerdict(ctx, "c-1"); err != nil || v.Seq != 2 || !v.Final {
		t.Fatalf("stored %+v %v, want the final seq 2", v, err)
	}
	if ws, _ := e.st.Watches(ctx); len(ws) != 0 {
		t.Fatalf("watches %+v", ws)
	}
	if got := e.sink.seqs("c-1"); len(got) != 1 {
		t.Fatalf("stream seqs %v before the restart", got)
	}
	if got := e.outbox(); len(got) != 1 || got[0] != (store.OutboxEntry{IntentID: "c-1", Seq: 2}) {
		t.Fatalf("outbox %+v", got)
	}

	e.restart(nil)
	if err := e.svc.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.sink.seqs("c-1"); len(got) != 2 || got[1] != 2 {
		t.Fatalf("stream seqs %v after Resume, want [1 2]", got)
	}
	if last, _ := e.sink.LastVerdict(ctx, "c-1"); last.Status != reconciled.StatusAbsent {
		t.Fatalf("stream holds %+v", last)
	}
	if got := e.outbox(); len(got) != 0 {
		t.Fatalf("outbox after Resume %+v", got)
	}
	if n := e.dec.calls["c-1"]; n != 2 {
		t.Fatalf("decided %d times, want 2 (Resume publishes what is stored, it does not decide)", n)
	}
	// Nothing is published twice.
	if err := e.svc.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.sink.seqs("c-1"); len(got) != 2 {
		t.Fatalf("stream seqs %v after a second Resume", got)
	}
}

// A publish that fails during a follow-up round is retried by the next
// round of the same process.
func TestServiceFollowUpRetriesOutbox(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	e.dec.set("r-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := e.handle(intentBody("r-1", 1)); o.Kind != reconciled.Ack {
		t.Fatalf("%+v", o)
	}
	e.dec.set("r-1", reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: 9}})
	e.sink.fail = errors.New("nats down")
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.outbox(); len(got) != 1 {
		t.Fatalf("outbox %+v", got)
	}
	// Still down: the entry stays.
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.outbox(); len(got) != 1 {
		t.Fatalf("outbox %+v", got)
	}
	e.sink.fail = nil
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.sink.seqs("r-1"); len(got) != 2 || got[1] != 2 {
		t.Fatalf("stream seqs %v", got)
	}
	if got := e.outbox(); len(got) != 0 {
		t.Fatalf("outbox %+v", got)
	}
}

// An intake verdict whose publish failed is published by a restart even if
// the work queue never redelivers the intent; a redelivery that publishes
// it clears the entry too.
func TestServiceIntakeVerdictInOutbox(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	e.sink.fail = errors.New("nats down")
	for _, id := range []string{"a-1", "a-2"} {
		e.dec.set(id, reconciled.Verdict{Status: reconciled.StatusFound, Block: &reconciled.BlockRef{Index: 4}})
		if o := e.handle(intentBody(id, 1)); o.Kind != reconciled.Nak {
			t.Fatalf("%s: %+v, want a nak", id, o)
		}
	}
	if got := e.outbox(); len(got) != 2 {
		t.Fatalf("outbox %+v", got)
	}
	e.sink.fail = nil
	if o := e.handle(intentBody("a-1", 1)); o.Kind != reconciled.Ack {
		t.Fatalf("redelivery: %+v", o)
	}
	if got := e.outbox(); len(got) != 1 || got[0].IntentID != "a-2" {
		t.Fatalf("outbox after the redelivery %+v", got)
	}
	e.restart(nil)
	if err := e.svc.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a-1", "a-2"} {
		if got := e.sink.seqs(id); len(got) != 1 || got[0] != 1 {
			t.Fatalf("%s: stream seqs %v", id, got)
		}
	}
	if got := e.outbox(); len(got) != 0 {
		t.Fatalf("outbox %+v", got)
	}
}

// Verdicts read from the stream are there already: they are never queued
// for publishing.
func TestServiceImportBypassesOutbox(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	v := reconciled.Verdict{IntentID: "x-1", Seq: 1, Status: reconciled.StatusAbsent, Final: true, DecidedAt: time.Now().UTC()}
	if err := e.svc.ImportVerdict(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.outbox(); len(got) != 0 {
		t.Fatalf("outbox %+v", got)
	}
}

// historySink refuses, as the verdict stream does, any verdict after a
// final one.
type historySink struct{ *fakeSink }

func (s historySink) PublishVerdict(ctx context.Context, v reconciled.Verdict, in reconciled.IntentHeader) error {
	if last, _ := s.LastVerdict(ctx, v.IntentID); last != nil && last.Final && last.Seq < v.Seq {
		return fmt.Errorf("%w: after final seq %d", reconciled.ErrHistory, last.Seq)
	}
	return s.fakeSink.PublishVerdict(ctx, v, in)
}

// A fresh store meets an intent the stream already answered (another
// instance decided it, this store has not imported it yet): the service
// takes the stream's history instead of deciding a seq 1 of its own, so it
// neither publishes a contradicting seq nor keeps one in its store.
func TestServiceYieldsToTheStreamOnIntake(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	body := intentBody("h-1", 1)
	in, err := matcher.ParseIntent(body)
	if err != nil {
		t.Fatal(err)
	}
	e.sink.verdicts["h-1"] = []reconciled.Verdict{{IntentID: "h-1", Seq: 1, Status: reconciled.StatusFound, Final: true,
		Block: &reconciled.BlockRef{Index: 2}, DecidedAt: time.Now().UTC()}}
	e.sink.headers["h-1"] = reconciled.IntentHeader{Body: in.Canonical(), Hash: in.Hash()}
	e.svc, _ = reconcile.NewService(reconcile.ServiceConfig{Decider: e.dec, Store: e.st,
		Sink: historySink{e.sink}, Now: func() time.Time { return e.clock }})

	e.dec.set("h-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := e.handle(body); o.Kind != reconciled.Ack {
		t.Fatalf("%+v, want an ack: the stream answers it", o)
	}
	if n := e.dec.calls["h-1"]; n != 0 {
		t.Fatalf("decided %d times; the stream held its answer", n)
	}
	if vs, _ := e.st.Verdicts(ctx, "h-1"); len(vs) != 1 || vs[0].Status != reconciled.StatusFound {
		t.Fatalf("stored %+v, want the stream's found", vs)
	}
	if got := e.outbox(); len(got) != 0 {
		t.Fatalf("outbox %+v", got)
	}
	if got := e.sink.seqs("h-1"); len(got) != 1 {
		t.Fatalf("stream seqs %v", got)
	}
}

// Two would-be writers of one intent's next seq: another instance
// published seq 2 (final) while this one's store still ends at seq 1. The
// stream refuses this instance's own seq 2; it discards it and takes the
// stream's, so its store agrees with the stream and nothing is left to
// publish.
func TestServiceYieldsToTheStreamOnFollowUp(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	e.dec.set("h-2", reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := e.handle(intentBody("h-2", 1)); o.Kind != reconciled.Ack {
		t.Fatalf("%+v", o)
	}
	e.sink.mu.Lock()
	e.sink.verdicts["h-2"] = append(e.sink.verdicts["h-2"], reconciled.Verdict{IntentID: "h-2", Seq: 2,
		Status: reconciled.StatusAbsent, Final: true, DecidedAt: time.Now().UTC()})
	e.sink.mu.Unlock()
	e.dec.set("h-2", reconciled.Verdict{Status: reconciled.StatusUnreadable, Reason: &reconciled.Reason{Code: "E_X", Message: "x"}})
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	vs, _ := e.st.Verdicts(ctx, "h-2")
	if len(vs) != 2 || vs[1].Status != reconciled.StatusAbsent {
		t.Fatalf("stored %+v, want the stream's absent at seq 2", vs)
	}
	if got := e.outbox(); len(got) != 0 {
		t.Fatalf("outbox %+v", got)
	}
	if ws, _ := e.st.Watches(ctx); len(ws) != 0 {
		t.Fatalf("watches %+v after the stream's final verdict", ws)
	}
	if got := e.sink.seqs("h-2"); len(got) != 2 {
		t.Fatalf("stream seqs %v", got)
	}
}

// A follow-up decision that fails while the service runs is logged; the
// watches stay for the next round.
func TestServiceFollowUpLogsDecideFailure(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	e.dec.set("d-1", reconciled.Verdict{Status: reconciled.StatusNotYet})
	if o := e.handle(intentBody("d-1", 1)); o.Kind != reconciled.Ack {
		t.Fatalf("%+v", o)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	e.restart(zap.New(core))
	e.dec.err = errors.New("replica unreachable")
	if err := e.svc.FollowUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := logs.FilterMessage("follow-up decision failed").Len(); got != 1 {
		t.Fatalf("logged %+v", logs.All())
	}
	if ws, _ := e.st.Watches(ctx); len(ws) != 1 {
		t.Fatalf("watches %+v", ws)
	}
}

// Every store learns every intent and watches every open one from the
// verdict stream alone: the body comes from the verdict's headers, an
// open verdict puts the intent on the watch list, a final one takes it
// off. This is what lets any instance follow up what another decided.
func TestServiceImportStoresAndWatchesTheIntent(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	in, err := matcher.ParseIntent(intentBody("imp-1", 1))
	if err != nil {
		t.Fatal(err)
	}
	hdr := &reconciled.IntentHeader{Body: in.Canonical(), Hash: in.Hash()}
	v := reconciled.Verdict{IntentID: "imp-1", Seq: 1, Status: reconciled.StatusNotYet, DecidedAt: time.Now().UTC()}
	if err := e.svc.ImportVerdict(ctx, v, hdr); err != nil {
		t.Fatal(err)
	}
	rec, err := e.st.Intent(ctx, "imp-1")
	if err != nil || string(rec.Body) != string(in.Canonical()) || rec.CanisterID != in.Canister.Encode() {
		t.Fatalf("stored intent %+v (%v), want the header's body", rec, err)
	}
	if ws, _ := e.st.Watches(ctx); len(ws) != 1 || ws[0].IntentID != "imp-1" || ws[0].CanisterID != in.Canister.Encode() {
		t.Fatalf("watches %+v, want the imported open intent", ws)
	}
	v.Seq, v.Status, v.Final = 2, reconciled.StatusAbsent, true
	if err := e.svc.ImportVerdict(ctx, v, hdr); err != nil {
		t.Fatal(err)
	}
	if ws, _ := e.st.Watches(ctx); len(ws) != 0 {
		t.Fatalf("watches %+v after the final verdict", ws)
	}
}
