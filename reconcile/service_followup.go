package reconcile

import (
	"context"
	"encoding/hex"
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
	if _, err := s.publishOutbox(ctx); err != nil && ctx.Err() == nil {
		// The entries stay; deciding the watches need not wait for them.
		s.log.Warn("outbox not read; its verdicts are retried next round", zap.Error(err))
	}
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
	// The follow-up exists to see ledger time move: never a reused tip.
	vs, err := s.cfg.Decider.DecideMany(FreshTip(ctx), ins)
	if err != nil {
		// The watches stay for the next round (or, when ctx ended, the
		// next process).
		if ctx.Err() == nil {
			log.Warn("follow-up decision failed", zap.Int("intents", len(ins)), zap.Error(err))
		}
		return
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
	v.IntentHash = hex.EncodeToString(hdr.Hash[:])
	if err := s.cfg.Store.AppendDecided(ctx, v, &next); err != nil {
		return err
	}
	s.m.verdict(v.Status)
	s.logVerdict(log, v)
	if err := s.cfg.Sink.PublishVerdict(ctx, v, hdr); err != nil {
		// The outbox entry stays: the next round, or the next process,
		// publishes it.
		return err
	}
	s.markPublished(ctx, log, v)
	return nil
}

// publishOutbox makes the stream hold the latest stored verdict of every
// intent in the outbox, then clears its entries. One that fails stays for
// the next call; only a failure to read the outbox (or the end of ctx) is
// returned. n is the number of intents the outbox held.
func (s *Service) publishOutbox(ctx context.Context) (n int, err error) {
	ids, err := s.cfg.Store.Unpublished(ctx)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return len(ids), ctx.Err()
		}
		log := s.log.With(zap.String("intent_id", id))
		v, err := s.republish(ctx, id)
		switch {
		case err == nil:
			s.markPublished(ctx, log, v)
		case errors.Is(err, ErrHistory):
			// The stream holds a history this verdict contradicts (a
			// final verdict decided elsewhere); it stays the fleet's
			// answer, and retrying could never succeed.
			log.Error("stored verdict refused by the stream; dropped from the outbox", zap.Uint64("seq", v.Seq), zap.Error(err))
			s.markPublished(ctx, log, v)
		case ctx.Err() == nil:
			log.Warn("re-publish failed; will retry", zap.Error(err))
		}
	}
	return len(ids), nil
}

// republish makes the stream hold the intent's latest stored verdict and
// returns that verdict.
func (s *Service) republish(ctx context.Context, id string) (Verdict, error) {
	unlock := s.locks.lock(id)
	defer unlock()
	latest, err := s.cfg.Store.LatestVerdict(ctx, id)
	if err != nil {
		return Verdict{}, err
	}
	rec, err := s.cfg.Store.Intent(ctx, id)
	if err != nil {
		return latest, err
	}
	return latest, s.ensurePublished(ctx, latest, IntentHeader{Body: rec.Body, Hash: rec.Hash})
}

// Resume publishes, after a start, every stored verdict a crash may have
// kept from the stream (the outbox). One that cannot be published now is
// retried by every follow-up round.
func (s *Service) Resume(ctx context.Context) error {
	n, err := s.publishOutbox(ctx)
	if err != nil {
		return err
	}
	s.log.Info("outbox resumed", zap.Int("intents", n))
	return nil
}

func reasonCode(v Verdict) string {
	if v.Reason == nil {
		return ""
	}
	return v.Reason.Code
}
