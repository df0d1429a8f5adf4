package reconcile

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
)

// RunFollowUp re-decides watched intents every interval until ctx ends, and
// whenever Trigger is called. The first round runs at once: a restart
// resumes every watch the store holds. Each ledger's rounds run on their
// own (see FollowUp); a ledger whose round has run for more than
// lateRounds intervals is logged as late at each tick.
func (s *Service) RunFollowUp(ctx context.Context, interval time.Duration, trigger <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.startRound(ctx, interval); err != nil && ctx.Err() == nil {
			s.log.Warn("follow-up round failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			s.rounds.wait()
			return
		case <-t.C:
		case <-trigger:
		}
	}
}

// lateRounds is how many intervals a ledger's round may run before each
// tick logs it as late.
const lateRounds = 3

// FollowUp runs one round and waits for it: for each ledger this instance
// owns (see ServiceConfig.Owns) with due watched intents, one DecideMany
// (one certified tip for all of them). A new verdict is stored and
// published only when the status, or an unreadable verdict's reason code,
// changes; a final one ends the watch. Each ledger's round runs on a
// goroutine of its own, and at most one round of a ledger runs at a time:
// a ledger whose reads hang delays only its own intents. A ledger whose
// previous round still runs is followed up again as soon as it ends. It
// returns an error when the watch list cannot be read or ctx ends.
func (s *Service) FollowUp(ctx context.Context) error {
	done, err := s.startRound(ctx, 0)
	for _, c := range done {
		select {
		case <-c:
		case <-ctx.Done():
		}
	}
	if err != nil {
		return err
	}
	return ctx.Err()
}

// startRound publishes the outbox, reads the watch list and asks each
// owned ledger with due watches for a round; it returns a channel per
// ledger closed when that round has run. With interval > 0 it logs the
// ledgers whose running round is late first.
func (s *Service) startRound(ctx context.Context, interval time.Duration) ([]<-chan struct{}, error) {
	s.m.round()
	if _, err := s.publishOutbox(ctx); err != nil && ctx.Err() == nil {
		// The entries stay; deciding the watches need not wait for them.
		s.log.Warn("outbox not read; its verdicts are retried next round", zap.Error(err))
	}
	ws, err := s.cfg.Store.Watches(ctx)
	if err != nil {
		return nil, err
	}
	s.parsed.keep(ws)
	now := s.cfg.Now()
	byLedger := map[string][]reconciled.Watch{}
	followed := map[string]bool{}
	for _, w := range ws {
		// Every store watches every open intent of the fleet; only the
		// holder of a ledger's lease follows its intents up.
		if s.cfg.Owns != nil && !s.cfg.Owns(w.CanisterID) {
			continue
		}
		followed[w.CanisterID] = true
		if !w.NextCheck.After(now) {
			byLedger[w.CanisterID] = append(byLedger[w.CanisterID], w)
		}
	}
	if interval > 0 {
		s.rounds.warnLate(s.log, now, lateRounds*interval, interval)
	}
	s.rounds.settle(s, followed, byLedger, now)
	ledgers := make([]string, 0, len(byLedger))
	for l := range byLedger {
		ledgers = append(ledgers, l)
	}
	sort.Strings(ledgers)
	done := make([]<-chan struct{}, 0, len(ledgers))
	for _, l := range ledgers {
		done = append(done, s.rounds.request(ctx, s, l, byLedger[l]))
	}
	return done, nil
}

// ledgerRounds keeps, per ledger, whether a follow-up round runs and the
// round asked for while it runs.
type ledgerRounds struct {
	mu sync.Mutex
	m  map[string]*ledgerRound
	wg sync.WaitGroup
}

type ledgerRound struct {
	running bool
	started time.Time // of the running round, by ServiceConfig.Now
	warned  time.Time // the last late warning
	begun   bool      // the ledger has its sample (a round began or completed)
	// The next round, asked for while one runs: the newest due watches,
	// the context of the request, and the channels of every request it
	// answers.
	next    []reconciled.Watch
	nextCtx context.Context
	waiters []chan struct{}
}

