package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The store tracks the outcome of its real writes, so that readiness
// reports a store that cannot take the daemon's work (a full disk, an I/O
// error) from its first failed write, whatever a probe finds.
//
// Writes run on one of a few paths (WritePath). A path is failing from the
// first write on it that fails for a reason of storage (storageErr) until
// a later transaction on the same path commits having changed rows: that
// is what "a real write succeeds" means here. A commit that changed no row
// wrote no page and proves nothing; a success on another path, or of the
// probe, does not clear a path either, because on a nearly full disk a
// small write fits where a larger one does not (SQLite reuses the WAL's
// space from its start after a checkpoint, and a one-row write needs one
// page of it). Failures and successes are ordered by when their
// transaction began on the single writer connection, so a late-recorded
// failure never overrides a later commit.

// WritePath names a path of the store's writes.
type WritePath string

// The store's write paths.
const (
	// PathIntents: intents, verdicts and outbox marks (the group commit).
	PathIntents WritePath = "intents"
	// PathBlocks: the verified block cache.
	PathBlocks WritePath = "blocks"
	// PathState: the watch list, tips, outbox passes, discards and
	// migrations.
	PathState WritePath = "state"
	// PathProbe: Writable's own one-row write.
	PathProbe WritePath = "probe"
)

// WritePaths lists every path, in a fixed order (metrics labels).
var WritePaths = []WritePath{PathIntents, PathBlocks, PathState, PathProbe}

func (p WritePath) index() int {
	for i, q := range WritePaths {
		if q == p {
			return i
		}
	}
	panic("store: unknown write path " + string(p))
}

// WriteFailure is a write path that is failing.
type WriteFailure struct {
	Path WritePath
	// Since is when the first of its failed writes failed.
	Since time.Time
	// Failures counts its failed writes since then.
	Failures uint64
	// Err is the latest failure.
	Err error
}

func (f WriteFailure) Error() string {
	return fmt.Sprintf("store: %s writes failing since %s (%d failed): %v",
		f.Path, f.Since.UTC().Format(time.RFC3339), f.Failures, f.Err)
}

func (f WriteFailure) Unwrap() error { return f.Err }

type writeHealth struct {
	mu    sync.Mutex
	seq   uint64 // last ticket handed out
	paths [4]pathHealth
}

type pathHealth struct {
	last     uint64 // ticket of the latest outcome applied
	since    time.Time
	failures uint64
	err      error
	total    uint64 // every failed write, for the errors counter
}

// ticket orders an outcome: taken once a transaction has begun (the
// writer's single connection held) or when a write failed before that.
func (h *writeHealth) ticket() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	return h.seq
}

// failed records err on path if it is a failure of storage.
func (h *writeHealth) failed(path WritePath, ticket uint64, err error, now time.Time) {
	if !storageErr(err) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p := &h.paths[path.index()]
	p.total++
	if ticket < p.last {
		return
	}
	p.last = ticket
	if p.since.IsZero() {
		p.since = now
		p.failures = 0
	}
	p.failures++
	p.err = err
}

// committed records a commit on path that changed rows. A failure of the
// same transaction, recorded first, is not overridden.
func (h *writeHealth) committed(path WritePath, ticket uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := &h.paths[path.index()]
	if ticket <= p.last {
		return
	}
	p.last = ticket
	p.since, p.failures, p.err = time.Time{}, 0, nil
}

// storageErr reports whether err says the storage could not take a write
// (disk full, I/O error, read-only or unopenable file, corruption, the
// lock held past the busy timeout), as opposed to a refused record or a
// caller that gave up.
func storageErr(err error) bool {
	if err == nil {
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_READONLY,
			sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_NOLFS, sqlite3.SQLITE_PERM:
			return true
		}
		return false
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS)
}

// WriteFailures returns the write paths failing now (none: every path's
// latest outcome was a commit), in WritePaths order.
func (s *Store) WriteFailures() []WriteFailure {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []WriteFailure
	for i, p := range h.paths {
		if !p.since.IsZero() {
			out = append(out, WriteFailure{Path: WritePaths[i], Since: p.since, Failures: p.failures, Err: p.err})
		}
	}
	return out
}

// WriteErrors returns, per path, how many writes have failed for a reason
// of storage since the store was opened.
func (s *Store) WriteErrors() map[WritePath]uint64 {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[WritePath]uint64, len(WritePaths))
	for i, p := range h.paths {
		out[WritePaths[i]] = p.total
	}
	return out
}

// noteFailed records a write on path that failed before or outside a
// transaction.
func (s *Store) noteFailed(path WritePath, err error) {
	s.health.failed(path, s.health.ticket(), err, s.now())
}

// fault is Options.WriteFault, nil-safe.
func (s *Store) fault(path WritePath) error {
	if s.writeFault == nil {
		return nil
	}
	if err := s.writeFault(path); err != nil {
		return fmt.Errorf("store: injected write fault: %w", err)
	}
	return nil
}

// changes is the writer connection's count of rows changed so far (SQLite
// total_changes()), read inside t; -1 when it cannot be read.
func changes(ctx context.Context, t *Tx) int64 {
	var n int64
	if err := t.GetContext(ctx, &n, `SELECT total_changes()`); err != nil {
		return -1
	}
	return n
}
