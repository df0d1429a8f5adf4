package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"modernc.org/sqlite" // also registers the "sqlite" driver

	"github.com/reconciled/reconciled"
)

func init() {
	// sqlx does not know modernc's driver name; without this, Rebind and In
	// guess the placeholder style.
	sqlx.BindDriver("sqlite", sqlx.QUESTION)
}

// kindErr is a store error that is also the vocabulary's error kind:
// errors.Is matches both, and its text is the store's alone.
type kindErr struct {
	msg  string
	kind error
}

func kindError(msg string, kind error) error { return &kindErr{msg: msg, kind: kind} }

func (e *kindErr) Error() string { return e.msg }
func (e *kindErr) Unwrap() error { return e.kind }

// Errors callers branch on. Returned errors wrap them with context; test
// with errors.Is. Each of not found, history and invalid record is also
// the vocabulary's error of that kind (reconciled.ErrNotFound, ErrHistory,
// ErrInvalidRecord), so that the service, which knows only those, tells
// them apart without a translation layer.
var (
	// ErrNotFound: no such intent, verdict or tip.
	ErrNotFound = kindError("store: not found", reconciled.ErrNotFound)
	// ErrFinal: the intent already has a final verdict; nothing may follow
	// it and it cannot be watched.
	ErrFinal = kindError("store: intent already has a final verdict", reconciled.ErrHistory)
	// ErrSeqConflict: a verdict differing from the stored one at the same seq.
	ErrSeqConflict = kindError("store: different verdict at an existing seq", reconciled.ErrHistory)
	// ErrSeqGap: a verdict whose seq is not the next one.
	ErrSeqGap = kindError("store: verdict seq is not the next one", reconciled.ErrHistory)
	// ErrBlockConflict: a block index cached inside the recorded verified
	// range (or, without a range, at all) with another hash or timestamp,
	// or a tip that contradicts the cache. It is reconcile's
	// ErrBlockConflict: the engine takes it for a history change.
	ErrBlockConflict = fmt.Errorf("store: %w", reconciled.ErrBlockConflict)
	// ErrSchemaTooNew: the database was migrated by a newer version of the
	// daemon; running older code against it could misread it.
	ErrSchemaTooNew = errors.New("store: database schema is newer than this program")
	// ErrOutOfRange: a value that cannot be stored faithfully (a u64 ≥ 2^63
	// in an ordered column, a time outside 1678..2262).
	ErrOutOfRange = kindError("store: value out of storable range", reconciled.ErrInvalidRecord)
	// ErrInvalid: a malformed record (bad intent id, unknown status, …).
	ErrInvalid = kindError("store: invalid record", reconciled.ErrInvalidRecord)
)

// Store is the daemon's database. It is safe for concurrent use.
type Store struct {
	w    *sqlx.DB // exactly one connection: the writer
	r    readDB   // query-only read pool
	wst  *stmtCache
	path string
	now  func() time.Time

	group groupCommit // verdict writes (groupcommit.go)
	marks markQueue   // published verdicts' outbox rows to clear (marks.go)

	health     writeHealth // outcomes of the real writes (health.go)
	writeFault func(WritePath) error

	// insertRun stores a run of blocks and insertStampsFull stampRows
	// stamp rows (blocks.go), prepared once on the writer.
	insertRun, insertStampsFull *sqlx.Stmt

	bad     *corruption // the first sign of a damaged file (corrupt.go)
	checked bool        // Open's quick_check ran to its end
	created bool        // the file held no schema before this Open
	changes atomic.Uint64
	pruned  atomic.Uint64 // intents deleted by retention (prune.go)
}

