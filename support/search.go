package support

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/store"
)

// searchKnown are the parameters of GET /api/v1/search and /api/v1/export.
var searchKnown = append([]string{"q", "format"}, listKnown...)

// search answers GET /api/v1/search?q=: what a customer knows (an amount in
// tokens, a memo as text or hex, an account in any of its forms, a block
// index, an intent id) becomes store keys, and every reading is looked up at
// once; the filters of /api/v1/intents narrow it, and from/to (the stamp's
// time range) may stand alone. Every lookup is an index probe, and the reply
// pages with next_cursor like a listing, so nothing is cut silently.
func (h *handler) search(w http.ResponseWriter, r *http.Request) {
	f, q, readings, err := h.searchFilter(r)
	if err != nil {
		writeBad(w, err)
		return
	}
	rows, next, err := h.cfg.Store.ListIntents(r.Context(), f)
	if err != nil {
		h.listFailed(w, r, f, err)
		return
	}
	rep := SearchReply{Query: q, Hits: make([]SearchHit, len(rows)), Readings: readings, NextCursor: next, Truncated: next != ""}
	for i, s := range rows {
		m := s.Matches
		if m == nil {
			m = []string{}
		}
		rep.Hits[i] = SearchHit{Matches: m, Intent: h.item(s)}
	}
	writeJSON(w, http.StatusOK, rep)
}

func (h *handler) searchFilter(r *http.Request) (store.ListFilter, string, []string, error) {
	qs, err := query(r, searchKnown...)
	if err != nil {
		return store.ListFilter{}, "", nil, err
	}
	if !qs.Has("order") {
		qs.Set("order", "newest")
	}
	f, err := parseFilter(qs, time.Now())
	if err != nil {
		return f, "", nil, err
	}
	q := strings.TrimSpace(qs.Get("q"))
	if q == "" {
		if f.StampFrom.IsZero() && f.StampTo.IsZero() && r.URL.Path == "/api/v1/search" {
			return f, q, nil, bad("E_BAD_QUERY", "q is empty: give an intent id, an account, an amount, a memo or a block index, or a time range (from, to)")
		}
		return f, q, []string{}, nil
	}
	readings, err := h.readQuery(r.Context(), q, &f)
	if err != nil {
		return f, q, nil, err
	}
	if len(readings) == 0 {
		return f, q, nil, bad("E_BAD_QUERY", "%q is not an intent id, an account, an account id, an amount, a memo or a block index", q)
	}
	return f, q, readings, nil
}

