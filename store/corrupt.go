package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrCorrupt: the database file is damaged (SQLite's SQLITE_CORRUPT or
// SQLITE_NOTADB, or PRAGMA quick_check found a problem). Nothing the
// daemon does mends it: the file must be moved away, and a fresh store
// imports the fleet's verdicts from the verdict stream. The error is a
// *CorruptError.
var ErrCorrupt = errors.New("store: database file is corrupt")

// DefaultCheckTimeout bounds the PRAGMA quick_check that Open runs (see
// Options.CheckTimeout). quick_check reads every page once, so its time
// follows the file's size and the disk: 30 s covers the 2 GiB a pod's
// store is given even from a cold disk at 100 MB/s (the rate from the page
// cache is in docs/benchmarks.md#current-figures).
const DefaultCheckTimeout = 30 * time.Second

// CorruptError says which file is damaged and what SQLite said about it,
// with any byte that is not printable text escaped (a damaged page can put
// arbitrary bytes into messages).
type CorruptError struct {
	Path   string
	Detail string
}

func (e *CorruptError) Error() string {
	msg := "store " + e.Path + " is corrupt: move it away; the daemon rebuilds it from the stream"
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// isCorruptErr reports whether err is SQLite saying that the file is
// damaged or not a database.
func isCorruptErr(err error) bool {
	if err == nil {
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return true
		}
		return false
	}
	// The driver's error type can be lost when a message is rebuilt.
	return strings.Contains(err.Error(), "database disk image is malformed")
}

// printable escapes what is not printable text in s (invalid UTF-8,
// control characters) as \xHH and bounds its length.
func printable(s string) string {
	const max = 300
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < max; {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteByte(' ')
		case !unicode.IsPrint(r):
			for _, c := range []byte(s[i : i+n]) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	if b.Len() >= max {
		b.WriteString("…")
	}
	return b.String()
}

// corruption is the store's record of the first sign of damage.
type corruption struct {
	once sync.Once
	err  *CorruptError
	done chan struct{}
}

func newCorruption() *corruption { return &corruption{done: make(chan struct{})} }

// observe marks the store corrupt when err says so; every error of every
// connection passes here.
func (s *Store) observe(err error) {
	if isCorruptErr(err) {
		s.markCorrupt(printable(err.Error()))
	}
}

func (s *Store) markCorrupt(detail string) {
	s.bad.once.Do(func() {
		s.bad.err = &CorruptError{Path: s.path, Detail: detail}
		close(s.bad.done)
	})
}

// Corrupt returns a *CorruptError once any read or write of the store has
// met a damaged file (or Open's check found one), nil before. A corrupt
// store is not ready: each later answer from it may be wrong.
func (s *Store) Corrupt() error {
	select {
	case <-s.bad.done:
		return s.bad.err
	default:
		return nil
	}
}

// Corrupted is closed when Corrupt starts returning an error: the owner
// should stop, and its supervisor restart it once the file is moved away.
func (s *Store) Corrupted() <-chan struct{} { return s.bad.done }

// Checked reports whether Open's quick_check ran to its end (false when
// it was disabled or ran past Options.CheckTimeout).
func (s *Store) Checked() bool { return s.checked }

// quickCheck runs PRAGMA quick_check within bound: a damaged file is
// ErrCorrupt. Past the bound the check is abandoned and the store opens
// unchecked (Checked is false); damage met later still marks it corrupt.
func (s *Store) quickCheck(ctx context.Context, bound time.Duration) error {
	if bound < 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var lines []string
	err := s.w.SelectContext(cctx, &lines, `PRAGMA quick_check(1)`)
	if c := s.Corrupt(); c != nil {
		return c
	}
	if err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			return nil // past the bound: unchecked
		}
		return fmt.Errorf("store: open %s: quick_check: %w", s.path, err)
	}
	if len(lines) == 1 && lines[0] == "ok" {
		s.checked = true
		return nil
	}
	detail := strings.Join(lines, "; ")
	detail = strings.TrimPrefix(detail, "*** in database main ***\n")
	s.markCorrupt("quick_check: " + printable(detail))
	return s.Corrupt()
}

// MoveAside renames a store's file and its -wal and -shm files to
// <name>.corrupt-<UTC time>[-wal|-shm], so that the next Open starts an
// empty store. It returns the new name of the database file; files that
// do not exist are skipped.
func MoveAside(path string, now time.Time) (string, error) {
	to := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	for _, suf := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(path+suf, to+suf); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("store: move %s aside: %w", path+suf, err)
		}
	}
	return to, nil
}