// Options tune Open. The zero value is the production setting.
type Options struct {
	// ReadConns bounds the read pool; 0 means max(4, GOMAXPROCS).
	ReadConns int
	// BusyTimeout is how long a connection waits for a lock held by another
	// process on the same file; 0 means 5 s.
	BusyTimeout time.Duration
	// Now replaces the clock for first_seen/updated_at stamps (tests).
	Now func() time.Time
	// WriteFault, when set, is asked before each commit on the writer
	// (and before Writable's probe): an error it returns fails that write
	// as the disk would, and is tracked as one (tests of a failing disk
	// where no small file system can be mounted).
	WriteFault func(WritePath) error
	// CheckTimeout bounds the PRAGMA quick_check run at open; 0 means
	// DefaultCheckTimeout, negative skips the check. Past the bound the
	// store opens unchecked (Checked reports false).
	CheckTimeout time.Duration
}

// Open opens (creating if needed) the database at path and migrates it to
// the current schema. A missing directory is created 0700 and a missing file
// 0600 (SQLite gives its -wal and -shm files the database file's mode).
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith is Open with options. A damaged file (SQLite reports it
// corrupt or not a database, or PRAGMA quick_check finds a problem) is a
// *CorruptError (errors.Is ErrCorrupt), whichever step met it.
func OpenWith(ctx context.Context, path string, o Options) (_ *Store, err error) {
	if path == "" {
		return nil, fmt.Errorf("store: open: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := createFile(abs); err != nil {
		return nil, err
	}
	if o.ReadConns <= 0 {
		o.ReadConns = max(4, runtime.GOMAXPROCS(0))
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}

	if o.CheckTimeout == 0 {
		o.CheckTimeout = DefaultCheckTimeout
	}

	s := &Store{path: abs, now: o.Now, bad: newCorruption()}
	defer func() {
		if c := s.Corrupt(); err != nil && c != nil {
			err = c
		}
	}()
	w, err := s.openDB(dsn(abs, o.BusyTimeout, true), true)
	if err != nil {
		return nil, fmt.Errorf("store: open writer %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s.w, s.wst, s.writeFault = w, newStmtCache(w), o.WriteFault
	s.group.q.Max = maxGroup
	// The writer connects first: it switches the file to WAL, which the
	// read-only connections cannot do.
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	// Before anything reads the file: a damaged page would otherwise show
	// as whatever error the first statement to meet it makes of it.
	if err := s.quickCheck(ctx, o.CheckTimeout); err != nil {
		w.Close()
		return nil, err
	}
	var objects int
	if err := w.GetContext(ctx, &objects, `SELECT count(*) FROM sqlite_schema`); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open %s: read schema: %w", abs, err)
	}
	s.created = objects == 0
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, err
	}
	if err := s.backfillIndex(ctx); err != nil {
		w.Close()
		return nil, err
	}
	if s.insertRun, err = w.PreparexContext(ctx, insertRunSQL); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open %s: prepare block insert: %w", abs, err)
	}
	if s.insertStampsFull, err = w.PreparexContext(ctx, stampsSQL(stampRows)); err != nil {
		s.insertRun.Close()
		w.Close()
		return nil, fmt.Errorf("store: open %s: prepare stamp insert: %w", abs, err)
	}
	r, err := s.openDB(dsn(abs, o.BusyTimeout, false), false)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open readers %s: %w", abs, err)
	}
	r.SetMaxOpenConns(o.ReadConns)
	r.SetMaxIdleConns(o.ReadConns)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("store: open readers %s: %w", abs, err)
	}
	s.r = readDB{DB: r, c: newStmtCache(r)}
	return s, nil
}

// openDB opens a pool whose every error passes through s.observe, and
// whose writes (writer) count in Changes.
func (s *Store) openDB(dsn string, writer bool) (*sqlx.DB, error) {
	base, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	c := observedConnector{Connector: base, onErr: s.observe}
	if writer {
		c.onWrite = func() { s.changes.Add(1) }
	}
	return sqlx.NewDb(sql.OpenDB(c), "sqlite"), nil
}

// Changes counts the writes that succeeded since Open (statements and
// commits; a transaction counts more than once). Figures derived from the
// store need reading again only when it has moved.
func (s *Store) Changes() uint64 { return s.changes.Load() }

