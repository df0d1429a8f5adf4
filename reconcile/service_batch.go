package reconcile

import (
	"context"
	"sync"

	"github.com/reconciled/reconciled/matcher"
)

// Intents of one ledger that arrive while a decision of that ledger is
// running are decided together in the next one: one certified tip (a BLS
// verification and a signed query) serves the whole batch, instead of
// each intent fetching its own while holding the ledger's chain.

type batchReq struct {
	in   *matcher.Intent
	done chan struct{}
	// Set before done is closed: lead asks the request to run the next
	// batch itself; otherwise v and err are its result.
	lead bool
	v    Verdict
	err  error
}

type ledgerBatch struct {
	running bool
	pending []*batchReq
}

type batcher struct {
	mu      sync.Mutex
	ledgers map[string]*ledgerBatch
}

// decide decides one intent, batched with the other intents of its ledger
// waiting at the same time. The batch runs on the context of the request
// that leads it; the intake gives every handler the same context, which
// ends only at the drain deadline, when every request is given back anyway.
func (s *Service) decide(ctx context.Context, in *matcher.Intent) (Verdict, error) {
	b := &s.batch
	ledger := in.Canister.Encode()
	r := &batchReq{in: in, done: make(chan struct{})}
	b.mu.Lock()
	if b.ledgers == nil {
		b.ledgers = map[string]*ledgerBatch{}
	}
	lb := b.ledgers[ledger]
	if lb == nil {
		lb = &ledgerBatch{}
		b.ledgers[ledger] = lb
	}
	lb.pending = append(lb.pending, r)
	if lb.running {
		b.mu.Unlock()
		<-r.done
		if !r.lead {
			return r.v, r.err
		}
		b.mu.Lock()
	}
	lb.running = true
	reqs := lb.pending
	lb.pending = nil
	b.mu.Unlock()

	ins := make([]*matcher.Intent, len(reqs))
	for i, q := range reqs {
		ins[i] = q.in
	}
	vs, err := s.cfg.Decider.DecideMany(ctx, ins)
	for i, q := range reqs {
		if err != nil {
			q.err = err
		} else {
			q.v = vs[i]
		}
		if q != r {
			close(q.done)
		}
	}

	b.mu.Lock()
	if len(lb.pending) > 0 {
		next := lb.pending[0]
		next.lead = true
		close(next.done)
	} else {
		lb.running = false
		delete(b.ledgers, ledger)
	}
	b.mu.Unlock()
	return r.v, r.err
}