// The driver's connections are wrapped so that every error they return
// passes through onErr, whichever statement or pool it came from. The
// wrappers forward each optional interface modernc's connections
// implement (see sqlite.NewConnector).

type observedConnector struct {
	driver.Connector
	onErr func(error)
	// onWrite, when set, is called after each statement run as an exec
	// and each commit that succeeded (the writer's pool).
	onWrite func()
}

func (c observedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		c.onErr(err)
		return nil, err
	}
	return &observedConn{c: conn, onErr: c.onErr, onWrite: c.onWrite}, nil
}

type observedConn struct {
	c       driver.Conn
	onErr   func(error)
	onWrite func()
}

func (o *observedConn) wrote(err error) error {
	if err == nil && o.onWrite != nil {
		o.onWrite()
	}
	return o.seen(err)
}

func (o *observedConn) seen(err error) error {
	if err != nil && err != driver.ErrSkip {
		o.onErr(err)
	}
	return err
}

func (o *observedConn) Unwrap() driver.Conn { return o.c }

func (o *observedConn) Prepare(q string) (driver.Stmt, error) {
	st, err := o.c.Prepare(q)
	if err != nil {
		return nil, o.seen(err)
	}
	return &observedStmt{st: st, o: o}, nil
}

func (o *observedConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	pc, ok := o.c.(driver.ConnPrepareContext)
	if !ok {
		return o.Prepare(q)
	}
	st, err := pc.PrepareContext(ctx, q)
	if err != nil {
		return nil, o.seen(err)
	}
	return &observedStmt{st: st, o: o}, nil
}

func (o *observedConn) Close() error { return o.c.Close() }

func (o *observedConn) Begin() (driver.Tx, error) {
	t, err := o.c.Begin()
	if err != nil {
		return nil, o.seen(err)
	}
	return observedTx{t: t, o: o}, nil
}

func (o *observedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	bt, ok := o.c.(driver.ConnBeginTx)
	if !ok {
		return o.Begin()
	}
	t, err := bt.BeginTx(ctx, opts)
	if err != nil {
		return nil, o.seen(err)
	}
	return observedTx{t: t, o: o}, nil
}

func (o *observedConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	ec, ok := o.c.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := ec.ExecContext(ctx, q, args)
	return r, o.wrote(err)
}

func (o *observedConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	qc, ok := o.c.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := qc.QueryContext(ctx, q, args)
	if err != nil {
		return nil, o.seen(err)
	}
	return observedRows{r: r, o: o}, nil
}

func (o *observedConn) Ping(ctx context.Context) error {
	if p, ok := o.c.(driver.Pinger); ok {
		return o.seen(p.Ping(ctx))
	}
	return nil
}

func (o *observedConn) ResetSession(ctx context.Context) error {
	if r, ok := o.c.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (o *observedConn) IsValid() bool {
	if v, ok := o.c.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

type observedStmt struct {
	st driver.Stmt
	o  *observedConn
}

func (s *observedStmt) Close() error  { return s.st.Close() }
func (s *observedStmt) NumInput() int { return s.st.NumInput() }
func (s *observedStmt) Exec(args []driver.Value) (driver.Result, error) {
	r, err := s.st.Exec(args)
	return r, s.o.wrote(err)
}
func (s *observedStmt) Query(args []driver.Value) (driver.Rows, error) {
	r, err := s.st.Query(args)
	if err != nil {
		return nil, s.o.seen(err)
	}
	return observedRows{r: r, o: s.o}, nil
}

func (s *observedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	ec, ok := s.st.(driver.StmtExecContext)
	if !ok {
		return nil, errors.New("store: driver statement without ExecContext")
	}
	r, err := ec.ExecContext(ctx, args)
	return r, s.o.wrote(err)
}

func (s *observedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	qc, ok := s.st.(driver.StmtQueryContext)
	if !ok {
		return nil, errors.New("store: driver statement without QueryContext")
	}
	r, err := qc.QueryContext(ctx, args)
	if err != nil {
		return nil, s.o.seen(err)
	}
	return observedRows{r: r, o: s.o}, nil
}

type observedRows struct {
	r driver.Rows
	o *observedConn
}

func (r observedRows) Columns() []string { return r.r.Columns() }
func (r observedRows) Close() error      { return r.o.seen(r.r.Close()) }

func (r observedRows) Next(dest []driver.Value) error {
	err := r.r.Next(dest)
	if err != nil && err != io.EOF {
		r.o.seen(err)
	}
	return err
}

type observedTx struct {
	t driver.Tx
	o *observedConn
}

func (t observedTx) Commit() error   { return t.o.wrote(t.t.Commit()) }
func (t observedTx) Rollback() error { return t.o.seen(t.t.Rollback()) }
