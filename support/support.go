package support

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/store"
)

// Reader is what the handler reads from the store. *store.Store implements
// it; every method must be safe for concurrent use.
type Reader interface {
	Intent(ctx context.Context, id string) (reconciled.IntentRecord, error)
	Verdicts(ctx context.Context, id string) ([]reconciled.Verdict, error)
	LatestVerdict(ctx context.Context, id string) (reconciled.Verdict, error)
	ListIntents(ctx context.Context, f store.ListFilter) ([]store.IntentSummary, string, error)
	CountByStatus(ctx context.Context) (map[reconciled.Status]int, error)
	WatchOf(ctx context.Context, id string) (reconciled.Watch, error)
	Canisters(ctx context.Context) ([]string, error)
}

var _ Reader = (*store.Store)(nil)

// Config configures NewHandler.
type Config struct {
	Store Reader
	// Token is the bearer token. TokenFunc, when set, is asked on every
	// request instead, so the token can be rotated without a restart. An
	// empty token disables the API (every call answers 503): an open API
	// would hand every payment's history to anyone on the network.
	Token     []byte
	TokenFunc func() []byte
	// Tokens, when set, is asked on every request instead of Token and
	// TokenFunc and may return more than one valid token (a TokenFile in
	// the overlap after a rotation).
	Tokens func() [][]byte
	// Now is the clock of the wrong-token log's rate limit; nil: time.Now.
	Now func() time.Time
	// Ledgers names a ledger's decimals and symbol, for display only.
	// Optional; amounts are shown in raw units when it says nothing.
	Ledgers func(canister string) (decimals uint8, symbol string, ok bool)
	// Logger logs server-side failures; nil logs nothing. The token and
	// the Authorization header are never logged.
	Logger *zap.Logger
	// ExplorerBlockURL and ExplorerAccountURL are a block explorer's URL
	// templates for the detail view's links; empty: no links. Placeholders:
	// {ledger}, {block}; {account} (ICRC-1 text) and {account_id} (the ICP
	// ledger's hex account id).
	ExplorerBlockURL   string
	ExplorerAccountURL string
	// FollowUpEvery is the daemon's follow-up interval: an open intent due
	// at every round is checked next one interval after its last check.
	// Zero: not told, and such an intent's next check is "at the next
	// round".
	FollowUpEvery time.Duration
}

type handler struct {
	cfg      Config
	log      *zap.Logger
	mux      *http.ServeMux
	wrongLog logLimit
}

// NewHandler returns the handler for /api/v1/ and /ui/. Mount it for both
// prefixes (mux.Handle("/api/v1/", h); mux.Handle("/ui/", h)); it answers
// 404 for anything else.
func NewHandler(cfg Config) http.Handler {
	h := &handler{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	if h.log == nil {
		h.log = zap.NewNop()
	}
	if h.cfg.Now == nil {
		h.cfg.Now = time.Now
	}
	api := func(pattern string, fn func(http.ResponseWriter, *http.Request)) {
		h.mux.Handle(pattern, h.authed(http.HandlerFunc(fn)))
	}
	api("GET /api/v1/intents/{id}", h.getIntent)
	api("GET /api/v1/intents", h.listIntents)
	api("GET /api/v1/counts", h.counts)
	api("GET /api/v1/search", h.search)
	api("GET /api/v1/export", h.export)
	api("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "E_NO_ROUTE", "no such API endpoint: "+r.URL.Path)
	})
	h.mux.Handle("GET /ui/", uiHandler())
	h.mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The method is checked before the token and the route, so a write
	// attempt learns nothing but that nothing here can be written.
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "E_METHOD", "read-only: "+r.Method+" is not allowed")
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *handler) tokens() [][]byte {
	switch {
	case h.cfg.Tokens != nil:
		return h.cfg.Tokens()
	case h.cfg.TokenFunc != nil:
		return [][]byte{h.cfg.TokenFunc()}
	}
	return [][]byte{h.cfg.Token}
}

// authed requires the bearer token. Both sides are hashed before the
// constant-time comparison so that neither the token's bytes nor its length
// show in the timing.
func (h *handler) authed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		var want [][]byte
		for _, tok := range h.tokens() {
			if len(tok) > 0 {
				want = append(want, tok)
			}
		}
		if len(want) == 0 {
			writeError(w, http.StatusServiceUnavailable, "E_NO_TOKEN_CONFIGURED",
				"the support API is disabled: the server has no support token configured")
			return
		}
		got, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="reconciled"`)
			writeError(w, http.StatusUnauthorized, "E_TOKEN_MISSING", "token missing: send Authorization: Bearer <token>")
			return
		}
		// Every valid token is compared, without stopping at a match.
		a, match := sha256.Sum256([]byte(got)), 0
		for _, tok := range want {
			b := sha256.Sum256(tok)
			match |= subtle.ConstantTimeCompare(a[:], b[:])
		}
		if match != 1 {
			// Who tried, never what: a near-miss token in a log is a leak.
			// One line per period at most, counting the requests it
			// stands for.
			if ok, n := h.wrongLog.allow(h.cfg.Now(), wrongTokenLogEvery); ok {
				h.log.Warn("support: wrong token", zap.String("remote", r.RemoteAddr), zap.String("path", r.URL.Path),
					zap.Int("count", n), zap.Duration("period", wrongTokenLogEvery))
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="reconciled", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, "E_TOKEN_WRONG", "token wrong")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bearer(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// ErrorBody is the JSON of every error reply: {"error":{"code","message"}}.
type ErrorBody struct {
	Error APIError `json:"error"`
}

// APIError is an error reply's code (E_…) and message.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, ErrorBody{Error: APIError{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own reply types reach here; they always encode.
		http.Error(w, `{"error":{"code":"E_INTERNAL","message":"encode reply"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// internal answers a store failure. The details go to the log, not to the
// client: they can name files and SQL.
func (h *handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Error("support: request failed", zap.String("path", r.URL.Path), zap.Error(err))
	writeError(w, http.StatusInternalServerError, "E_INTERNAL", "internal error; see the server log")
}
