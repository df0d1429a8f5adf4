package store

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/reconciled/reconciled/internal/group"
)

// Group commit: verdict writes of concurrent callers share one transaction,
// and so one WAL fsync (synchronous=FULL makes every commit pay one). In a
// burst the service finishes many decisions at once, and one commit per
// verdict would queue them behind the disk. A write that fails is rolled
// back alone and only its caller sees the error (commitGroup). No caller
// returns before the commit holding its write is durable, so the outbox
// rule (a verdict is published only once stored) holds as before.

// maxGroup bounds the writes of one transaction, so a long queue cannot
// hold the write lock for long.
const maxGroup = 256

type groupReq struct {
	ctx  context.Context
	what string
	fn   func(context.Context, *Tx) error
	err  error // set by the group's commit
}

type groupCommit struct {
	q       group.Queue[*groupReq]
	commits atomic.Uint64 // transactions committed, for tests
}

// groupTx runs fn in a writer transaction shared with whatever other
// groupTx calls are waiting. fn must do its statements with the context it
// is given, not its caller's: a statement interrupted by a cancelled
// context would make SQLite roll back the whole shared transaction. A
// caller whose ctx is done before its turn gets ctx's error and fn does
// not run.
func (s *Store) groupTx(ctx context.Context, what string, fn func(context.Context, *Tx) error) error {
	r := &groupReq{ctx: ctx, what: what, fn: fn}
	s.group.q.Do(r, func(g []*groupReq) {
		s.commitGroup(context.WithoutCancel(ctx), g)
		s.wst.prepareSeen(ctx)
	})
	return r.err
}

// commitGroup runs the group's writes in one transaction and sets every
// request's err. Writes almost never fail, so the group runs first without
// savepoints: a savepoint journals every page a write first touches, and
// its two statements cost as much as a small write. Should any write fail,
// that transaction is rolled back whole and the group runs again with a
// savepoint per write, so the failure is rolled back alone. A write may
// therefore run twice; each is a function of the transaction it is given.
func (s *Store) commitGroup(ctx context.Context, group []*groupReq) {
	done, ms := s.commitAll(ctx, group)
	if done {
		return
	}
	for _, q := range group {
		q.err = nil
	}
	s.commitIsolated(ctx, group, ms)
}

// commitAll runs the group and the queued marks in one transaction without
// savepoints. It reports false, having rolled back, when a write or the
// marks failed, with the marks it took; otherwise every request's err is
// set. Marks are taken only once a transaction has begun: a writer that
// cannot begin (the lock held past the busy timeout) fails the group at
// once, without a second wait, and leaves them queued.
func (s *Store) commitAll(ctx context.Context, group []*groupReq) (bool, []mark) {
	st, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		s.noteFailed(PathIntents, err)
		failGroup(group, "begin", err)
		return true, nil
	}
	ticket := s.health.ticket()
	t := &Tx{Tx: st, c: s.wst}
	before := changes(ctx, t)
	wrote := false
	ms := s.takeMarks()
	if len(ms) > 0 {
		if err := applyMarks(ctx, t, ms); err != nil {
			t.Rollback()
			s.health.failed(PathIntents, ticket, err, s.now())
			return false, ms
		}
		wrote = true
	}
	for _, q := range group {
		if q.gaveUp() {
			continue
		}
		if err := q.fn(ctx, t); err != nil {
			t.Rollback()
			s.health.failed(PathIntents, ticket, err, s.now())
			return false, ms
		}
		wrote = true
	}
	if !wrote {
		t.Rollback()
		return true, nil
	}
	if !s.commitTracked(ctx, t, ticket, before, group) {
		return true, nil
	}
	s.countCommit()
	return true, nil
}

// commitTracked commits t, the group's transaction begun with ticket when
// the writer had changed before rows, and records the outcome on
// PathIntents (health.go). It reports whether t committed; if not, every
// request not yet answered is failed.
func (s *Store) commitTracked(ctx context.Context, t *Tx, ticket uint64, before int64, group []*groupReq) bool {
	changed := changes(ctx, t) > before && before >= 0
	err := s.fault(PathIntents)
	if err != nil {
		t.Rollback()
	} else {
		err = t.Commit()
	}
	if err != nil {
		s.health.failed(PathIntents, ticket, err, s.now())
		failGroup(group, "commit", err)
		return false
	}
	if changed {
		s.health.committed(PathIntents, ticket)
	}
	return true
}

// failGroup fails every request of the group not yet answered: step (of
// the shared transaction) failed with err.
func failGroup(group []*groupReq, step string, err error) {
	for _, q := range group {
		if q.err == nil {
			q.err = fmt.Errorf("store: %s: %s: %w", q.what, step, err)
		}
	}
}

// gaveUp answers a request whose caller's context ended before its turn:
// its write does not run.
func (q *groupReq) gaveUp() bool {
	if err := q.ctx.Err(); err != nil {
		q.err = fmt.Errorf("store: %s: %w", q.what, err)
		return true
	}
	return false
}

func (s *Store) countCommit() { s.group.commits.Add(1) }

// commitIsolated runs the group's writes in one transaction, each in its
// own savepoint, and sets every request's err. ms are marks an earlier
// attempt took; with none, the queued ones are taken once it has begun.
func (s *Store) commitIsolated(ctx context.Context, group []*groupReq, ms []mark) {
	st, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		s.noteFailed(PathIntents, err)
		s.requeueMarks(ms)
		failGroup(group, "begin", err)
		return
	}
	ticket := s.health.ticket()
	t := &Tx{Tx: st, c: s.wst}
	before := changes(ctx, t)
	wrote := false
	// inSavepoint runs fn in a savepoint of t: a failing fn is rolled back
	// alone. It reports false when the transaction itself broke (then t
	// is rolled back and every request failed).
	inSavepoint := func(fn func() error) (fnErr error, ok bool) {
		if _, err := t.ExecContext(ctx, `SAVEPOINT w`); err != nil {
			t.Rollback()
			s.health.failed(PathIntents, ticket, err, s.now())
			failGroup(group, "savepoint", err)
			return nil, false
		}
		if fnErr = fn(); fnErr != nil {
			s.health.failed(PathIntents, ticket, fnErr, s.now())
			if _, err := t.ExecContext(ctx, `ROLLBACK TO w`); err != nil {
				t.Rollback()
				failGroup(group, "roll back to savepoint", err)
				return nil, false
			}
		} else {
			wrote = true
		}
		if _, err := t.ExecContext(ctx, `RELEASE w`); err != nil {
			t.Rollback()
			s.health.failed(PathIntents, ticket, err, s.now())
			failGroup(group, "release savepoint", err)
			return nil, false
		}
		return fnErr, true
	}
	// Queued marks ride in this commit, in a savepoint of their own: a
	// failure drops them (the outbox pass clears the rows later) and
	// fails no write of the group.
	if ms == nil {
		ms = s.takeMarks()
	}
	if len(ms) > 0 {
		if _, ok := inSavepoint(func() error { return applyMarks(ctx, t, ms) }); !ok {
			return
		}
	}
	for _, q := range group {
		if q.gaveUp() {
			continue
		}
		err, ok := inSavepoint(func() error { return q.fn(ctx, t) })
		if !ok {
			return
		}
		q.err = err
	}
	if !wrote {
		t.Rollback()
		return
	}
	if !s.commitTracked(ctx, t, ticket, before, group) {
		return
	}
	s.countCommit()
}