// request asks for a round of ledger over ws. It starts one unless one
// runs; then the newest ws is followed up as soon as that one ends. The
// channel is closed once a round over ws (or newer watches) has run.
func (r *ledgerRounds) request(ctx context.Context, s *Service, ledger string, ws []reconciled.Watch) <-chan struct{} {
	c := make(chan struct{})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*ledgerRound{}
	}
	lr := r.m[ledger]
	if lr == nil {
		lr = &ledgerRound{}
		r.m[ledger] = lr
	}
	if !lr.begun {
		// The ledger's sample exists from its first round on, so that its
		// age tells a first round that never ends as late as a later one.
		lr.begun = true
		s.m.followUpBegun(ledger, s.cfg.Now())
	}
	if lr.running {
		lr.next, lr.nextCtx = ws, ctx
		lr.waiters = append(lr.waiters, c)
		return c
	}
	lr.running, lr.started = true, s.cfg.Now()
	r.wg.Add(1)
	go r.run(ctx, s, ledger, lr, ws, []chan struct{}{c})
	return c
}

// run follows the ledger up, round after round, while rounds are asked for.
func (r *ledgerRounds) run(ctx context.Context, s *Service, ledger string, lr *ledgerRound, ws []reconciled.Watch, waiters []chan struct{}) {
	defer r.wg.Done()
	for {
		s.followLedger(ctx, ledger, ws)
		now := s.cfg.Now()
		s.m.followUpDone(ledger, now)
		r.mu.Lock()
		for _, c := range waiters {
			close(c)
		}
		if lr.next == nil {
			lr.running = false
			r.mu.Unlock()
			return
		}
		ctx, ws, waiters = lr.nextCtx, lr.next, lr.waiters
		lr.next, lr.nextCtx, lr.waiters = nil, nil, nil
		lr.started = now
		r.mu.Unlock()
	}
}

// warnLate logs each ledger whose running round started more than late
// ago, at most once every interval.
func (r *ledgerRounds) warnLate(log *zap.Logger, now time.Time, late, every time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for l, lr := range r.m {
		if !lr.running || now.Sub(lr.started) <= late || now.Sub(lr.warned) < every {
			continue
		}
		lr.warned = now
		log.Warn("follow-up round of a ledger is late", zap.String("canister_id", l),
			zap.Time("started", lr.started), zap.Duration("running", now.Sub(lr.started)))
	}
}

// settle records a completed round for the followed ledgers with nothing
// due and no round running (there was nothing to do), and for the ledgers
// known here that no longer have open intents but are still owned; it
// forgets the ledgers this instance no longer follows up.
func (r *ledgerRounds) settle(s *Service, followed map[string]bool, due map[string][]reconciled.Watch, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*ledgerRound{}
	}
	for l := range followed {
		if lr := r.m[l]; lr == nil {
			r.m[l] = &ledgerRound{}
		}
	}
	for l, lr := range r.m {
		switch {
		case lr.running || len(due[l]) > 0:
		case followed[l] || s.cfg.Owns == nil || s.cfg.Owns(l):
			lr.begun = true
			s.m.followUpDone(l, now)
		default:
			s.m.followUpGone(l)
			delete(r.m, l)
		}
	}
}

// wait waits for every running round to end.
func (r *ledgerRounds) wait() { r.wg.Wait() }

