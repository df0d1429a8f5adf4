package reconcile

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
)

// One ledger's decisions share one certified tip and one walk down the
// chain. The walk goes from the verified range's bottom towards the
// deepest window still undecided, and every decision is answered the
// moment the verified range holds its match or covers its window, not when
// the deepest one is done. Intents that arrive while the walk runs may
// join it (Engine.JoinRunning): in a burst they are decided by the walk
// already under way instead of queueing behind it.

// Joining lets intents that arrive while a decision of their ledger runs
// join it: they are decided on its certified tip, while the tip is younger
// than d (0, the default: never). An older tip knows fewer blocks and an
// older time, never wrong ones, so a verdict on it is sound; a payment
// executed since then is seen at the next follow-up. Call it before the
// first decision.
func (e *Engine) JoinRunning(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.joinAge = d
}

// Joins is how intents that arrive during a decision reach it.
type Joins struct {
	// Take, called between verified pages while joining is allowed,
	// returns intents of the decision's ledger that arrived meanwhile
	// (nil: none). A nil Take joins nothing.
	Take func() []*matcher.Intent
	// Arrived, when not nil, is ready once Take may have intents to
	// return. A decision with nothing pending that still waits for its
	// pages to be written waits on it too: without it a joiner would wait
	// for the next page written, and in a burst the writes trail the walk
	// by tens of pages. A wake with nothing to take costs one Take call.
	Arrived <-chan struct{}
}

// DecideJoining decides intents of one ledger as DecideMany does, handing
// each verdict to done as soon as it is known, k being the intent's place
// in ins followed by the joined intents in the order join.Take returned
// them. Every intent passed in or joined gets exactly one done call unless
// ctx ends, which is the only error.
func (e *Engine) DecideJoining(ctx context.Context, ledger string, ins []*matcher.Intent, join Joins, done func(k int, v reconciled.Verdict)) error {
	r := &ledgerRun{e: e, ctx: ctx, ledger: ledger, join: join, done: done}
	return r.run(ins)
}

// ledgerRun is one ledger's decisions on one tip.
type ledgerRun struct {
	e      *Engine
	ctx    context.Context
	ledger string
	join   Joins
	done   func(k int, v reconciled.Verdict)

	s           ledgerSource
	c           *chain
	rules       matcher.LedgerRules
	page        uint64
	mintCertain bool
	tip         icrc3.Tip
	haveTip     bool
	tipAt       time.Time // when the tip was read, for the join bound
	joinAge     time.Duration

	n       int // intents seen so far: the next one's k
	pending []*runDecision
	// below: a history that failed to read or verify below the range fails
	// the same way for every decision that needs it.
	below error
}

type runDecision struct {
	*decision
	k int
	v reconciled.Verdict
	// failed: its lookup of verified blocks failed; it is answered
	// unreadable with that error.
	failed error
}

func (r *ledgerRun) run(ins []*matcher.Intent) error {
	e := r.e
	s, c, err := e.source(r.ledger)
	if err == nil {
		err = s.cfg.Validate()
	}
	if err != nil {
		return r.failAll(ins, err)
	}
	r.s, r.c = s, c
	// Intents the ledger's rules refuse are answered without a tip: a
	// batch of only those reads nothing.
	scan := r.screen(ins)
	if len(scan) == 0 {
		return nil
	}
	if r.rules, r.page, r.mintCertain, err = e.rules(r.ctx, s); err != nil {
		return r.failDecisions(scan, err)
	}
	e.mu.Lock()
	r.joinAge = e.joinAge
	e.mu.Unlock()

	c.mu.Lock()
	defer c.mu.Unlock()
	defer r.settleWrites()
	for _, d := range scan {
		r.open(d)
	}
	before := e.now()
	tip, read, err := c.refresh(r.ctx, r.scanPage)
	if err != nil {
		return r.failDecisions(r.takePending(), err)
	}
	// The tip's age counts from before it was read, or from when the
	// reused one was.
	r.tip, r.haveTip, r.tipAt = tip, true, before
	if c.fetchedAt.Before(before) {
		r.tipAt = c.fetchedAt
	}
	for _, d := range r.pending {
		d.read = read
		r.lookup(d)
	}
	if err := r.answerReady(); err != nil {
		return err
	}
	rounds := 0
	for {
		if err := r.takeJoiners(); err != nil {
			return err
		}
		// A walk answers as its pages settle decisions; this catches
		// whatever its end settled too.
		if err := r.answerReady(); err != nil {
			return err
		}
		if len(r.pending) == 0 {
			// The run gives the chain up only once its pages are
			// written (settleWrites); until then intents that arrive
			// are still served from it rather than wait for the next
			// run.
			if r.join.Take == nil || !c.w.waitWrite(r.join.Arrived) {
				return nil
			}
			continue
		}
		if rounds > 64 {
			return r.failDecisions(r.takePending(), &chainFault{"walk down to the window did not reach it"})
		}
		// Every pending decision needs blocks below the range.
		answered, err := r.walk(rounds >= 8)
		if err != nil {
			return err
		}
		if answered {
			rounds = 0
		} else {
			rounds++
		}
	}
}

