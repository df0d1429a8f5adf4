package store

import (
	"context"
	"database/sql"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"
)

// Statements are prepared once per SQL text and reused. SQLite (compiled
// to Go here) spends about as long parsing and planning a short statement
// as running it, and a burst runs the same dozen statements for every
// intent on the one writer connection, which every write waits for.
//
// The writer has exactly one connection, held by a transaction while it
// runs, so a statement cannot be prepared on the writer's pool from inside
// one: texts met in a transaction are run unprepared that once and
// prepared after it ends (prepareSeen), on the same connection, where the
// next transaction's Stmtx reuses them.

// maxStmts bounds the cache: texts built from a row count (multi-row
// inserts) are cached only up to it.
const maxStmts = 512

type stmtCache struct {
	db   *sqlx.DB
	mu   sync.Mutex
	m    map[string]*sqlx.Stmt
	seen map[string]struct{} // met in a transaction, not yet prepared
}

func newStmtCache(db *sqlx.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sqlx.Stmt{}, seen: map[string]struct{}{}}
}

// cacheable: a text of one statement. Preparing compiles only the first
// statement of a text, so a script (migrations, tests' fixtures) must run
// as an exec.
func cacheable(q string) bool {
	q = strings.TrimSpace(q)
	q = strings.TrimSuffix(q, ";")
	return !strings.Contains(q, ";")
}

// inTx returns the prepared statement for q, or nil after noting q to be
// prepared once the running transaction has ended.
func (c *stmtCache) inTx(q string) *sqlx.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.m[q]; st != nil {
		return st
	}
	if len(c.m)+len(c.seen) < maxStmts && cacheable(q) {
		c.seen[q] = struct{}{}
	}
	return nil
}

// prepareSeen prepares the texts met in transactions so far. It must be
// called with no transaction of this goroutine open. A text that fails to
// prepare (it failed when it ran too) is dropped and runs unprepared.
func (c *stmtCache) prepareSeen(ctx context.Context) {
	c.mu.Lock()
	if len(c.seen) == 0 {
		c.mu.Unlock()
		return
	}
	qs := make([]string, 0, len(c.seen))
	for q := range c.seen {
		qs = append(qs, q)
	}
	clear(c.seen)
	c.mu.Unlock()
	for _, q := range qs {
		st, err := c.db.PreparexContext(context.WithoutCancel(ctx), q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.m[q] == nil && len(c.m) < maxStmts {
			c.m[q] = st
			st = nil
		}
		c.mu.Unlock()
		if st != nil {
			st.Close()
		}
	}
}

// get returns the prepared statement for q, preparing it now: for a pool
// (the readers), where preparing takes a free connection, never one the
// caller holds.
func (c *stmtCache) get(ctx context.Context, q string) (*sqlx.Stmt, error) {
	c.mu.Lock()
	st := c.m[q]
	full := len(c.m) >= maxStmts
	c.mu.Unlock()
	if st != nil || full || !cacheable(q) {
		return st, nil
	}
	st, err := c.db.PreparexContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev := c.m[q]; prev != nil {
		st.Close()
		return prev, nil
	}
	c.m[q] = st
	return st, nil
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

// Tx is a writer transaction that runs cached statements.
type Tx struct {
	*sqlx.Tx
	c *stmtCache
}

func (t *Tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := t.c.inTx(q); st != nil {
		return t.Tx.StmtxContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

func (t *Tx) GetContext(ctx context.Context, dst any, q string, args ...any) error {
	if st := t.c.inTx(q); st != nil {
		return t.Tx.StmtxContext(ctx, st).GetContext(ctx, dst, args...)
	}
	return t.Tx.GetContext(ctx, dst, q, args...)
}

func (t *Tx) SelectContext(ctx context.Context, dst any, q string, args ...any) error {
	if st := t.c.inTx(q); st != nil {
		return t.Tx.StmtxContext(ctx, st).SelectContext(ctx, dst, args...)
	}
	return t.Tx.SelectContext(ctx, dst, q, args...)
}

// readDB is the read pool with cached statements.
type readDB struct {
	*sqlx.DB
	c *stmtCache
}

func (r readDB) GetContext(ctx context.Context, dst any, q string, args ...any) error {
	st, err := r.c.get(ctx, q)
	if err != nil {
		return err
	}
	if st == nil {
		return r.DB.GetContext(ctx, dst, q, args...)
	}
	return st.GetContext(ctx, dst, args...)
}

func (r readDB) SelectContext(ctx context.Context, dst any, q string, args ...any) error {
	st, err := r.c.get(ctx, q)
	if err != nil {
		return err
	}
	if st == nil {
		return r.DB.SelectContext(ctx, dst, q, args...)
	}
	return st.SelectContext(ctx, dst, args...)
}