func (s *Service) followLedger(ctx context.Context, ledger string, ws []reconciled.Watch) {
	log := s.log.With(zap.String("canister_id", ledger))
	if s.cfg.Owns != nil && !s.cfg.Owns(ledger) {
		// A round asked for while the previous one ran starts only once
		// that one ends: the lease may have gone meanwhile, and with it
		// what this instance may spend on the ledger.
		return
	}
	ins := make([]*matcher.Intent, 0, len(ws))
	kept := make([]reconciled.Watch, 0, len(ws))
	hdrs := make([]reconciled.IntentHeader, 0, len(ws))
	for _, w := range ws {
		pi, err := s.parsed.get(ctx, s.cfg.Store, w.IntentID)
		if err != nil {
			log.Warn("watched intent unreadable from the store", zap.String("intent_id", w.IntentID), zap.Error(err))
			continue
		}
		ins = append(ins, pi.in)
		kept = append(kept, w)
		hdrs = append(hdrs, pi.hdr)
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
	checked := s.cfg.Now()
	defer s.recordChecks(ctx, log, kept, checked)
	for i, v := range vs {
		if v.Status == reconciled.StatusNotYet && kept[i].LastStatus == reconciled.StatusNotYet {
			// not_yet again: nothing new to say, and nothing to read. A
			// watch list a step behind the store only delays a verdict
			// to the next round; advance re-reads under the lock.
			continue
		}
		if err := s.advance(ctx, kept[i], v, hdrs[i]); err != nil && ctx.Err() == nil {
			log.Warn("follow-up verdict not recorded", zap.String("intent_id", v.IntentID), zap.Error(err))
		}
	}
}

// recordChecks records, when the store keeps it, that the intents of ws
// were checked at at; after their verdicts, so that a watch the round
// created has it too.
func (s *Service) recordChecks(ctx context.Context, log *zap.Logger, ws []reconciled.Watch, at time.Time) {
	cr, ok := s.cfg.Store.(CheckRecorder)
	if !ok {
		return
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.IntentID
	}
	if err := cr.RecordChecks(ctx, ids, at); err != nil && ctx.Err() == nil {
		log.Warn("follow-up check times not recorded", zap.Int("intents", len(ids)), zap.Error(err))
	}
}

// advance records a follow-up decision of one watched intent.
func (s *Service) advance(ctx context.Context, w reconciled.Watch, v reconciled.Verdict, hdr reconciled.IntentHeader) error {
	unlock := s.locks.lock(w.IntentID)
	defer unlock()
	log := s.log.With(zap.String("intent_id", w.IntentID))
	latest, err := s.cfg.Store.LatestVerdict(ctx, w.IntentID)
	var seq uint64
	switch {
	case errors.Is(err, reconciled.ErrNotFound):
	case err != nil:
		return err
	case latest.Final:
		return nil // decided meanwhile; its final append ended the watch
	default:
		seq = latest.Seq
	}
	attempts := 0
	if v.Status == reconciled.StatusUnreadable {
		attempts = w.Attempts + 1
		s.m.unreadableRetry()
	}
	changed := seq == 0 || latest.Status != v.Status ||
		(v.Status == reconciled.StatusUnreadable && reasonCode(latest) != reasonCode(v))
	next := reconciled.Watch{IntentID: w.IntentID, CanisterID: w.CanisterID, Attempts: attempts, NextCheck: s.nextCheck(v.Status, attempts)}
	if !changed {
		if v.Status == reconciled.StatusUnreadable {
			log.Info("history still unreadable; backing off", zap.String("code", reasonCode(v)),
				zap.Int("attempts", attempts), zap.Time("next_check", next.NextCheck))
			return s.cfg.Store.Reschedule(ctx, next)
		}
		return nil // not_yet again: nothing new to say
	}
	// The decision is of the body read before it; the store may have
	// taken the stream's body in its place since (takeStreamBody).
	if rec, err := s.cfg.Store.Intent(ctx, w.IntentID); err != nil {
		return err
	} else if rec.Hash != hdr.Hash {
		log.Info("follow-up decision dropped: the stored intent is another body now")
		return nil
	}
	v.Seq = seq + 1
	v.IntentHash = hex.EncodeToString(hdr.Hash[:])
	if err := s.cfg.Store.AppendDecided(ctx, v, &next); err != nil {
		return err
	}
	s.m.verdict(v.Status)
	s.logVerdict(log, v)
	if seq > 0 {
		// The stream must hold seq before v: when the verdict before v
		// may still be only in the outbox, every stored one goes in order.
		pending, err := s.cfg.Store.UnpublishedBefore(ctx, w.IntentID, v.Seq)
		if err != nil {
			return err // v's outbox entry stays for the next round
		}
		if pending {
			return s.publishStored(ctx, log, w.IntentID, hdr)
		}
	}
	if err := s.cfg.Sink.PublishVerdict(ctx, v, hdr); errors.Is(err, reconciled.ErrHistory) {
		// Another instance published this seq first: its verdict stands.
		return s.yieldToStream(ctx, log, w.IntentID)
	} else if err != nil {
		// The outbox entry stays: the next round, or the next process,
		// publishes it.
		return err
	}
	s.markPublished(ctx, log, v)
	return nil
}

// publishOutbox makes the stream hold every stored verdict of every
// intent in the outbox, in seq order, then clears its entries. One that
// fails stays for the next call; only a failure to read the outbox (or the
// end of ctx) is returned. n is the number of intents the outbox held.
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
		if err := s.republish(ctx, log, id); err != nil && ctx.Err() == nil {
			log.Warn("re-publish failed; will retry", zap.Error(err))
		}
	}
	return len(ids), nil
}

