package reconcile

import (
	"context"
	"encoding/hex"
	"errors"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled"
)

// Two instances may decide the same seq of one intent: a lease holder that
// stalled past its TTL and its successor, or a store that has not yet
// imported what the fleet decided. The verdict stream takes only one of
// them (expected last sequence per subject); the other yields here.

// yieldToStream makes the local history of id the stream's after the
// stream refused (or may not hold) this instance's verdicts. When the
// stream's verdicts are of another body than the stored intent, the
// stream's body and verdicts replace the stored ones (takeStreamBody).
// Otherwise, at the first seq where the stream holds another decision
// than the store, or none while holding later seqs, the store's verdicts
// from there on (decided here, not yet published) are discarded; the stream's verdicts are imported after
// what remains, and the outbox rows the stream now covers are cleared.
// Verdicts decided here after the stream's last stay for publishing. The
// caller holds the intent's lock.
func (s *Service) yieldToStream(ctx context.Context, log *zap.Logger, id string) error {
	hist, err := s.cfg.Sink.History(ctx, id)
	if err != nil {
		return err
	}
	if len(hist) == 0 {
		return nil // nothing to yield to: the outbox publishes what is stored
	}
	if took, err := s.takeStreamBody(ctx, log, id, hist); err != nil || took {
		return err
	}
	local, err := s.cfg.Store.Verdicts(ctx, id)
	if err != nil {
		return err
	}
	onStream := make(map[uint64]reconciled.Verdict, len(hist))
	for _, sv := range hist {
		onStream[sv.Verdict.Seq] = sv.Verdict
	}
	streamLast := hist[len(hist)-1].Verdict.Seq
	for _, lv := range local {
		sv, ok := onStream[lv.Seq]
		if ok && reconciled.SameDecision(sv, lv) || !ok && lv.Seq > streamLast {
			// The fleet's, or decided here after the stream's last: it
			// stays, for publishing.
			continue
		}
		// Another decision at this seq, or a seq the stream skipped and,
		// holding later ones, can never take.
		err := s.cfg.Store.DiscardUnpublished(ctx, id, lv.Seq)
		if errors.Is(err, reconciled.ErrInvalidRecord) && !ok {
			// Not decided here: a verdict the stream held once and no
			// longer does (its age limit). It stays.
			continue
		}
		if err != nil {
			return err
		}
		s.m.imported("yielded")
		log.Warn("verdict decided here lost to the fleet's; the stream's history is taken instead",
			zap.Uint64("seq", lv.Seq), zap.String("discarded", string(lv.Status)))
		break
	}
	for _, sv := range hist {
		if err := s.importVerdict(ctx, sv.Verdict, sv.Intent); err != nil {
			return err
		}
	}
	s.markPublished(ctx, log, hist[len(hist)-1].Verdict)
	return nil
}

// takeStreamBody replaces the stored intent, its verdicts, outbox rows and
// watch entry by the body the stream's verdicts of id carry, and those
// verdicts, in one store transaction, when the store holds another body
// (two stores each took a different body first under one id; the stream
// took one of them and is the fleet's record). A non-final intent is
// watched, so whichever instance holds its ledger's lease follows it up.
// It reports whether it replaced anything. The caller holds the intent's
// lock.
func (s *Service) takeStreamBody(ctx context.Context, log *zap.Logger, id string, hist []reconciled.StreamedVerdict) (bool, error) {
	var sh *reconciled.IntentHeader
	for i := len(hist) - 1; i >= 0 && sh == nil; i-- {
		if h := hist[i].Intent; h != nil && len(h.Body) > 0 {
			sh = h
		}
	}
	if sh == nil {
		return false, nil // the stream names no body (an older release)
	}
	stored, err := s.cfg.Store.Intent(ctx, id)
	switch {
	case errors.Is(err, reconciled.ErrNotFound):
		return false, nil // no body stored: importing adopts the stream's
	case err != nil:
		return false, err
	case stored.Hash == sh.Hash:
		return false, nil
	}
	rec := recordFromHeader(id, *sh)
	vs := make([]reconciled.Verdict, len(hist))
	for i, sv := range hist {
		vs[i] = sv.Verdict
		if sv.Intent != nil {
			vs[i] = withIntentHash(vs[i], *sv.Intent)
		}
	}
	var w *reconciled.Watch
	if last := vs[len(vs)-1]; !last.Final && rec.CanisterID != "unknown" {
		w = &reconciled.Watch{IntentID: id, CanisterID: rec.CanisterID, NextCheck: s.cfg.Now()}
	}
	if err := s.cfg.Store.ReplaceIntent(ctx, rec, vs, w); err != nil {
		return false, err
	}
	s.parsed.drop(id)
	s.m.imported("replaced")
	log.Warn("the verdict stream holds another body for this intent; the stream's body and verdicts replace the stored ones",
		zap.String("stored_hash", hex.EncodeToString(stored.Hash[:])), zap.String("stream_hash", hex.EncodeToString(sh.Hash[:])),
		zap.Int("verdicts", len(vs)))
	return true, nil
}
