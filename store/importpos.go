package store

import (
	"context"
	"database/sql"
	"fmt"
)

// ImportPosition is what the store has imported from the verdict stream
// (migration 0014).
type ImportPosition struct {
	// StoreID is made with the store and never changes: a copy of the file
	// keeps it, a new file has another.
	StoreID string
	// Stream identifies the stream Seq is a sequence of ("" none yet).
	Stream string
	// Seq is the stream sequence through which every verdict is in the
	// store (0: none).
	Seq uint64
	// Known is false for a store migrated from a release that recorded no
	// position, until SetImportPosition.
	Known bool
}

// ImportPosition reads the store's import position. A store created by
// this Open knows it has imported nothing.
func (s *Store) ImportPosition(ctx context.Context) (ImportPosition, error) {
	var row struct {
		StoreID string        `db:"store_id"`
		Stream  string        `db:"stream"`
		Seq     sql.NullInt64 `db:"stream_seq"`
	}
	if err := s.r.GetContext(ctx, &row, `SELECT store_id, stream, stream_seq FROM import_position WHERE id = 1`); err != nil {
		return ImportPosition{}, fmt.Errorf("store: read import position: %w", err)
	}
	p := ImportPosition{StoreID: row.StoreID, Stream: row.Stream, Known: row.Seq.Valid || s.created}
	if row.Seq.Valid {
		p.Seq = uint64(row.Seq.Int64)
	}
	return p, nil
}

// SetImportPosition records that every verdict of stream through seq is
// in the store. The caller records it only after those verdicts
// committed, so that the position never runs ahead of the store.
func (s *Store) SetImportPosition(ctx context.Context, stream string, seq uint64) error {
	n, err := u64("stream seq", seq)
	if err != nil {
		return fmt.Errorf("store: set import position: %w", err)
	}
	return s.tx(ctx, "set import position", func(t *Tx) error {
		if _, err := t.ExecContext(ctx, `UPDATE import_position SET stream = ?, stream_seq = ? WHERE id = 1`, stream, n); err != nil {
			return fmt.Errorf("store: set import position: %w", err)
		}
		return nil
	})
}