// settleWrites waits, before the run gives the chain up, for the pages its
// walk left to the writer. Every verdict is already out: this only keeps
// the next run from seeing pages in flight. A failed write leaves the
// cache at the range before the failed page, and the chain reloads it from
// there rather than claim blocks the cache does not hold.
func (r *ledgerRun) settleWrites() {
	c := r.c
	if err := c.w.flush(); err != nil {
		c.loaded, c.has, c.fetchedAt = false, false, time.Time{}
		c.r = icrc3.VerifiedRange{}
		r.e.log.Warn("verified blocks could not be cached; the chain goes back to the range cached before them",
			zap.String("history", c.ledger), zap.Error(err))
	}
}

// screen answers the intents the ledger's rules refuse as invalid and
// returns decisions for the rest (not yet open).
func (r *ledgerRun) screen(ins []*matcher.Intent) []*runDecision {
	lr := matcher.LedgerRules{TW: r.s.cfg.TW, Drift: r.s.cfg.Drift}
	var scan []*runDecision
	for _, in := range ins {
		k := r.n
		r.n++
		w := in.Window(lr)
		v := reconciled.Verdict{IntentID: in.ID, IntentHash: in.HashHex(),
			Window: &reconciled.Window{FromTS: reconciled.U64(w.From), ToTS: reconciled.U64(w.To), NarrowedBy: w.NarrowedBy}}
		if me := in.CheckRules(lr); me != nil {
			v.Status, v.Final, v.DecidedAt = reconciled.StatusInvalid, true, r.e.now().UTC()
			v.Reason = &reconciled.Reason{Code: me.Code, Field: me.Field, Message: me.Message}
			r.done(k, v)
			continue
		}
		scan = append(scan, &runDecision{decision: &decision{in: in, w: w, seen: map[uint64]bool{}}, k: k, v: v})
	}
	return scan
}

// open makes d pending under the ledger's rules.
func (r *ledgerRun) open(d *runDecision) {
	d.rules, d.mintCertain = r.rules, r.mintCertain
	r.pending = append(r.pending, d)
}

// lookup offers d the blocks verified before it was opened.
func (r *ledgerRun) lookup(d *runDecision) {
	if r.tip.Empty || d.match != nil {
		return
	}
	c := r.c
	cands, err := c.byStamp(r.ctx, d.in.Stamp(), c.r.Lo, c.r.Hi)
	if err != nil {
		d.failed = err
		return
	}
	d.scan(cands)
}

// scanPage offers a verified page to every pending decision whose stamp
// appears in it.
func (r *ledgerRun) scanPage(page []icrc3.Block) {
	byStamp := make(map[uint64][]*runDecision, len(r.pending))
	for _, d := range r.pending {
		byStamp[d.in.Stamp()] = append(byStamp[d.in.Stamp()], d)
	}
	for i := range page {
		if page[i].CreatedAt == nil {
			continue
		}
		for _, d := range byStamp[*page[i].CreatedAt] {
			d.scan(page[i : i+1])
		}
	}
}

// answerReady answers every pending decision the verified range now
// settles: its match is verified, or the range covers its window, or the
// history below failed.
func (r *ledgerRun) answerReady() error {
	keep := r.pending[:0]
	var fails []*runDecision
	for _, d := range r.pending {
		switch {
		case d.failed != nil:
			if err := r.fail(d, d.failed); err != nil {
				return err
			}
		case r.tip.Empty || d.match != nil || r.c.covers(d.w.From):
			r.finish(d)
		case r.below != nil:
			fails = append(fails, d)
		default:
			keep = append(keep, d)
		}
	}
	clear(r.pending[len(keep):])
	r.pending = keep
	if len(fails) > 0 {
		return r.failDecisions(fails, r.below)
	}
	return nil
}

