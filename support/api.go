package support

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/store"
)

// badParam is a 400 with its code.
type badParam struct{ code, msg string }

func (e *badParam) Error() string { return e.msg }

func bad(code, format string, args ...any) error {
	return &badParam{code: code, msg: fmt.Sprintf(format, args...)}
}

func writeBad(w http.ResponseWriter, err error) {
	var b *badParam
	if errors.As(err, &b) {
		writeError(w, http.StatusBadRequest, b.code, b.msg)
		return
	}
	writeError(w, http.StatusBadRequest, "E_BAD_REQUEST", err.Error())
}

// query checks that only known parameters were given, each at most once:
// a misspelt filter must fail loudly rather than silently list everything.
func query(r *http.Request, known ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, bad("E_BAD_QUERY", "malformed query string: %v", err)
	}
	for k, vs := range q {
		ok := false
		for _, n := range known {
			ok = ok || k == n
		}
		if !ok {
			return nil, bad("E_UNKNOWN_PARAM", "unknown parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
		if len(vs) > 1 {
			return nil, bad("E_REPEATED_PARAM", "parameter %q given %d times", k, len(vs))
		}
	}
	return q, nil
}

func (h *handler) getIntent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := query(r); err != nil {
		writeBad(w, err)
		return
	}
	if !reconciled.ValidIntentID(id) {
		writeError(w, http.StatusBadRequest, "E_BAD_INTENT_ID", fmt.Sprintf("intent id %q is not [A-Za-z0-9_-]{1,128}", id))
		return
	}
	d, found, err := h.loadDetail(r, id)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, "E_NOT_FOUND", "no intent "+id)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (h *handler) loadDetail(r *http.Request, id string) (Detail, bool, error) {
	ctx := r.Context()
	var recp *reconciled.IntentRecord
	rec, err := h.cfg.Store.Intent(ctx, id)
	switch {
	case err == nil:
		recp = &rec
	case !errors.Is(err, store.ErrNotFound):
		return Detail{}, false, err
	}
	vs, err := h.cfg.Store.Verdicts(ctx, id)
	if err != nil {
		return Detail{}, false, err
	}
	if recp == nil && len(vs) == 0 {
		return Detail{}, false, nil
	}
	item := IntentItem{IntentID: id}
	if recp != nil {
		item = IntentItem{
			IntentID: id, CanisterID: rec.CanisterID, Caller: rec.Caller, Method: rec.Method,
			FirstSeen: rec.FirstSeen, HasBody: true, Ledger: h.ledger(rec.CanisterID),
		}
	}
	var watch *WatchView
	switch w, err := h.cfg.Store.WatchOf(ctx, id); {
	case err == nil:
		var latest *reconciled.Verdict
		if len(vs) > 0 {
			latest = &vs[len(vs)-1]
		}
		watch = h.watchView(w.Attempts, w.NextCheck, w.CheckedAt, latest, time.Now())
	case !errors.Is(err, store.ErrNotFound):
		return Detail{}, false, err
	}
	d := h.detail(recp, item, vs, watch)
	if len(vs) > 0 {
		t := vs[len(vs)-1].DecidedAt
		d.DecidedAt = &t
		d.UpdatedAt = vs[len(vs)-1].DecidedAt
	} else {
		d.UpdatedAt = d.FirstSeen
	}
	return d, true, nil
}

// listKnown are the parameters of GET /api/v1/intents.
var listKnown = []string{"status", "canister", "caller", "since", "until", "from", "to", "open", "order", "sort", "cursor", "limit"}

// ParseStatuses reads a comma-separated status list; "none" selects intents
// without a verdict.
func ParseStatuses(s string) ([]reconciled.Status, error) {
	var out []reconciled.Status
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		st := reconciled.Status(p)
		switch {
		case p == "none":
			st = ""
		case !st.Valid():
			return nil, bad("E_BAD_STATUS", "status %q is not one of found, absent, not_yet, unreadable, invalid, none", p)
		}
		out = append(out, st)
	}
	return out, nil
}

// ParseSince reads an RFC 3339 time or a duration back from now ("24h").
func ParseSince(s string, now time.Time) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d, derr := time.ParseDuration(s)
		if derr != nil || d < 0 {
			return time.Time{}, bad("E_BAD_SINCE", "since %q is neither an RFC 3339 time nor a positive duration like 24h", s)
		}
		t = now.Add(-d)
	}
	// The store keeps times as int64 Unix nanoseconds.
	if t.Year() < 1678 || t.Year() > 2261 {
		return time.Time{}, bad("E_BAD_SINCE", "since %q is outside 1678..2261", s)
	}
	return t, nil
}