// dsn builds a file: URI; a plain name would have SQLite's own parameters
// stripped. synchronous=FULL: a verdict is published only after it commits,
// and with NORMAL a power loss can roll back commits whose verdicts are
// already on the wire; the store would then re-decide that seq differently
// and conflict with the fleet. Writes are few and batched, so the extra WAL
// fsync per commit is cheap. Block cache writes are the exception
// (cacheTx). temp_store=MEMORY keeps the statement journal of a multi-row
// block insert in memory instead of spilling it to a temporary file, which
// held nothing durable.
func dsn(path string, busy time.Duration, writer bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if writer {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		// A group commit that meets a failing write runs each write in a
		// savepoint, and multi-row inserts keep a statement journal: in a
		// temporary file each would be written with a system call per
		// page, and neither outlives the transaction.
		q.Add("_pragma", "temp_store(MEMORY)")
		q.Add("_txlock", "immediate")
	} else {
		q.Add("_query_only", "1")
	}
	// SQLite decodes %HH in the path of a file: URI, so escaping keeps '?',
	// '#' and '%' in directory names from being read as URI syntax.
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return "file:" + strings.TrimPrefix(u.String(), "file://")
}

// createFile creates the directory (0700) and the database file (0600)
// before SQLite does, so neither inherits a permissive umask-derived mode.
// Existing ones are left as the operator set them.
func createFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("store: create directory %s: %w", dir, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	return nil
}

// Created reports whether this Open found the file without a schema: a
// new store, which holds none of the fleet's verdicts yet.
func (s *Store) Created() bool { return s.created }

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes both pools. In-flight transactions are finished by
// database/sql before the connections close.
func (s *Store) Close() error {
	var errs []error
	if err := s.closeMarks(context.Background()); err != nil {
		errs = append(errs, err)
	}
	s.wst.close()
	if s.r.DB != nil {
		s.r.c.close()
		if err := s.r.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close readers: %w", err))
		}
	}
	for _, st := range []*sqlx.Stmt{s.insertRun, s.insertStampsFull} {
		if st == nil {
			continue
		}
		if err := st.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close block insert: %w", err))
		}
	}
	if err := s.w.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store: close writer: %w", err))
	}
	return errors.Join(errs...)
}

// Writable reports whether the store takes writes, for readiness probes.
// It fails while any real write path is failing (WriteFailures: the
// outcome of the daemon's own writes, not of a probe), and otherwise
// commits a one-row write, which fails when the writer is wedged, the disk
// is read-only or full, or the lock is held by another process past the
// busy timeout. The probe adds a write attempt when the daemon is idle;
// its success never clears a failing real path.
func (s *Store) Writable(ctx context.Context) error {
	var failing []error
	for _, f := range s.WriteFailures() {
		if f.Path != PathProbe {
			failing = append(failing, f)
		}
	}
	if len(failing) > 0 {
		return fmt.Errorf("store: not writable: %w", errors.Join(failing...))
	}
	ticket := s.health.ticket()
	if err := s.fault(PathProbe); err != nil {
		s.health.failed(PathProbe, ticket, err, s.now())
		return fmt.Errorf("store: writable probe: %w", err)
	}
	_, err := s.w.ExecContext(ctx,
		`INSERT INTO probe (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at`,
		s.now().UnixNano())
	if err != nil {
		s.health.failed(PathProbe, ticket, err, s.now())
		return fmt.Errorf("store: writable probe: %w", err)
	}
	s.health.committed(PathProbe, ticket)
	return nil
}

// IntegrityCheck runs PRAGMA integrity_check and returns its report: "ok"
// for a sound file, otherwise the problems found, one per line.
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	var lines []string
	if err := s.r.SelectContext(ctx, &lines, `PRAGMA integrity_check`); err != nil {
		return "", fmt.Errorf("store: integrity check: %w", err)
	}
	return strings.Join(lines, "\n"), nil
}

