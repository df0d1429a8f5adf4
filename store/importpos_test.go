package store

import (
	"context"
	"path/filepath"
	"testing"
)

// A store's identity is made with it and kept across opens and copies; its
// position is known from creation, recorded by SetImportPosition, and
// unknown in a store that recorded none.
func TestImportPosition(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "recon.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.ImportPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.StoreID) != 32 || !p.Known || p.Seq != 0 || p.Stream != "" {
		t.Fatalf("a new store's position: %+v", p)
	}
	if err := s.SetImportPosition(ctx, "stream-a", 1234); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	q, err := s.ImportPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ImportPosition{StoreID: p.StoreID, Stream: "stream-a", Seq: 1234, Known: true}); q != want {
		t.Fatalf("after reopening: %+v, want %+v", q, want)
	}
	// As a store migrated from a release that recorded no position.
	if _, err := s.w.ExecContext(ctx, `UPDATE import_position SET stream_seq = NULL`); err != nil {
		t.Fatal(err)
	}
	if q, err = s.ImportPosition(ctx); err != nil || q.Known {
		t.Fatalf("a store without a recorded position: %+v %v", q, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, filepath.Join(t.TempDir(), "recon.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if o, err := other.ImportPosition(ctx); err != nil || o.StoreID == p.StoreID {
		t.Fatalf("another store's identity %+v %v, the first's %s", o, err, p.StoreID)
	}
}