// ParseTime reads an RFC 3339 time, or one without a zone or seconds
// ("2026-11-30T07:05", as a browser's datetime-local field gives it), which
// is taken as UTC.
func ParseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil || layout != time.RFC3339Nano && func() bool {
			t, err = time.Parse(layout+"Z", s)
			return err == nil
		}() {
			if t.Year() < 1678 || t.Year() > 2261 {
				return time.Time{}, fmt.Errorf("outside 1678..2261")
			}
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not an RFC 3339 time like 2026-11-30T07:05:00Z")
}

func parseFilter(q url.Values, now time.Time) (store.ListFilter, error) {
	var f store.ListFilter
	if s := q.Get("status"); q.Has("status") {
		st, err := ParseStatuses(s)
		if err != nil {
			return f, err
		}
		f.Status = st
	}
	if s := q.Get("canister"); s != "" {
		if _, err := icrc3.ParsePrincipal(s); err != nil {
			return f, bad("E_BAD_CANISTER", "canister %q is not a principal: %v", s, err)
		}
		f.Canister = s
	}
	if s := q.Get("caller"); s != "" {
		if _, err := icrc3.ParsePrincipal(s); err != nil {
			return f, bad("E_BAD_ACCOUNT", "caller %q is not a principal: %v", s, err)
		}
		f.Caller = s
	}
	if s := q.Get("since"); s != "" {
		t, err := ParseSince(s, now)
		if err != nil {
			return f, err
		}
		f.Since = t
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"until", &f.Until}, {"from", &f.StampFrom}, {"to", &f.StampTo}} {
		if s := q.Get(p.name); s != "" {
			t, err := ParseTime(s)
			if err != nil {
				return f, bad("E_BAD_TIME", "%s %q: %v", p.name, s, err)
			}
			*p.dst = t
		}
	}
	switch q.Get("sort") {
	case "", "first_seen":
	case "decided":
		f.ByDecided = true
	default:
		return f, bad("E_BAD_SORT", "sort %q is not first_seen or decided", q.Get("sort"))
	}
	if q.Has("open") {
		switch q.Get("open") {
		case "", "1", "true", "yes":
			f.Open = true
		case "0", "false", "no":
		default:
			return f, bad("E_BAD_OPEN", "open %q is not a boolean", q.Get("open"))
		}
	}
	switch q.Get("order") {
	case "", "oldest":
	case "newest":
		f.Newest = true
	default:
		return f, bad("E_BAD_ORDER", "order %q is not oldest or newest", q.Get("order"))
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return f, bad("E_BAD_LIMIT", "limit %q is not an integer in 1..1000", s)
		}
		f.Limit = n
	}
	f.Cursor = q.Get("cursor")
	return f, nil
}

func (h *handler) listIntents(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, listKnown...)
	if err != nil {
		writeBad(w, err)
		return
	}
	f, err := parseFilter(q, time.Now())
	if err != nil {
		writeBad(w, err)
		return
	}
	rows, next, err := h.cfg.Store.ListIntents(r.Context(), f)
	if err != nil {
		h.listFailed(w, r, f, err)
		return
	}
	rep := ListReply{Intents: make([]IntentItem, len(rows)), NextCursor: next}
	for i, s := range rows {
		rep.Intents[i] = h.item(s)
	}
	writeJSON(w, http.StatusOK, rep)
}

func (h *handler) counts(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeBad(w, err)
		return
	}
	m, err := h.cfg.Store.CountByStatus(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	rep := CountsReply{Counts: map[string]int{"none": 0}}
	for _, st := range []reconciled.Status{reconciled.StatusFound, reconciled.StatusAbsent,
		reconciled.StatusNotYet, reconciled.StatusUnreadable, reconciled.StatusInvalid} {
		rep.Counts[string(st)] = 0
	}
	for st, n := range m {
		key := string(st)
		if st == "" {
			key = "none"
		}
		rep.Counts[key] += n
		rep.Total += n
		if !st.Final() {
			rep.Open += n
		}
	}
	writeJSON(w, http.StatusOK, rep)
}
