package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reconciled/reconciled/reconcile"
)

// ServiceStore adapts a Store to reconcile.Store, translating records and
// errors (the reconcile package cannot import this one).
type ServiceStore struct{ S *Store }

var _ reconcile.Store = ServiceStore{}

// mapErr wraps store errors with the reconcile sentinel of the same
// meaning, keeping the original in the chain.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%w: %w", reconcile.ErrNotFound, err)
	case errors.Is(err, ErrSeqConflict), errors.Is(err, ErrSeqGap), errors.Is(err, ErrFinal):
		return fmt.Errorf("%w: %w", reconcile.ErrHistory, err)
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrOutOfRange):
		return fmt.Errorf("%w: %w", reconcile.ErrInvalidRecord, err)
	}
	return err
}

func (a ServiceStore) PutIntent(ctx context.Context, rec reconcile.IntentRecord) (reconcile.PutResult, error) {
	res, err := a.S.PutIntent(ctx, intentRecord(rec))
	return putResult(rec.ID, res, err)
}

func (a ServiceStore) PutIntentDecided(ctx context.Context, rec reconcile.IntentRecord, v reconcile.Verdict, w *reconcile.Watch) (reconcile.PutResult, error) {
	res, err := a.S.PutIntentDecided(ctx, intentRecord(rec), v, watchEntry(w))
	return putResult(rec.ID, res, err)
}

func intentRecord(rec reconcile.IntentRecord) IntentRecord {
	return IntentRecord{IntentID: rec.ID, CanisterID: rec.Canister, Caller: rec.Caller, Method: rec.Method,
		Body: rec.Body, CanonicalHash: rec.Hash, Parsed: rec.Intent}
}

func watchEntry(w *reconcile.Watch) *WatchEntry {
	if w == nil {
		return nil
	}
	return &WatchEntry{IntentID: w.IntentID, CanisterID: w.Canister, NextCheck: w.NextCheck, Attempts: w.Attempts}
}

// putResult translates what PutIntent and PutIntentDecided return.
func putResult(id string, res PutResult, err error) (reconcile.PutResult, error) {
	if err != nil {
		return 0, mapErr(err)
	}
	switch res {
	case Created:
		return reconcile.PutCreated, nil
	case Existing:
		return reconcile.PutExisting, nil
	case Conflict:
		return reconcile.PutConflict, nil
	case Adopted:
		return reconcile.PutAdopted, nil
	}
	return 0, fmt.Errorf("store: put intent %s: unexpected result %v", id, res)
}

func (a ServiceStore) Intent(ctx context.Context, id string) (reconcile.IntentRecord, error) {
	r, err := a.S.Intent(ctx, id)
	if err != nil {
		return reconcile.IntentRecord{}, mapErr(err)
	}
	return reconcile.IntentRecord{ID: r.IntentID, Canister: r.CanisterID, Caller: r.Caller, Method: r.Method,
		Body: r.Body, Hash: r.CanonicalHash}, nil
}

func (a ServiceStore) AppendVerdict(ctx context.Context, v reconcile.Verdict, w *reconcile.Watch) error {
	if w == nil {
		return mapErr(a.S.AppendVerdict(ctx, v))
	}
	return mapErr(a.S.AppendVerdictWatch(ctx, v, WatchEntry{
		IntentID: w.IntentID, CanisterID: w.Canister, NextCheck: w.NextCheck, Attempts: w.Attempts,
	}))
}

func (a ServiceStore) AppendDecided(ctx context.Context, v reconcile.Verdict, w *reconcile.Watch) error {
	return mapErr(a.S.AppendDecided(ctx, v, watchEntry(w)))
}

// MarkPublished queues the mark (Store.MarkPublishedLater): the service
// acks the intent without waiting for a commit that only saves a lookup.
func (a ServiceStore) MarkPublished(_ context.Context, id string, seq uint64) error {
	a.S.MarkPublishedLater(id, seq)
	return nil
}

// Unpublished lists each intent with outbox rows once: re-publishing its
// latest verdict settles all of them.
func (a ServiceStore) Unpublished(ctx context.Context) ([]string, error) {
	es, err := a.S.Outbox(ctx)
	if err != nil {
		return nil, mapErr(err)
	}
	var ids []string
	for _, e := range es {
		if n := len(ids); n == 0 || ids[n-1] != e.IntentID {
			ids = append(ids, e.IntentID)
		}
	}
	return ids, nil
}

func (a ServiceStore) DiscardUnpublished(ctx context.Context, id string, seq uint64) error {
	return mapErr(a.S.DiscardUnpublished(ctx, id, seq))
}

func (a ServiceStore) UnpublishedBefore(ctx context.Context, id string, seq uint64) (bool, error) {
	ok, err := a.S.UnpublishedBefore(ctx, id, seq)
	return ok, mapErr(err)
}

func (a ServiceStore) Verdicts(ctx context.Context, id string) ([]reconcile.Verdict, error) {
	vs, err := a.S.Verdicts(ctx, id)
	return vs, mapErr(err)
}

func (a ServiceStore) AppendAfterGap(ctx context.Context, v reconcile.Verdict, w *reconcile.Watch) error {
	return mapErr(a.S.AppendAfterGap(ctx, v, watchEntry(w)))
}

func (a ServiceStore) ReplaceIntent(ctx context.Context, rec reconcile.IntentRecord, vs []reconcile.Verdict, w *reconcile.Watch) error {
	return mapErr(a.S.ReplaceIntent(ctx, intentRecord(rec), vs, watchEntry(w)))
}

func (a ServiceStore) LatestVerdict(ctx context.Context, id string) (reconcile.Verdict, error) {
	v, err := a.S.LatestVerdict(ctx, id)
	return v, mapErr(err)
}

func (a ServiceStore) Watches(ctx context.Context) ([]reconcile.Watch, error) {
	ws, err := a.S.Watches(ctx)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]reconcile.Watch, len(ws))
	for i, w := range ws {
		out[i] = reconcile.Watch{IntentID: w.IntentID, Canister: w.CanisterID, NextCheck: w.NextCheck, Attempts: w.Attempts,
			LastStatus: w.LastStatus}
	}
	return out, nil
}

// Reschedule keeps the entry's status and window end in step with the
// intent's latest verdict, which listings show.
func (a ServiceStore) Reschedule(ctx context.Context, w reconcile.Watch) error {
	e := WatchEntry{IntentID: w.IntentID, CanisterID: w.Canister, NextCheck: w.NextCheck, Attempts: w.Attempts}
	v, err := a.S.LatestVerdict(ctx, w.IntentID)
	switch {
	case err == nil:
		e.LastStatus = v.Status
		if v.Window != nil {
			e.WindowToTS = uint64(v.Window.ToTS)
		}
	case !errors.Is(err, ErrNotFound):
		return mapErr(err)
	}
	return mapErr(a.S.Watch(ctx, e))
}

// RecordChecks records when watched intents were checked (see
// reconcile.CheckRecorder).
func (a ServiceStore) RecordChecks(ctx context.Context, ids []string, at time.Time) error {
	return mapErr(a.S.RecordChecks(ctx, ids, at))
}

var _ reconcile.CheckRecorder = ServiceStore{}
