package support

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// exportColumns are the CSV columns of GET /api/v1/export.
var exportColumns = []string{"intent_id", "status", "final", "method", "ledger", "amount", "amount_units",
	"from", "to", "spender", "memo_text", "memo_hex", "stamp", "first_seen", "decided_at"}

// exportWriteTimeout bounds the writing of one export.
const exportWriteTimeout = 10 * time.Minute

// export answers GET /api/v1/export?format=csv|json with every intent that
// the same parameters give /api/v1/search (q optional), all pages. A store
// failure after the first row aborts the connection, so a client never
// takes a cut file for the whole list.
func (h *handler) export(w http.ResponseWriter, r *http.Request) {
	// An export of every intent may outlast the server's write timeout,
	// which is meant for single answers.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(exportWriteTimeout))
	f, _, _, err := h.searchFilter(r)
	if err != nil {
		writeBad(w, err)
		return
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "csv"
	}
	if format != "csv" && format != "json" {
		writeError(w, http.StatusBadRequest, "E_BAD_FORMAT", "format "+strconv.Quote(format)+" is not csv or json")
		return
	}
	f.Limit = 1000
	rows, next, err := h.cfg.Store.ListIntents(r.Context(), f)
	if err != nil {
		h.listFailed(w, r, f, err)
		return
	}
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Disposition", `attachment; filename="intents.`+format+`"`)
	var cw *csv.Writer
	if format == "csv" {
		hd.Set("Content-Type", "text/csv; charset=utf-8")
		cw = csv.NewWriter(w)
		cw.Write(exportColumns)
	} else {
		hd.Set("Content-Type", "application/json; charset=utf-8")
		w.Write([]byte(`{"intents":[`))
	}
	first := true
	for {
		for _, s := range rows {
			it := h.item(s)
			if cw != nil {
				cw.Write(csvRow(&it))
				continue
			}
			b, err := json.Marshal(it)
			if err != nil {
				panic(http.ErrAbortHandler)
			}
			if !first {
				w.Write([]byte(","))
			}
			first = false
			w.Write(b)
		}
		if next == "" {
			break
		}
		f.Cursor = next
		if rows, next, err = h.cfg.Store.ListIntents(r.Context(), f); err != nil {
			h.internal(nopWriter{}, r, err)
			panic(http.ErrAbortHandler)
		}
	}
	if cw != nil {
		cw.Flush()
		return
	}
	w.Write([]byte("]}\n"))
}

func csvRow(it *IntentItem) []string {
	ts := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	var amount, units, memoText, memoHex, ledger string
	if it.Amount != nil {
		amount, units = it.Amount.Display, it.Amount.Units
	}
	if it.Memo != nil {
		memoText, memoHex = it.Memo.Text, it.Memo.Hex
	}
	ledger = it.CanisterID
	first := ""
	if !it.FirstSeen.IsZero() {
		first = ts(&it.FirstSeen)
	}
	row := []string{it.IntentID, string(it.Status), strconv.FormatBool(it.Final), it.Method, ledger, amount, units,
		it.From, it.To, it.Spender, memoText, memoHex, ts(it.Stamp), first, ts(it.DecidedAt)}
	for i, c := range row {
		row[i] = inert(c)
	}
	return row
}

// inert keeps a spreadsheet from running a cell as a formula: a memo is the
// customer's text, and "=HYPERLINK(…)" in it must stay text.
func inert(c string) string {
	if c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
		return "'" + c
	}
	return c
}

// nopWriter lets internal log a failure after the reply has started.
type nopWriter struct{}

func (nopWriter) Header() http.Header         { return http.Header{} }
func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriter) WriteHeader(int)             {}
