package reconcile

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled/matcher"
)

// RunFollowUp re-decides watched intents every interval until ctx ends, and
// whenever Trigger is called. The first round runs at once: a restart
// resumes every watch the store holds.
func (s *Service) RunFollowUp(ctx context.Context, interval time.Duration, trigger <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.FollowUp(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("follow-up round failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-trigger:
		}
	}
}

// FollowUp runs one round: for each ledger with due watched intents, one
// DecideMany (one certified tip for all of them). A new verdict is stored
// and published only when the status, or an unreadable verdict's reason
// code, changes; a final one ends the watch. Ledgers are followed up
// concurrently, so a slow ledger does not hold up the others. It returns an
// error when the watch list cannot be read or ctx ends.
func (s *Service) FollowUp(ctx context.Context) error {
	s.m.round()
	s.retryUnpublished(ctx)
	ws, err := s.cfg.Store.Watches(ctx)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	byLedger := map[string][]Watch{}
	for _, w := range ws {
		if !w.NextCheck.After(now) {
			byLedger[w.Canister] = append(byLedger[w.Canister], w)
		}
	}
	ledgers := make([]string, 0, len(byLedger))
	for l := range byLedger {
		ledgers = append(ledgers, l)
	}
	sort.Strings(ledgers)
	var wg sync.WaitGroup
	for _, l := range ledgers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.followLedger(ctx, l, byLedger[l])
		}()
	}
	wg.Wait()
	return ctx.Err()
}

func (s *Service) followLedger(ctx context.Context, ledger string, ws []Watch) {
	log := s.log.With(zap.String("canister_id", ledger))
	ins := make([]*matcher.Intent, 0, len(ws))
	kept := make([]Watch, 0, len(ws))
	hdrs := make([]IntentHeader, 0, len(ws))
	for _, w := range ws {
		rec, err := s.cfg.Store.Intent(ctx, w.IntentID)
		if err != nil {
			log.Warn("watched intent unreadable from the store", zap.String("intent_id", w.IntentID), zap.Error(err))
			continue
		}
		in, err := matcher.ParseIntent(rec.Body)
		if err != nil {
			// A stored body was accepted once; this is a bug or a
			// corrupted store, not something a retry fixes.
			log.Error("watched intent no longer parses", zap.String("intent_id", w.IntentID), zap.Error(err))
			continue
		}
		ins = append(ins, in)
		kept = append(kept, w)
		hdrs = append(hdrs, IntentHeader{Body: rec.Body, Hash: rec.Hash})
	}
	if len(ins) == 0 {
		return
	}
	vs, err := s.cfg.Decider.DecideMany(ctx, ins)
	if err != nil {
		return // ctx ended: the watches stay for the next round or process
	}
	for i, v := range vs {
		if err := s.advance(ctx, kept[i], v, hdrs[i]); err != nil && ctx.Err() == nil {
			log.Warn("follow-up verdict not recorded", zap.String("intent_id", v.IntentID), zap.Error(err))
		}
	}
}

// advance records a follow-up decision of one watched intent.
func (s *Service) advance(ctx context.Context, w Watch, v Verdict, hdr IntentHeader) error {
	unlock := s.locks.lock(w.IntentID)
	defer unlock()
	log := s.log.With(zap.String("intent_id", w.IntentID))
	latest, err := s.cfg.Store.LatestVerdict(ctx, w.IntentID)
	var seq uint64
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	case latest.Final:
		return nil // decided meanwhile; its final append ended the watch
	default:
		seq = latest.Seq
	}
	attempts := 0
	if v.Status == StatusUnreadable {
		attempts = w.Attempts + 1
		s.m.unreadableRetry()
	}
	changed := seq == 0 || latest.Status != v.Status ||
		(v.Status == StatusUnreadable && reasonCode(latest) != reasonCode(v))
	next := Watch{IntentID: w.IntentID, Canister: w.Canister, Attempts: attempts, NextCheck: s.nextCheck(v.Status, attempts)}
	if !changed {
		if v.Status == StatusUnreadable {
			log.Info("history still unreadable; backing off", zap.String("code", reasonCode(v)),
				zap.Int("attempts", attempts), zap.Time("next_check", next.NextCheck))
			return s.cfg.Store.Reschedule(ctx, next)
		}
		return nil // not_yet again: nothing new to say
	}
	v.Seq = seq + 1
	if err := s.cfg.Store.AppendVerdict(ctx, v, &next); err != nil {
		return err
	}
	s.m.verdict(v.Status)
	s.logVerdict(log, v)
	if err := s.cfg.Sink.PublishVerdict(ctx, v, hdr); err != nil {
		s.mu.Lock()
		s.unpublished[v.IntentID] = true
		s.mu.Unlock()
		return err
	}
	return nil
}

// retryUnpublished re-publishes verdicts whose publish failed during a
// follow-up round.
func (s *Service) retryUnpublished(ctx context.Context) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.unpublished))
	for id := range s.unpublished {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		if err := s.republish(ctx, id); err != nil {
			s.log.Warn("re-publish failed; will retry", zap.String("intent_id", id), zap.Error(err))
			continue
		}
		s.mu.Lock()
		delete(s.unpublished, id)
		s.mu.Unlock()
	}
}

func (s *Service) republish(ctx context.Context, id string) error {
	unlock := s.locks.lock(id)
	defer unlock()
	latest, err := s.cfg.Store.LatestVerdict(ctx, id)
	if err != nil {
		return err
	}
	rec, err := s.cfg.Store.Intent(ctx, id)
	if err != nil {
		return err
	}
	return s.ensurePublished(ctx, latest, IntentHeader{Body: rec.Body, Hash: rec.Hash})
}

// Resume checks, after a start, that the stream holds the latest verdict of
// every watched intent (a crash may have come between store and publish).
func (s *Service) Resume(ctx context.Context) error {
	ws, err := s.cfg.Store.Watches(ctx)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if err := s.republish(ctx, w.IntentID); err != nil && !errors.Is(err, ErrNotFound) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.mu.Lock()
			s.unpublished[w.IntentID] = true
			s.mu.Unlock()
			s.log.Warn("resume: re-publish failed; will retry", zap.String("intent_id", w.IntentID), zap.Error(err))
		}
	}
	s.log.Info("watch list resumed", zap.Int("watched", len(ws)))
	return nil
}

func reasonCode(v Verdict) string {
	if v.Reason == nil {
		return ""
	}
	return v.Reason.Code
}