// republish makes the stream hold the intent's stored verdicts
// (publishStored). A stream that holds another body for the id is the
// fleet's answer: the store takes it (yieldToStream).
func (s *Service) republish(ctx context.Context, log *zap.Logger, id string) error {
	unlock := s.locks.lock(id)
	defer unlock()
	rec, err := s.cfg.Store.Intent(ctx, id)
	if err != nil {
		return err
	}
	last, err := s.cfg.Sink.LastVerdict(ctx, id)
	if err != nil {
		return err
	}
	if holdsOtherBody(last, rec) {
		return s.yieldToStream(ctx, log, id)
	}
	_, err = s.publishStoredOver(ctx, log, id, reconciled.IntentHeader{Body: rec.Body, Hash: rec.Hash}, last)
	return err
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

func reasonCode(v reconciled.Verdict) string {
	if v.Reason == nil {
		return ""
	}
	return v.Reason.Code
}

// parsedIntents keeps the parsed intents of the watch list between
// follow-up rounds: a stored body changes only when the store takes the
// stream's body in its place (drop), and reading and parsing every watched body again
// each round is most of a round's cost when thousands are open.
type parsedIntents struct {
	mu sync.Mutex
	m  map[string]parsedIntent
}

type parsedIntent struct {
	in  *matcher.Intent
	hdr reconciled.IntentHeader
}

func (p *parsedIntents) get(ctx context.Context, st Store, id string) (parsedIntent, error) {
	p.mu.Lock()
	pi, ok := p.m[id]
	p.mu.Unlock()
	if ok {
		return pi, nil
	}
	rec, err := st.Intent(ctx, id)
	if err != nil {
		return pi, err
	}
	in, err := matcher.ParseIntent(rec.Body)
	if err != nil {
		// A stored body was accepted once; this is a bug or a corrupted
		// store, not something a retry fixes.
		return pi, fmt.Errorf("stored body no longer parses: %w", err)
	}
	pi = parsedIntent{in: in, hdr: reconciled.IntentHeader{Body: rec.Body, Hash: rec.Hash}}
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]parsedIntent{}
	}
	p.m[id] = pi
	p.mu.Unlock()
	return pi, nil
}

// drop forgets id's parsed body: the store holds another one now.
func (p *parsedIntents) drop(id string) {
	p.mu.Lock()
	delete(p.m, id)
	p.mu.Unlock()
}

// keep drops the intents no longer watched, bounding the cache by the
// watch list.
func (p *parsedIntents) keep(ws []reconciled.Watch) {
	watched := make(map[string]bool, len(ws))
	for _, w := range ws {
		watched[w.IntentID] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.m {
		if !watched[id] {
			delete(p.m, id)
		}
	}
}
