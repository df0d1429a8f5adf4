package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/store"
)

// serve on a store whose file is damaged exits 65 with one plain message,
// whether the damage is in a page, a truncation or the header.
func TestServeExitsOnCorruptStore(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt func(b []byte, root, pageSize int) []byte
	}{
		{"index page", func(b []byte, root, ps int) []byte {
			for i := root*ps - 196; i < root*ps; i++ {
				b[i] ^= 0x5a
			}
			return b
		}},
		{"truncated", func(b []byte, _, ps int) []byte { return b[:10*ps+100] }},
		{"header garbage", func(b []byte, _, _ int) []byte {
			for i := range 16 {
				b[i] ^= 0x5a
			}
			return b
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "reconciled.db")
			s, err := store.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 40 {
				id := fmt.Sprintf("i%02d", i)
				body := fmt.Sprintf(`{"intent_id":%q,"method":"icrc1_transfer"}`, id)
				if _, err := s.PutIntent(context.Background(), reconciled.IntentRecord{IntentID: id, CanisterID: "ryjl3-tyaaa-aaaaa-aaaba-cai",
					Method: "icrc1_transfer", Body: []byte(body), Hash: sha256.Sum256([]byte(body))}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			var root, ps int
			if err := db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = 'intents_by_first_seen'`).Scan(&root); err != nil {
				t.Fatal(err)
			}
			if err := db.QueryRow(`PRAGMA page_size`).Scan(&ps); err != nil {
				t.Fatal(err)
			}
			db.Close()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, c.corrupt(b, root, ps), 0o600); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			code := run([]string{"serve", "--data", dir, "--http", "127.0.0.1:0", "--instance", "t"}, &bytes.Buffer{}, &stderr)
			if code != 65 {
				t.Errorf("exit %d, want 65; stderr:\n%s", code, stderr.String())
			}
			want := "reconciled serve: store " + path + " is corrupt: move it away; the daemon rebuilds it from the stream"
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
			}
			if i := strings.IndexFunc(stderr.String(), func(r rune) bool { return r != '\n' && !unicode.IsPrint(r) }); i >= 0 {
				t.Errorf("stderr carries unprintable bytes at %d: %q", i, stderr.String())
			}
		})
	}
}
