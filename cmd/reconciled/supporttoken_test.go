package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A support token that can be guessed, or the example Secret's placeholder
// left in place, is refused at start.
func TestServeRefusesWeakSupportToken(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, token, want string }{
		{"one byte", "x", "at least 32 bytes"},
		{"31 bytes", strings.Repeat("a", 31), "at least 32 bytes"},
		{"placeholder", "replace-with-a-long-random-token", "placeholder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.WriteFile(f, []byte(c.token+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"--support-token", c.token}, {"--support-token-file", f}} {
				_, err := parseServeConfig(append(args, "--data", dir), func(string) string { return "" }, io.Discard)
				if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: err %v, want a usage error saying %q", args[0], err, c.want)
				}
			}
		})
	}
	good := strings.Repeat("k", 32)
	c, err := parseServeConfig([]string{"--support-token", good, "--data", dir}, func(string) string { return "" }, io.Discard)
	if err != nil || c.SupportToken != good {
		t.Fatalf("a 32-byte token: %v", err)
	}
}
