package support

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/reconciled/reconciled/support/supporttest"
)

func status(t *testing.T, h http.Handler, token string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/counts", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// A burst of wrong tokens is one warning with a count, not one a request.
func TestWrongTokenLogIsRateLimited(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	st := supporttest.Open(t)
	now := time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := NewHandler(Config{Store: st, Token: []byte(testToken), Logger: zap.New(core), Now: clock})
	for range 500 {
		if c := status(t, h, "wrong-token"); c != http.StatusUnauthorized {
			t.Fatalf("status %d", c)
		}
	}
	if n := logs.FilterMessageSnippet("wrong token").Len(); n != 1 {
		t.Fatalf("%d warnings for 500 wrong tokens in one instant, want 1", n)
	}
	mu.Lock()
	now = now.Add(wrongTokenLogEvery)
	mu.Unlock()
	status(t, h, "wrong-token")
	got := logs.FilterMessageSnippet("wrong token").All()
	if len(got) != 2 {
		t.Fatalf("%d warnings after the period, want 2", len(got))
	}
	if n, ok := got[1].ContextMap()["count"]; !ok || n != int64(500) {
		t.Errorf("second warning's count %v, want 500 (the 499 not logged and this one)", got[1].ContextMap())
	}
}

// A token file rotated in place is read again; the old token stays valid
// for the overlap, then only the new one is.
func TestTokenFileRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	oldTok, newTok := strings.Repeat("o", 40), strings.Repeat("n", 40)
	if err := os.WriteFile(path, []byte(oldTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	tf, err := NewTokenFile(path, time.Minute, nil, clock)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(Config{Store: supporttest.Open(t), Tokens: tf.Tokens})
	if status(t, h, oldTok) != http.StatusOK || status(t, h, newTok) != http.StatusUnauthorized {
		t.Fatal("before rotation: want the old token only")
	}
	if err := os.WriteFile(path, []byte(newTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	advance(2 * time.Second) // past the re-read interval
	if status(t, h, newTok) != http.StatusOK || status(t, h, oldTok) != http.StatusOK {
		t.Fatal("in the overlap: want both tokens")
	}
	advance(time.Minute)
	if status(t, h, newTok) != http.StatusOK || status(t, h, oldTok) != http.StatusUnauthorized {
		t.Fatal("after the overlap: want the new token only")
	}
	// A weak or empty rotation is refused; the valid token stays.
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	advance(2 * time.Second)
	if status(t, h, newTok) != http.StatusOK || status(t, h, "short") != http.StatusUnauthorized {
		t.Fatal("a weak token in the file replaced a valid one")
	}
}

func TestCheckToken(t *testing.T) {
	for tok, ok := range map[string]bool{"x": false, strings.Repeat("a", 31): false, strings.Repeat("a", 32): true,
		ExamplePlaceholder: false} {
		if err := CheckToken(tok); (err == nil) != ok {
			t.Errorf("CheckToken(%q) = %v", tok, err)
		}
	}
}