// tx runs fn in a writer transaction (BEGIN IMMEDIATE: the write lock is
// taken up front, so a read-then-write inside fn cannot fail on upgrade).
func (s *Store) tx(ctx context.Context, what string, fn func(*Tx) error) error {
	// Texts met in the transaction are prepared once it has given the
	// writer's connection back.
	defer s.wst.prepareSeen(ctx)
	return s.runTx(ctx, s.w, PathState, what, fn)
}

// cacheTx is tx for writes of the block cache only, committed with
// synchronous=NORMAL: the commit does not wait for the WAL to reach the
// disk, which on the cold scan's path is one wait per verified page. A
// power loss may then roll back the latest cache commits, never a part of
// one, and never one that a later FULL commit followed: that commit's sync
// covers every frame before it in the WAL. So a verdict (always FULL)
// decided from cached blocks is durable together with them, and what is
// lost is only reads of the ledger again. The writer's single connection
// is held throughout, so no other write runs at NORMAL; one whose level
// cannot be restored is closed rather than reused.
func (s *Store) cacheTx(ctx context.Context, what string, fn func(*Tx) error) (err error) {
	defer s.wst.prepareSeen(ctx) // after c is closed: it holds the writer's connection
	c, err := s.w.Connx(ctx)
	if err != nil {
		return fmt.Errorf("store: %s: connection: %w", what, err)
	}
	defer func() {
		if _, rerr := c.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = FULL`); rerr != nil {
			c.Raw(func(any) error { return driver.ErrBadConn })
			err = errors.Join(err, fmt.Errorf("store: %s: restore synchronous: %w", what, rerr))
		}
		c.Close()
	}()
	if _, err := c.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		return fmt.Errorf("store: %s: synchronous: %w", what, err)
	}
	return s.runTx(ctx, c, PathBlocks, what, fn)
}

// runTx runs fn in a transaction of db and records the outcome on path
// (health.go).
func (s *Store) runTx(ctx context.Context, db interface {
	BeginTxx(context.Context, *sql.TxOptions) (*sqlx.Tx, error)
}, path WritePath, what string, fn func(*Tx) error) error {
	st, err := db.BeginTxx(ctx, nil)
	if err != nil {
		s.noteFailed(path, err)
		return fmt.Errorf("store: %s: begin: %w", what, err)
	}
	ticket := s.health.ticket()
	t := &Tx{Tx: st, c: s.wst}
	before := changes(ctx, t)
	if err := fn(t); err != nil {
		t.Rollback()
		s.health.failed(path, ticket, err, s.now())
		return err
	}
	changed := changes(ctx, t) > before && before >= 0
	if err := s.fault(path); err != nil {
		t.Rollback()
		s.health.failed(path, ticket, err, s.now())
		return fmt.Errorf("store: %s: commit: %w", what, err)
	}
	if err := t.Commit(); err != nil {
		s.health.failed(path, ticket, err, s.now())
		return fmt.Errorf("store: %s: commit: %w", what, err)
	}
	if changed {
		s.health.committed(path, ticket)
	}
	return nil
}

// u64 converts a u64 for an INTEGER column. Values ≥ 2^63 are refused
// rather than stored as negative bit patterns, which would sort before 0.
// Ledger timestamps stay below 2^63 ns until 2262 and block indexes far
// longer, so refusing costs nothing real.
func u64(what string, v uint64) (int64, error) {
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %s %d ≥ 2^63", ErrOutOfRange, what, v)
	}
	return int64(v), nil
}

// sat64 stores a ledger time that is only used for scheduling: a value
// beyond 2^63 (a window ending after the year 2262) saturates instead of
// making the verdict that carries it unstorable.
func sat64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// nanos converts a wall-clock time to Unix nanoseconds, refusing times whose
// nanoseconds do not fit in int64 (UnixNano is undefined there).
func nanos(what string, t time.Time) (int64, error) {
	if t.Before(minTime) || t.After(maxTime) {
		return 0, fmt.Errorf("%w: %s %s", ErrOutOfRange, what, t)
	}
	return t.UnixNano(), nil
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }
