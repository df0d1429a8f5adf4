package reconcile

import (
	"context"
	"errors"
	"sync"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
)

// Intents of one ledger that arrive while a decision of that ledger is
// running are decided with it: one certified tip (a BLS verification and a
// signed query) and one walk down the chain serve them all, instead of
// each intent fetching its own while holding the ledger's chain. With a
// JoiningDecider they join the running walk and each is answered as soon
// as its verdict is known; otherwise they form the next batch.

// JoiningDecider is a Decider that lets intents join a running decision of
// their ledger (Engine.DecideJoining).
type JoiningDecider interface {
	DecideJoining(ctx context.Context, ledger string, ins []*matcher.Intent, join Joins, done func(k int, v reconciled.Verdict)) error
}

type batchReq struct {
	in   *matcher.Intent
	done chan struct{}
	// Set before done is closed.
	v   reconciled.Verdict
	err error
	// settled: done is closed (by the batch's goroutine only).
	settled bool
}

type ledgerBatch struct {
	running bool
	pending []*batchReq
	// arrived holds a wake for the running decision once pending gains a
	// request (Joins.Arrived).
	arrived chan struct{}
}

type batcher struct {
	mu      sync.Mutex
	ledgers map[string]*ledgerBatch
}

// errNoVerdict: a decider returned without answering an intent it was
// given, which would be a bug; the intent is given back rather than lost.
var errNoVerdict = errors.New("reconcile: the decision ended without a verdict for the intent")

// decide decides one intent together with the other intents of its ledger
// waiting or arriving at the same time. The decisions run on their own
// goroutine, on the context of the request that started them; the intake
// gives every handler the same context, which ends only at the drain
// deadline, when every request is given back anyway. The goroutine ends
// when no request of the ledger is left.
func (s *Service) decide(ctx context.Context, in *matcher.Intent) (reconciled.Verdict, error) {
	b := &s.batch
	ledger := in.Canister.Encode()
	r := &batchReq{in: in, done: make(chan struct{})}
	b.mu.Lock()
	if b.ledgers == nil {
		b.ledgers = map[string]*ledgerBatch{}
	}
	lb := b.ledgers[ledger]
	if lb == nil {
		lb = &ledgerBatch{arrived: make(chan struct{}, 1)}
		b.ledgers[ledger] = lb
	}
	lb.pending = append(lb.pending, r)
	if !lb.running {
		lb.running = true
		go s.runBatches(ctx, ledger, lb)
	} else {
		select {
		case lb.arrived <- struct{}{}:
		default: // a wake is already waiting
		}
	}
	b.mu.Unlock()
	<-r.done
	return r.v, r.err
}

// runBatches decides the ledger's waiting requests, batch after batch,
// until none is left.
func (s *Service) runBatches(ctx context.Context, ledger string, lb *ledgerBatch) {
	b := &s.batch
	for {
		b.mu.Lock()
		reqs := lb.pending
		lb.pending = nil
		if len(reqs) == 0 {
			lb.running = false
			delete(b.ledgers, ledger)
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		s.runBatch(ctx, ledger, lb, reqs)
	}
}

// runBatch decides reqs, and the requests that join them, and answers
// every one of them.
func (s *Service) runBatch(ctx context.Context, ledger string, lb *ledgerBatch, reqs []*batchReq) {
	running := reqs
	answer := func(k int, v reconciled.Verdict) {
		if k < 0 || k >= len(running) || running[k].settled {
			return
		}
		running[k].v, running[k].settled = v, true
		close(running[k].done)
	}
	intents := func(rs []*batchReq) []*matcher.Intent {
		ins := make([]*matcher.Intent, len(rs))
		for i, q := range rs {
			ins[i] = q.in
		}
		return ins
	}
	var err error
	if jd, ok := s.cfg.Decider.(JoiningDecider); ok {
		join := func() []*matcher.Intent {
			s.batch.mu.Lock()
			more := lb.pending
			lb.pending = nil
			s.batch.mu.Unlock()
			running = append(running, more...)
			return intents(more)
		}
		err = jd.DecideJoining(ctx, ledger, intents(reqs), Joins{Take: join, Arrived: lb.arrived}, answer)
	} else {
		var vs []reconciled.Verdict
		if vs, err = s.cfg.Decider.DecideMany(ctx, intents(reqs)); err == nil {
			for k, v := range vs {
				answer(k, v)
			}
		}
	}
	if err == nil {
		err = errNoVerdict
	}
	for _, q := range running {
		if !q.settled {
			q.err, q.settled = err, true
			close(q.done)
		}
	}
}
