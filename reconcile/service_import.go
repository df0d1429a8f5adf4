package reconcile

import (
	"context"
	"encoding/json"
	"errors"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
)

// ImportVerdict records a verdict read from the verdict stream (decided by
// this or another instance) in the local store, with the intent carried in
// its header; a non-final one also puts the intent on the local watch
// list. The stream is the fleet's record and every store converges on it:
// a stream whose verdicts are of another body than the stored intent
// replaces the stored intent and its verdicts (takeStreamBody), and a
// verdict after seqs the stream does not hold (a stream written by an
// older release could skip one) is stored after the same gap, logged and
// counted. A verdict that contradicts the local history otherwise (another
// decision at a stored seq, a verdict after a final one) is logged and
// skipped: redelivering it could never succeed. Only failures a retry can
// heal (the store or the stream is unavailable) are returned.
func (s *Service) ImportVerdict(ctx context.Context, v reconciled.Verdict, hdr *reconciled.IntentHeader) error {
	unlock := s.locks.lock(v.IntentID)
	defer unlock()
	return s.importVerdict(ctx, v, hdr)
}

// importVerdict is ImportVerdict for a caller holding the intent's lock.
func (s *Service) importVerdict(ctx context.Context, v reconciled.Verdict, hdr *reconciled.IntentHeader) error {
	log := s.log.With(zap.String("intent_id", v.IntentID), zap.Uint64("seq", v.Seq))
	if hdr != nil {
		v = withIntentHash(v, *hdr)
	}
	// Most streamed verdicts are already stored (this instance decided
	// them): a read settles it without taking the single writer.
	var have uint64
	final := false
	if latest, err := s.cfg.Store.LatestVerdict(ctx, v.IntentID); err == nil {
		if latest.IntentHash != "" && v.IntentHash != "" && latest.IntentHash != v.IntentHash {
			return s.takeFromStream(ctx, log, v.IntentID)
		}
		if latest.Seq >= v.Seq {
			if latest.Seq == v.Seq && (latest.Status != v.Status || reasonCode(latest) != reasonCode(v)) {
				s.m.imported("skipped")
				log.Warn("streamed verdict differs from the stored one at its seq; skipped",
					zap.String("stored", string(latest.Status)), zap.String("streamed", string(v.Status)))
				return nil
			}
			s.m.imported("known")
			return nil
		}
		have, final = latest.Seq, latest.Final
	}
	if !final && v.Seq > have+1 {
		// The follower hands verdicts over in stream order: the seqs
		// between were skipped here, or the stream never held them. Those
		// it holds are taken first.
		hist, err := s.cfg.Sink.History(ctx, v.IntentID)
		if err != nil {
			return err
		}
		for _, sv := range hist {
			if sv.Verdict.Seq <= have || sv.Verdict.Seq >= v.Seq {
				continue
			}
			u := sv.Verdict
			if sv.Intent != nil {
				u = withIntentHash(u, *sv.Intent)
			}
			stored, err := s.storeImported(ctx, log.With(zap.Uint64("seq", u.Seq)), u, sv.Intent, have)
			if err != nil || !stored {
				return err
			}
			have = u.Seq
		}
	}
	_, err := s.storeImported(ctx, log, v, hdr, have)
	return err
}

// storeImported stores one streamed verdict after the stored seq have,
// across a gap when the stream holds none of the seqs between. It reports
// whether the verdict is stored.
func (s *Service) storeImported(ctx context.Context, log *zap.Logger, v reconciled.Verdict, hdr *reconciled.IntentHeader, have uint64) (bool, error) {
	canister := ""
	if hdr != nil && len(hdr.Body) > 0 {
		rec := recordFromHeader(v.IntentID, *hdr)
		canister = rec.CanisterID
		res, err := s.cfg.Store.PutIntent(ctx, rec)
		switch {
		case err != nil && ctx.Err() == nil && !isPermanent(err):
			return false, err
		case err != nil:
			log.Warn("imported intent not stored", zap.Error(err))
		case res == reconciled.PutConflict:
			return false, s.takeFromStream(ctx, log, v.IntentID)
		}
	}
	// An open intent is watched by every store, so whichever instance
	// holds its ledger's lease follows it up, whoever decided it.
	var w *reconciled.Watch
	if !v.Final {
		if canister == "" {
			if rec, err := s.cfg.Store.Intent(ctx, v.IntentID); err == nil {
				canister = rec.CanisterID
			}
		}
		if canister != "" && canister != "unknown" {
			w = &reconciled.Watch{IntentID: v.IntentID, CanisterID: canister, NextCheck: s.cfg.Now()}
		}
	}
	gap := v.Seq > have+1
	var err error
	if gap {
		err = s.cfg.Store.AppendAfterGap(ctx, v, w)
	} else {
		err = s.cfg.Store.AppendVerdict(ctx, v, w)
	}
	switch {
	case err == nil && gap:
		s.m.imported("gap")
		log.Warn("verdict stream lacks seqs before this verdict; its verdict is taken as the fleet's",
			zap.Uint64("stored_seq", have), zap.String("status", string(v.Status)))
		return true, nil
	case err == nil:
		s.m.imported("stored")
		return true, nil
	case errors.Is(err, reconciled.ErrHistory) || isPermanent(err):
		s.m.imported("skipped")
		log.Warn("streamed verdict contradicts the local history; skipped", zap.Error(err))
		return false, nil
	}
	return false, err
}

// takeFromStream takes the stream's body and verdicts of id in place of
// the stored ones, which are of another body (takeStreamBody).
func (s *Service) takeFromStream(ctx context.Context, log *zap.Logger, id string) error {
	hist, err := s.cfg.Sink.History(ctx, id)
	if err != nil {
		return err
	}
	took, err := s.takeStreamBody(ctx, log, id, hist)
	switch {
	case err != nil && (isPermanent(err) || errors.Is(err, reconciled.ErrHistory)):
		s.m.imported("conflict")
		log.Error("the stream's body for a stored intent could not be stored; verdict skipped", zap.Error(err))
		return nil
	case err != nil:
		return err
	case !took:
		s.m.imported("conflict")
		log.Warn("verdict stream carries another body for a stored intent; verdict skipped")
	}
	return nil
}

// isPermanent: errors about the record itself rather than the store's
// availability.
func isPermanent(err error) bool { return errors.Is(err, reconciled.ErrInvalidRecord) }

// recordFromHeader rebuilds the intent record a verdict header carries. A
// valid intent's canonical body parses again; an invalid one's raw body
// gives what it can.
func recordFromHeader(id string, h reconciled.IntentHeader) reconciled.IntentRecord {
	rec := reconciled.IntentRecord{IntentID: id, Body: h.Body, Hash: h.Hash, CanisterID: "unknown", Caller: "unknown", Method: "unknown"}
	if in, err := matcher.ParseIntent(h.Body); err == nil {
		rec.CanisterID, rec.Caller, rec.Method = in.Canister.Encode(), in.Caller.Encode(), string(in.Method)
		return rec
	}
	var head struct {
		Canister any `json:"canister_id"`
		Caller   any `json:"caller"`
		Method   any `json:"method"`
	}
	if json.Unmarshal(h.Body, &head) == nil {
		for dst, v := range map[*string]any{&rec.CanisterID: head.Canister, &rec.Caller: head.Caller, &rec.Method: head.Method} {
			if t, ok := v.(string); ok && t != "" && len(t) <= 256 {
				*dst = t
			}
		}
	}
	return rec
}
