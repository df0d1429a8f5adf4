package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

const corruptMsg = "is corrupt: move it away; the daemon rebuilds it from the stream"

// filledStore builds a store of 20 intents and their verdicts, closes it
// (which checkpoints the WAL into the file) and returns its path, its page
// size and the root page of each table and index.
func filledStore(t *testing.T) (path string, pageSize int, roots map[string]int) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "recon.db")
	s, err := OpenWith(ctx, path, Options{Now: newClock().Now, ReadConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	fillSome(t, s)
	var rows []struct {
		Name string `db:"name"`
		Root int    `db:"rootpage"`
	}
	if err := s.r.SelectContext(ctx, &rows, `SELECT name, rootpage FROM sqlite_schema WHERE rootpage > 0`); err != nil {
		t.Fatal(err)
	}
	roots = map[string]int{}
	for _, r := range rows {
		roots[r.Name] = r.Root
	}
	if err := s.r.GetContext(ctx, &pageSize, `PRAGMA page_size`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the WAL outlived the close (%v): the flips below would miss the pages", err)
	}
	return path, pageSize, roots
}

// flipBytes XORs bytes [from, to) of page (1-based).
func flipBytes(t *testing.T, path string, pageSize, page, from, to int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := (page - 1) * pageSize
	for i := off + from; i < off+to; i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func assertCorruptErr(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want ErrCorrupt", err)
	}
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Path != path {
		t.Fatalf("err %v: want a *CorruptError naming %s", err, path)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "store "+path+" "+corruptMsg) {
		t.Errorf("message %q, want it to start %q", msg, "store "+path+" "+corruptMsg)
	}
	if !utf8.ValidString(msg) || strings.IndexFunc(msg, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		t.Errorf("message %q carries bytes that are not printable text", msg)
	}
}

func TestOpenRefusesCorruptStore(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt func(t *testing.T, path string, pageSize int, roots map[string]int)
	}{
		// Cells of the primary-key index run off the page: reads through
		// it answered "database disk image is malformed" after a start
		// that reported ready.
		{"index page", func(t *testing.T, p string, ps int, roots map[string]int) {
			flipBytes(t, p, ps, roots["intents_by_first_seen"], ps-196, ps)
		}},
		{"index page header", func(t *testing.T, p string, ps int, roots map[string]int) {
			flipBytes(t, p, ps, roots["sqlite_autoindex_intents_1"], 0, 12)
		}},
		{"table page", func(t *testing.T, p string, ps int, roots map[string]int) {
			flipBytes(t, p, ps, roots["intents"], ps-1096, ps)
		}},
		{"truncated", func(t *testing.T, p string, ps int, roots map[string]int) {
			if err := os.Truncate(p, int64(10*ps+100)); err != nil {
				t.Fatal(err)
			}
		}},
		{"header garbage", func(t *testing.T, p string, ps int, roots map[string]int) {
			flipBytes(t, p, ps, 1, 0, 16)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, ps, roots := filledStore(t)
			c.corrupt(t, path, ps, roots)
			s, err := Open(context.Background(), path)
			if err == nil {
				s.Close()
				t.Fatal("a corrupt store opened")
			}
			assertCorruptErr(t, err, path)
		})
	}
}

// A store whose damage Open did not see (the check ran past its bound, or
// the damage came later) is marked corrupt by the first read that meets
// it, and stays so.
func TestReadMarksStoreCorrupt(t *testing.T) {
	ctx := context.Background()
	path, ps, roots := filledStore(t)
	flipBytes(t, path, ps, roots["intents_by_first_seen"], ps-196, ps)
	s, err := OpenWith(ctx, path, Options{ReadConns: 2, CheckTimeout: -1})
	if err != nil {
		t.Fatalf("open unchecked: %v", err)
	}
	defer s.Close()
	if s.Checked() || s.Corrupt() != nil {
		t.Fatalf("checked %v, corrupt %v before any read", s.Checked(), s.Corrupt())
	}
	select {
	case <-s.Corrupted():
		t.Fatal("Corrupted closed before any read")
	default:
	}
	_, _, err = s.ListIntents(ctx, ListFilter{Limit: 100})
	if err == nil {
		t.Fatal("listing over a damaged index succeeded")
	}
	select {
	case <-s.Corrupted():
	default:
		t.Fatalf("read failed with %v, yet Corrupted is open", err)
	}
	assertCorruptErr(t, s.Corrupt(), path)
	if !strings.Contains(s.Corrupt().Error(), "malformed") {
		t.Errorf("Corrupt() %q does not say what SQLite said", s.Corrupt())
	}
}

func TestCheckPastItsBoundOpensUnchecked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "recon.db")
	s, err := OpenWith(context.Background(), path, Options{CheckTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Checked() {
		t.Error("a check bounded to 1ns ran to its end")
	}
	s2 := openTest(t)
	if !s2.Checked() {
		t.Error("a fresh store's check did not run to its end")
	}
}

func TestPrintableEscapesBinary(t *testing.T) {
	got := printable("index \x00\xff\xfe\x1bok\né")
	if want := `index \x00\xff\xfe\x1bok é`; got != want {
		t.Errorf("printable = %q, want %q", got, want)
	}
	if n := len(printable(strings.Repeat("\xff", 1000))); n > 320 {
		t.Errorf("printable of 1000 bytes is %d bytes long", n)
	}
}

func TestMoveAside(t *testing.T) {
	ctx := context.Background()
	path, ps, roots := filledStore(t)
	flipBytes(t, path, ps, roots["intents"], ps-1096, ps)
	if err := os.WriteFile(path+"-shm", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 3, 19, 20, 0, 0, time.UTC)
	to, err := MoveAside(path, at)
	if err != nil {
		t.Fatal(err)
	}
	if want := path + ".corrupt-20261203T192000Z"; to != want {
		t.Errorf("moved to %s, want %s", to, want)
	}
	for _, f := range []string{to, to + "-shm"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there (%v)", f, err)
		}
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open after moving aside: %v", err)
	}
	defer s.Close()
	if n, err := s.CountByStatus(ctx); err != nil || len(n) != 0 {
		t.Errorf("fresh store counts %v %v", n, err)
	}
}
