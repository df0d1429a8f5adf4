package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

// clock is a deterministic Now: each call advances one millisecond.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func openAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := OpenWith(context.Background(), path, Options{Now: newClock().Now, ReadConns: 2})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func openTest(t *testing.T) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "recon.db"))
}

func TestOpenMigratesAndReopens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "recon.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var versions []int
	if err := s.r.SelectContext(ctx, &versions, `SELECT version FROM schema_version ORDER BY version`); err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations()
	if err != nil || len(versions) != len(ms) || versions[len(versions)-1] != SchemaVersion() || SchemaVersion() < 1 {
		t.Fatalf("versions %v (%v), want every migration up to %d", versions, err, SchemaVersion())
	}
	var mode string
	var sync, fk int
	if err := s.w.GetContext(ctx, &mode, `PRAGMA journal_mode`); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q %v, want wal", mode, err)
	}
	if err := s.w.GetContext(ctx, &sync, `PRAGMA synchronous`); err != nil || sync != 2 {
		t.Fatalf("synchronous %d %v, want 2 (FULL)", sync, err)
	}
	var temp int
	if err := s.w.GetContext(ctx, &temp, `PRAGMA temp_store`); err != nil || temp != 2 {
		t.Fatalf("writer temp_store %d %v, want 2 (MEMORY)", temp, err)
	}
	if err := s.r.GetContext(ctx, &fk, `PRAGMA foreign_keys`); err != nil || fk != 1 {
		t.Fatalf("reader foreign_keys %d %v, want 1", fk, err)
	}
	if _, err := s.PutIntent(ctx, intent("keep", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openAt(t, path)
	var n int
	if err := s2.r.GetContext(ctx, &n, `SELECT count(*) FROM schema_version`); err != nil || n != len(ms) {
		t.Fatalf("after reopen %d versions (%v), want %d", n, err, len(ms))
	}
	if _, err := s2.Intent(ctx, "keep"); err != nil {
		t.Fatalf("data lost across reopen: %v", err)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "recon.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES (?, 'future', 0)`,
		SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if !errors.Is(err, ErrSchemaTooNew) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("open newer database: %v, want ErrSchemaTooNew", err)
	}
}

func TestFileModes(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "data", "store")
	path := filepath.Join(dir, "recon.db")
	s := openAt(t, path)
	if err := s.Writable(ctx); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		filepath.Join(root, "data"): 0o700,
		dir:                         0o700,
		path:                        0o600,
		path + "-wal":               0o600,
		path + "-shm":               0o600,
	} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", filepath.Base(p), got, want)
		}
	}
}

func TestPathNeedingEscape(t *testing.T) {
	ctx := context.Background()
	// Without escaping, '?' would start the URI query and '#' a fragment,
	// and SQLite would open a different file.
	dir := filepath.Join(t.TempDir(), "odd ?dir#%41")
	path := filepath.Join(dir, "recon.db")
	s := openAt(t, path)
	if err := s.Writable(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() == 0 {
		t.Fatalf("%s is empty: SQLite wrote elsewhere", path)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Fatalf("stray files next to the data dir: %v", entries)
	}
}

func TestWritableAndIntegrity(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.Writable(ctx); err != nil {
		t.Fatal(err)
	}
	fillSome(t, s)
	got, err := s.IntegrityCheck(ctx)
	if err != nil || got != "ok" {
		t.Fatalf("integrity %q %v", got, err)
	}
	var fkProblems int
	if err := s.r.GetContext(ctx, &fkProblems, `SELECT count(*) FROM pragma_foreign_key_check`); err != nil || fkProblems != 0 {
		t.Fatalf("foreign key check: %d %v", fkProblems, err)
	}
	s.Close()
	if err := s.Writable(ctx); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("writable after close: %v", err)
	}
}

func TestOutOfRangeRefused(t *testing.T) {
	if _, err := u64("x", 1<<63); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("u64(2^63): %v", err)
	}
	if v, err := u64("x", 1<<63-1); err != nil || v != 1<<63-1 {
		t.Fatalf("u64(2^63-1) = %d, %v", v, err)
	}
	if _, err := nanos("t", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("nanos(2300): %v", err)
	}
}

// A migration that fails halfway leaves neither its changes nor its
// version behind.
func TestMigrationIsAtomic(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	next := SchemaVersion() + 1
	broken := append(ms, migration{version: next, name: "broken.sql",
		sql: `CREATE TABLE half (a INTEGER); INSERT INTO nosuchtable VALUES (1);`})
	if err := s.applyMigrations(ctx, broken); err == nil || !strings.Contains(err.Error(), "broken.sql") {
		t.Fatalf("broken migration: %v", err)
	}
	var v, half int
	if err := s.r.GetContext(ctx, &v, `SELECT max(version) FROM schema_version`); err != nil || v != SchemaVersion() {
		t.Fatalf("version %d %v, want %d", v, err, SchemaVersion())
	}
	if err := s.r.GetContext(ctx, &half, `SELECT count(*) FROM sqlite_schema WHERE name = 'half'`); err != nil || half != 0 {
		t.Fatalf("half-applied migration left table: %d %v", half, err)
	}
	fixed := append(ms, migration{version: next, name: "fixed.sql", sql: `CREATE TABLE half (a INTEGER);`})
	if err := s.applyMigrations(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	if err := s.applyMigrations(ctx, fixed); err != nil {
		t.Fatalf("re-applying: %v", err)
	}
	if err := s.r.GetContext(ctx, &v, `SELECT max(version) FROM schema_version`); err != nil || v != next {
		t.Fatalf("version %d %v, want %d", v, err, next)
	}
}

func TestMigrationNumbering(t *testing.T) {
	sql := &fstest.MapFile{Data: []byte("SELECT 1;")}
	for name, fsys := range map[string]fstest.MapFS{
		"duplicate":  {"migrations/0001_a.sql": sql, "migrations/0001_b.sql": sql},
		"unnumbered": {"migrations/init.sql": sql},
	} {
		if _, err := readMigrations(fsys); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ms, err := readMigrations(fstest.MapFS{"migrations/0002_b.sql": sql, "migrations/0001_a.sql": sql})
	if err != nil || len(ms) != 2 || ms[0].name != "0001_a.sql" || ms[1].version != 2 {
		t.Fatalf("ordered: %+v %v", ms, err)
	}
	// A number reserved for a migration not merged yet leaves a gap.
	ms, err = readMigrations(fstest.MapFS{"migrations/0001_a.sql": sql, "migrations/0004_d.sql": sql})
	if err != nil || len(ms) != 2 || ms[1].version != 4 {
		t.Fatalf("gap: %+v %v", ms, err)
	}
}
