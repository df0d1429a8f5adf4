package reconcile

import (
	"context"
	"errors"

	"go.uber.org/zap"
)

// Two instances may decide the same seq of one intent: a lease holder that
// stalled past its TTL and its successor, or a store that has not yet
// imported what the fleet decided. The verdict stream takes only one of
// them (expected last sequence per subject); the other yields here.

// SameDecision compares what two verdicts decide, not when or how they
// were computed, so a verdict re-published from a store that re-encoded it
// is still recognised.
func SameDecision(a, b Verdict) bool {
	if a.Status != b.Status || a.Final != b.Final || (a.Block == nil) != (b.Block == nil) {
		return false
	}
	// A verdict of another body is never the same decision; one stored
	// before verdicts carried intent_hash has none to compare.
	if a.IntentHash != "" && b.IntentHash != "" && a.IntentHash != b.IntentHash {
		return false
	}
	return a.Block == nil || *a.Block == *b.Block
}

// yieldToStream makes the local history of id the stream's after the
// stream refused (or may not hold) this instance's latest verdict: when the
// stream holds another decision at that seq, or none, the local one is
// discarded, and the stream's verdicts are imported after what remains.
// The caller holds the intent's lock.
func (s *Service) yieldToStream(ctx context.Context, log *zap.Logger, id string) error {
	hist, err := s.cfg.Sink.History(ctx, id)
	if err != nil {
		return err
	}
	local, err := s.cfg.Store.LatestVerdict(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	default:
		same := false
		for _, sv := range hist {
			if sv.Verdict.Seq == local.Seq {
				same = SameDecision(sv.Verdict, local)
			}
		}
		if !same {
			if err := s.cfg.Store.DiscardUnpublished(ctx, id, local.Seq); err != nil {
				return err
			}
			s.m.imported("yielded")
			log.Warn("verdict decided here lost to the fleet's; the stream's history is taken instead",
				zap.Uint64("seq", local.Seq), zap.String("discarded", string(local.Status)))
		}
	}
	for _, sv := range hist {
		if err := s.importVerdict(ctx, sv.Verdict, sv.Intent); err != nil {
			return err
		}
	}
	return nil
}
