package daemon

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The HTTP server bounds slow and idle clients, and takes the support
// token from its file.
func TestHTTPServerTimeoutsAndTokenFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	tok := strings.Repeat("t", 40)
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(ctx, Config{Instance: "t", DataDir: filepath.Join(dir, "data"), HTTPAddr: "127.0.0.1:0", SupportTokenFile: tokFile}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(ctx)
	s := d.http
	if s.ReadHeaderTimeout <= 0 || s.IdleTimeout <= 0 || s.WriteTimeout <= 0 || s.ReadTimeout <= 0 {
		t.Errorf("timeouts: read header %s, read %s, write %s, idle %s; want all set",
			s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout)
	}
	for token, want := range map[string]int{tok: http.StatusOK, strings.Repeat("u", 40): http.StatusUnauthorized} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.HTTPAddr()+"/api/v1/counts", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("token %.4s…: status %d, want %d", token, resp.StatusCode, want)
		}
	}
}