// takeJoiners opens the intents that arrived since the last call, while
// the tip is young enough to serve them and the history below the range
// has not failed, and answers those it settles.
func (r *ledgerRun) takeJoiners() error {
	// After the history failed below the range, a joiner waits for the
	// next decision, which reads it again, rather than inherit a failure
	// that may have passed.
	for r.join.Take != nil && r.joinAge > 0 && r.below == nil && r.e.now().Sub(r.tipAt) < r.joinAge {
		ins := r.join.Take()
		if len(ins) == 0 {
			return nil
		}
		for _, d := range r.screen(ins) {
			r.open(d)
			r.lookup(d)
		}
		if err := r.answerReady(); err != nil {
			return err
		}
	}
	return nil
}

// walk extends the range down towards the deepest pending window, one
// extendDown, answering decisions as the pages settle them. It reports
// whether any decision was answered.
func (r *ledgerRun) walk(blind bool) (bool, error) {
	c := r.c
	before := r.n - len(r.pending)
	answered := func() bool { return r.n-len(r.pending) > before }
	var aim func() uint64
	if !blind {
		aim = func() uint64 {
			if c.r.Empty() {
				// Nothing read yet, so no density to aim by: as many pages
				// as the client keeps in flight go out at once (it bounds
				// them, at most coldPages), and the density of the first
				// verified one aims the rest. Asking for one page first
				// would cost a serial round trip on every far window; this
				// costs at most C−1 unused pages on a near one, once per
				// ledger.
				return c.r.Lo - min(c.r.Lo, coldPages*r.page)
			}
			return c.walkTarget(r.deepest(), r.page)
		}
	}
	var inPage error
	_, err := c.extendDown(r.ctx, 0, aim, func(p []icrc3.Block) bool {
		for _, d := range r.pending {
			d.read += uint64(len(p))
		}
		r.scanPage(p)
		if inPage = r.answerReady(); inPage != nil {
			return true
		}
		if inPage = r.takeJoiners(); inPage != nil {
			return true
		}
		return len(r.pending) == 0
	})
	if inPage != nil {
		return answered(), inPage
	}
	if err != nil {
		r.below = err
		return true, r.answerReady()
	}
	return answered(), nil
}

// deepest is the earliest window start of the pending decisions.
func (r *ledgerRun) deepest() uint64 {
	from := ^uint64(0)
	for _, d := range r.pending {
		from = min(from, d.w.From)
	}
	return from
}

// finish settles d on the run's tip and hands its verdict over.
func (r *ledgerRun) finish(d *runDecision) {
	c := r.c
	v := d.v
	// The window's blocks are named once the range reaches its start: a
	// match found on the way down leaves the blocks below unread, and the
	// range's lowest block is then not the window's first.
	if !r.tip.Empty && c.covers(d.w.From) {
		if first, last, ok, err := c.windowBlocks(r.ctx, c.r.Lo, c.r.Hi, d.w.From, d.w.To); err == nil && ok {
			f, l := reconciled.U64(first), reconciled.U64(last)
			v.Window.FirstBlock, v.Window.LastBlock = &f, &l
		}
	}
	v = r.e.settle(v, d.decision, d.w.ClosedAt(r.tip.Time))
	v.Evidence = r.evidence(d)
	r.done(d.k, v)
}

// evidence is what d's verdict rests on: the run's tip, the blocks read,
// and a history change the refresh met.
func (r *ledgerRun) evidence(d *runDecision) *reconciled.Evidence {
	ev := evidence(r.tip, d.decision)
	ev.HistoryChanged = r.c.changed
	return ev
}

// fail answers d unreadable, unless ctx ended: then the run stops.
func (r *ledgerRun) fail(d *runDecision, err error) error {
	return r.failDecisions([]*runDecision{d}, err)
}

func (r *ledgerRun) failDecisions(ds []*runDecision, err error) error {
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	for _, d := range ds {
		v := r.e.unreadable(d.v, err)
		if r.haveTip {
			v.Evidence = r.evidence(d)
		}
		r.done(d.k, v)
	}
	return nil
}

// failAll answers intents not yet screened unreadable.
func (r *ledgerRun) failAll(ins []*matcher.Intent, err error) error {
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	for _, in := range ins {
		k := r.n
		r.n++
		r.done(k, r.e.unreadable(reconciled.Verdict{IntentID: in.ID, IntentHash: in.HashHex()}, err))
	}
	return nil
}

func (r *ledgerRun) takePending() []*runDecision {
	ds := r.pending
	r.pending = nil
	return ds
}