var (
	hexRE       = regexp.MustCompile(`^(?:[0-9a-fA-F]{2})+$`)
	principalRE = regexp.MustCompile(`^[a-z2-7-]{5,63}$`)
	tokensRE    = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:\s+([A-Za-z][A-Za-z0-9]{0,15}))?$`)
)

// readQuery adds a key for every reading of q to f and names the readings.
func (h *handler) readQuery(ctx context.Context, q string, f *store.ListFilter) ([]string, error) {
	var readings []string
	add := func(what string, ks ...store.Key) {
		f.Keys = append(f.Keys, ks...)
		readings = append(readings, what)
	}
	if reconciled.ValidIntentID(q) {
		f.IDPrefix = q
		readings = append(readings, "intent id")
	}
	if a, err := icrc3.ParseAccount(q); err == nil {
		if a.IsDefaultSubaccount() {
			add("account owner", store.OwnerKey(a.Owner.Encode(), false))
		} else {
			add("account", store.AccountKey(a))
		}
	} else if p, ok := principalBeginning(q); ok {
		// Part of a principal, as a customer reads it off a wallet, with
		// or without its dashes.
		add("principal beginning", store.OwnerKey(p, true))
	}
	if hexRE.MatchString(q) {
		if len(q) == 64 {
			add("ICP account id", store.AccountIDKey(q, false))
		} else if len(q) >= 8 && len(q) < 64 {
			add("ICP account id beginning", store.AccountIDKey(q, true))
		}
		add("memo (hex)", store.MemoKey(q, false))
	}
	if len(q) >= 3 {
		// A memo as text, in any case; a beginning of it is as good, since
		// the hex of a prefix is a prefix of the hex.
		add("memo (text)", store.MemoKey(hex.EncodeToString([]byte(q)), true), store.MemoFoldKey(q))
	}
	if n, err := strconv.ParseUint(q, 10, 63); err == nil {
		add("block index", store.BlockKey(n))
	}
	for _, a := range amountReadings(q) {
		m := tokensRE.FindStringSubmatch(a)
		if m == nil {
			continue
		}
		ks, err := h.amountKeys(ctx, m[1], m[2])
		if err != nil {
			return nil, err
		}
		if len(ks) > 0 {
			what := "amount " + m[1]
			if m[2] != "" {
				what += " " + m[2]
			}
			add(what, ks...)
		}
	}
	if n, err := strconv.ParseUint(q, 10, 64); err == nil && n > 0 {
		// An amount in the ledger's base units, as an explorer or a
		// statement shows it.
		ks, err := h.unitKeys(ctx, strconv.FormatUint(n, 10))
		if err != nil {
			return nil, err
		}
		if len(ks) > 0 {
			add("amount in base units "+q, ks...)
		}
	}
	return readings, nil
}

var (
	decimalCommaRE = regexp.MustCompile(`^([0-9]+),([0-9]+)(\s+[A-Za-z][A-Za-z0-9]{0,15})?$`)
	groupedRE      = regexp.MustCompile(`^([0-9]{1,3}(?:,[0-9]{3})+)((?:\.[0-9]+)?(?:\s+[A-Za-z][A-Za-z0-9]{0,15})?)$`)
)

// amountReadings are the ways q may be an amount in tokens: as typed, with
// a decimal comma (2,5 for 2.5), or with thousands separated by commas
// (1,000 or 1,000.5); a comma is read both ways where both fit.
func amountReadings(q string) []string {
	out := []string{q}
	if m := decimalCommaRE.FindStringSubmatch(q); m != nil {
		out = append(out, m[1]+"."+m[2]+m[3])
	}
	if m := groupedRE.FindStringSubmatch(q); m != nil {
		out = append(out, strings.ReplaceAll(m[1], ",", "")+m[2])
	}
	return out
}

// principalBeginning reads q as the beginning of a principal's text, with
// or without its dashes: a principal is groups of five letters and digits
// joined by dashes, which a customer may leave out ("hczxw", "hczxwabc").
func principalBeginning(q string) (string, bool) {
	bare := strings.ReplaceAll(strings.ToLower(q), "-", "")
	if len(bare) < 5 || !principalRE.MatchString(bare) {
		return "", false
	}
	if strings.Contains(q, "-") {
		// Dashes where the customer put them must be where a principal
		// has them.
		lq := strings.ToLower(q)
		if !principalRE.MatchString(lq) || regroup(bare) != strings.TrimSuffix(lq, "-") {
			return "", false
		}
	}
	return regroup(bare), true
}

// regroup puts a dash after every five characters of bare.
func regroup(bare string) string {
	var b strings.Builder
	for i := 0; i < len(bare); i += 5 {
		if i > 0 {
			b.WriteByte('-')
		}
		b.WriteString(bare[i:min(i+5, len(bare))])
	}
	return b.String()
}

// unitKeys are the keys of an amount in raw units on every stored ledger
// whose decimals are known (on the others amountKeys takes an integer as
// units already).
func (h *handler) unitKeys(ctx context.Context, units string) ([]store.Key, error) {
	cans, err := h.cfg.Store.Canisters(ctx)
	if err != nil {
		return nil, err
	}
	var ks []store.Key
	for _, c := range cans {
		if h.ledger(c) != nil {
			ks = append(ks, store.AmountKey(c, units))
		}
	}
	return ks, nil
}

// amountKeys are the keys of an amount in tokens on every stored ledger
// whose decimals are known (and whose symbol is sym, when given); on a
// ledger of unknown decimals an integer is taken as raw units.
func (h *handler) amountKeys(ctx context.Context, tokens, sym string) ([]store.Key, error) {
	cans, err := h.cfg.Store.Canisters(ctx)
	if err != nil {
		return nil, err
	}
	var ks []store.Key
	for _, c := range cans {
		l := h.ledger(c)
		switch {
		case l == nil && sym == "" && !strings.Contains(tokens, "."):
			ks = append(ks, store.AmountKey(c, strings.TrimLeft(tokens, "0")))
		case l != nil && (sym == "" || strings.EqualFold(sym, l.Symbol)):
			if u, ok := ParseTokens(tokens, l.Decimals); ok {
				ks = append(ks, store.AmountKey(c, u))
			}
		}
	}
	return ks, nil
}

func (h *handler) listFailed(w http.ResponseWriter, r *http.Request, f store.ListFilter, err error) {
	// Every other parameter was checked before, so an invalid-record
	// refusal here is the cursor's (malformed, or taken in another order).
	if f.Cursor != "" && errors.Is(err, store.ErrInvalid) {
		writeError(w, http.StatusBadRequest, "E_BAD_CURSOR", "cursor is not one this listing gave out")
		return
	}
	h.internal(w, r, err)
}
