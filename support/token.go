package support

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// MinTokenBytes is the shortest support token accepted: 32 bytes, as
// `openssl rand -hex 16` makes, cannot be guessed over the network.
const MinTokenBytes = 32

// ExamplePlaceholder is the token of deploy/kubernetes/secret.example.yaml;
// a Secret applied from it unchanged must not open the API.
const ExamplePlaceholder = "replace-with-a-long-random-token"

// CheckToken refuses a token that is too short or the example's
// placeholder. The token itself is never part of the error.
func CheckToken(tok string) error {
	switch {
	case tok == ExamplePlaceholder:
		return errors.New("the support token is the example Secret's placeholder: set a random one (openssl rand -hex 32)")
	case len(tok) < MinTokenBytes:
		return fmt.Errorf("the support token has %d bytes; it needs at least %d bytes (openssl rand -hex 32)", len(tok), MinTokenBytes)
	}
	return nil
}

// tokenRecheck is how often a TokenFile looks at its file again.
const tokenRecheck = time.Second

// TokenFile is a support token read from a file and read again when the
// file changes (a rotated Kubernetes Secret), so that the token can be
// rotated without a restart. After a change the previous token stays
// valid for the overlap, so that clients can switch over. A file whose
// new content is not a valid token (CheckToken) is ignored, with a
// warning, and the token before it stays.
type TokenFile struct {
	path    string
	overlap time.Duration
	log     *zap.Logger
	now     func() time.Time

	mu        sync.Mutex
	checked   time.Time // last look at the file
	cur, prev []byte
	refused   []byte // the file's content last refused
	prevUntil time.Time
}

// NewTokenFile reads path, which must hold a valid token. log (nil: none)
// receives rotations and refused contents; now (nil: time.Now) is the
// clock.
func NewTokenFile(path string, overlap time.Duration, log *zap.Logger, now func() time.Time) (*TokenFile, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if now == nil {
		now = time.Now
	}
	f := &TokenFile{path: path, overlap: overlap, log: log, now: now}
	tok, err := f.read()
	if err != nil {
		return nil, err
	}
	f.cur, f.checked = tok, now()
	return f, nil
}

func (f *TokenFile) read() ([]byte, error) {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("support token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if err := CheckToken(tok); err != nil {
		return nil, fmt.Errorf("support token file %s: %w", f.path, err)
	}
	return []byte(tok), nil
}

// Tokens returns the tokens valid now: the file's, and in the overlap
// after a rotation the one before it. The file is looked at at most once
// a second.
func (f *TokenFile) Tokens() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if now.Sub(f.checked) >= tokenRecheck {
		f.checked = now
		f.reload(now)
	}
	if f.prev != nil && now.Before(f.prevUntil) {
		return [][]byte{f.cur, f.prev}
	}
	f.prev = nil
	return [][]byte{f.cur}
}

func (f *TokenFile) reload(now time.Time) {
	// The file is a few bytes: read it whole rather than trust a
	// modification time that may be coarser than a rotation.
	b, err := os.ReadFile(f.path)
	if err != nil {
		f.log.Warn("support token file unreadable; keeping the current token", zap.String("path", f.path), zap.Error(err))
		return
	}
	tok := []byte(strings.TrimSpace(string(b)))
	if bytes.Equal(tok, f.cur) {
		return
	}
	if bytes.Equal(tok, f.refused) {
		return // warned already
	}
	if err := CheckToken(string(tok)); err != nil {
		f.refused = tok
		f.log.Warn("support token file changed to an unusable token; keeping the current one", zap.String("path", f.path), zap.Error(err))
		return
	}
	f.refused = nil
	f.prev, f.prevUntil, f.cur = f.cur, now.Add(f.overlap), tok
	f.log.Info("support token rotated; the previous one stays valid for the overlap", zap.Duration("overlap", f.overlap))
}

// wrongTokenLogEvery is the shortest time between two warnings about wrong
// tokens: a client retrying a stale token, or someone guessing, must not
// flood the log.
const wrongTokenLogEvery = 10 * time.Second

// logLimit lets one line through per period and counts the rest.
type logLimit struct {
	mu     sync.Mutex
	last   time.Time
	logged bool
	missed int
}

// allow reports whether to log now, and how many events the line stands
// for (this one and those not logged since the last line).
func (l *logLimit) allow(now time.Time, every time.Duration) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged && now.Sub(l.last) < every {
		l.missed++
		return false, 0
	}
	n := l.missed + 1
	l.last, l.logged, l.missed = now, true, 0
	return true, n
}
