package reconcile

import (
	"context"
	"encoding/json"
	"errors"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled/matcher"
)

// ImportVerdict records a verdict read from the verdict stream (decided by
// this or another instance) in the local store, with the intent carried in
// its header. A verdict that contradicts the local history (a seq gap, a
// conflict, an intent stored with another body) is logged and skipped:
// redelivering it could never succeed. Only failures a retry can heal
// (the store is unavailable) are returned.
func (s *Service) ImportVerdict(ctx context.Context, v Verdict, hdr *IntentHeader) error {
	unlock := s.locks.lock(v.IntentID)
	defer unlock()
	log := s.log.With(zap.String("intent_id", v.IntentID), zap.Uint64("seq", v.Seq))
	if hdr != nil {
		v = withIntentHash(v, *hdr)
	}
	// Most streamed verdicts are already stored (this instance decided
	// them): a read settles it without taking the single writer.
	if latest, err := s.cfg.Store.LatestVerdict(ctx, v.IntentID); err == nil && latest.Seq >= v.Seq {
		if latest.Seq == v.Seq && (latest.Status != v.Status || reasonCode(latest) != reasonCode(v)) {
			s.m.imported("skipped")
			log.Warn("streamed verdict differs from the stored one at its seq; skipped",
				zap.String("stored", string(latest.Status)), zap.String("streamed", string(v.Status)))
			return nil
		}
		s.m.imported("known")
		return nil
	}
	if hdr != nil && len(hdr.Body) > 0 {
		rec := recordFromHeader(v.IntentID, *hdr)
		res, err := s.cfg.Store.PutIntent(ctx, rec)
		switch {
		case err != nil && ctx.Err() == nil && !isPermanent(err):
			return err
		case err != nil:
			log.Warn("imported intent not stored", zap.Error(err))
		case res == PutConflict:
			s.m.imported("conflict")
			log.Warn("verdict stream carries another body for a stored intent; verdict skipped")
			return nil
		}
	}
	err := s.cfg.Store.AppendVerdict(ctx, v, nil)
	switch {
	case err == nil:
		s.m.imported("stored")
		return nil
	case errors.Is(err, ErrHistory) || isPermanent(err):
		s.m.imported("skipped")
		log.Warn("streamed verdict contradicts the local history; skipped", zap.Error(err))
		return nil
	}
	return err
}

// isPermanent: errors about the record itself rather than the store's
// availability.
func isPermanent(err error) bool { return errors.Is(err, ErrInvalidRecord) }

// recordFromHeader rebuilds the intent record a verdict header carries. A
// valid intent's canonical body parses again; an invalid one's raw body
// gives what it can.
func recordFromHeader(id string, h IntentHeader) IntentRecord {
	rec := IntentRecord{ID: id, Body: h.Body, Hash: h.Hash, Canister: "unknown", Caller: "unknown", Method: "unknown"}
	if in, err := matcher.ParseIntent(h.Body); err == nil {
		rec.Canister, rec.Caller, rec.Method = in.Canister.Encode(), in.Caller.Encode(), string(in.Method)
		return rec
	}
	var head struct {
		Canister any `json:"canister_id"`
		Caller   any `json:"caller"`
		Method   any `json:"method"`
	}
	if json.Unmarshal(h.Body, &head) == nil {
		for dst, v := range map[*string]any{&rec.Canister: head.Canister, &rec.Caller: head.Caller, &rec.Method: head.Method} {
			if t, ok := v.(string); ok && t != "" && len(t) <= 256 {
				*dst = t
			}
		}
	}
	return rec
}
