package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// migrations/NNNN_name.sql, applied in order; version N is the file
// numbered N. A released file is never edited: change the schema by adding
// the next number. Numbers are unique and ascending but may have gaps while
// numbers are reserved for work not merged yet; each migration is applied
// once, by whether its own number is recorded, so one merged in below an
// applied one still runs (migrations must therefore not depend on the
// order of unrelated ones).
//
//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) { return readMigrations(migrationFS) }

func readMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("store: list migrations: %w", err)
	}
	sort.Strings(names)
	ms := make([]migration, 0, len(names))
	last := 0
	for _, n := range names {
		base := strings.TrimPrefix(n, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || len(num) != 4 || v <= last {
			// A duplicate would make the recorded version ambiguous.
			return nil, fmt.Errorf("store: migration %s: want a unique 4-digit number above %04d", base, last)
		}
		last = v
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("store: read migration %s: %w", base, err)
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	return ms, nil
}

// SchemaVersion is the schema version this program migrates to: its
// highest migration number.
func SchemaVersion() int {
	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate brings the database to the newest schema, one transaction per
// migration so a crash leaves it at a recorded version. The version is
// re-read inside each transaction: another process opening the same file
// may have migrated it meanwhile.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	return s.applyMigrations(ctx, ms)
}

func (s *Store) applyMigrations(ctx context.Context, ms []migration) error {
	if len(ms) == 0 {
		return fmt.Errorf("store: no migrations")
	}
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("store: create schema_version: %w", err)
	}
	newest := ms[len(ms)-1].version
	for _, m := range ms {
		err := s.tx(ctx, "migrate", func(t *Tx) error {
			cur, err := schemaVersion(ctx, t)
			if err != nil {
				return err
			}
			if cur > newest {
				return fmt.Errorf("%w: database at version %d, program knows %d", ErrSchemaTooNew, cur, newest)
			}
			var done int
			if err := t.GetContext(ctx, &done, `SELECT count(*) FROM schema_version WHERE version = ?`, m.version); err != nil {
				return fmt.Errorf("store: read schema version: %w", err)
			}
			if done > 0 {
				return nil
			}
			if _, err := t.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("store: migration %s: %w", m.name, err)
			}
			if _, err := t.ExecContext(ctx,
				`INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, s.now().UnixNano()); err != nil {
				return fmt.Errorf("store: record migration %s: %w", m.name, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func schemaVersion(ctx context.Context, t *Tx) (int, error) {
	var cur int
	if err := t.GetContext(ctx, &cur, `SELECT coalesce(max(version), 0) FROM schema_version`); err != nil {
		return 0, fmt.Errorf("store: read schema version: %w", err)
	}
	return cur, nil
}
