package support

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/store"
)

// search answers GET /api/v1/search?q=. One query may be several things at
// once (a decimal is also a valid intent id; a principal may be a caller, an
// account owner or a canister), so every reading is tried and the hits are
// merged per intent.
//
// Intent ids and callers are indexed lookups. Block indexes and accounts
// inside args are not indexed by the store, so they are found by scanning
// the newest intents up to the scan limit; the reply says when the scan was
// cut short.
func (h *handler) search(w http.ResponseWriter, r *http.Request) {
	qs, err := query(r, "q", "limit")
	if err != nil {
		writeBad(w, err)
		return
	}
	q := strings.TrimSpace(qs.Get("q"))
	if q == "" {
		writeError(w, http.StatusBadRequest, "E_BAD_QUERY", "q is empty: give an intent id, an account or a block index")
		return
	}
	limit := 100
	if s := qs.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "E_BAD_LIMIT", "limit "+strconv.Quote(s)+" is not an integer in 1..1000")
			return
		}
		limit = n
	}
	s := &searcher{h: h, ctx: r.Context(), hits: map[string]*SearchHit{}, limit: limit}

	idOK := store.ValidIntentID(q)
	if idOK {
		if err := s.byID(q); err != nil {
			h.internal(w, r, err)
			return
		}
	}
	var (
		blockIdx *uint64
		acct     *icrc3.Account
	)
	if n, err := strconv.ParseUint(q, 10, 64); err == nil {
		blockIdx = &n
	}
	if a, err := icrc3.ParseAccount(q); err == nil {
		acct = &a
	}
	if !idOK && blockIdx == nil && acct == nil {
		writeError(w, http.StatusBadRequest, "E_BAD_ACCOUNT",
			"q "+strconv.Quote(q)+" is neither an intent id, an ICRC-1 account nor a block index")
		return
	}
	if acct != nil && acct.Subaccount == nil {
		// A bare principal: indexed lookups first.
		if err := s.byCaller(q); err != nil {
			h.internal(w, r, err)
			return
		}
	}
	if blockIdx != nil || acct != nil {
		if err := s.scan(blockIdx, acct, q); err != nil {
			h.internal(w, r, err)
			return
		}
	}
	rep := SearchReply{Query: q, Hits: []SearchHit{}, Scanned: s.scanned, Truncated: s.truncated}
	for _, id := range s.order {
		if len(rep.Hits) == limit {
			rep.Truncated = true
			break
		}
		rep.Hits = append(rep.Hits, *s.hits[id])
	}
	writeJSON(w, http.StatusOK, rep)
}

type searcher struct {
	h         *handler
	ctx       context.Context
	hits      map[string]*SearchHit
	order     []string
	limit     int
	scanned   int
	truncated bool
}

// full reports that more intents matched than the reply may hold; looking
// further would only find hits that are cut anyway.
func (s *searcher) full() bool {
	if len(s.order) > s.limit {
		s.truncated = true
		return true
	}
	return false
}

func (s *searcher) add(item IntentItem, why string) {
	hit, ok := s.hits[item.IntentID]
	if !ok {
		hit = &SearchHit{Intent: item}
		s.hits[item.IntentID] = hit
		s.order = append(s.order, item.IntentID)
	}
	for _, m := range hit.Matches {
		if m == why {
			return
		}
	}
	hit.Matches = append(hit.Matches, why)
}

func (s *searcher) byID(id string) error {
	rec, err := s.h.cfg.Store.Intent(s.ctx, id)
	switch {
	case err == nil:
		item := IntentItem{IntentID: id, CanisterID: rec.CanisterID, Caller: rec.Caller, Method: rec.Method,
			FirstSeen: rec.FirstSeen, HasBody: true, UpdatedAt: rec.FirstSeen, Ledger: s.h.ledger(rec.CanisterID)}
		s.withLatest(&item)
		s.add(item, "intent_id")
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	// Known only from another sidecar's verdicts?
	v, err := s.h.cfg.Store.LatestVerdict(s.ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	s.add(IntentItem{IntentID: id, Status: v.Status, Final: v.Final, LatestSeq: v.Seq, UpdatedAt: v.DecidedAt}, "intent_id")
	return nil
}

func (s *searcher) withLatest(item *IntentItem) {
	if v, err := s.h.cfg.Store.LatestVerdict(s.ctx, item.IntentID); err == nil {
		item.Status, item.Final, item.LatestSeq, item.UpdatedAt = v.Status, v.Final, v.Seq, v.DecidedAt
	}
}

func (s *searcher) byCaller(p string) error {
	f := store.ListFilter{Caller: p, Newest: true, Limit: 1000}
	for range 100 {
		rows, next, err := s.h.cfg.Store.ListIntents(s.ctx, f)
		if err != nil {
			return err
		}
		for _, r := range rows {
			s.add(s.h.item(r), "caller")
		}
		if next == "" || s.full() {
			return nil
		}
		f.Cursor = next
	}
	return nil
}

// scan walks the newest intents, matching the block index against each
// latest verdict's block and near misses, and the account against the
// canister, the caller side and every account in the args.
func (s *searcher) scan(idx *uint64, acct *icrc3.Account, text string) error {
	f := store.ListFilter{Newest: true, Limit: 500}
	for {
		rows, next, err := s.h.cfg.Store.ListIntents(s.ctx, f)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if s.scanned == s.h.scan {
				s.truncated = true
				return nil
			}
			if s.full() {
				return nil
			}
			s.scanned++
			item := s.h.item(r)
			if idx != nil && r.Status != "" {
				v, err := s.h.cfg.Store.LatestVerdict(s.ctx, r.IntentID)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				if err == nil {
					if v.Block != nil && uint64(v.Block.Index) == *idx {
						s.add(item, "block")
					}
					for _, nm := range v.NearMisses {
						if uint64(nm.Index) == *idx {
							s.add(item, "near_miss")
						}
					}
				}
			}
			if acct != nil && r.HasBody {
				if acct.Subaccount == nil && r.CanisterID == text {
					s.add(item, "canister")
				}
				rec, err := s.h.cfg.Store.Intent(s.ctx, r.IntentID)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				if err == nil && bodyHasAccount(rec.Body, *acct, text) {
					s.add(item, "account")
				}
			}
		}
		if next == "" {
			return nil
		}
		f.Cursor = next
	}
}

// bodyHasAccount reports whether an intent names the account: with a
// subaccount, by ICRC-1 equality; a bare principal matches any account it
// owns. A body the matcher refuses (an invalid intent) is searched as text,
// so a support person still finds the intent that was refused.
func bodyHasAccount(body []byte, want icrc3.Account, text string) bool {
	// Accounts and callers are spelt canonically in a readable intent, so
	// every account of this owner contains the owner's text. Checking that
	// first skips parsing the bodies that cannot match, unless the body
	// escapes characters in its strings and so could hide the text.
	if !bytes.Contains(body, []byte(want.Owner.Encode())) && !bytes.Contains(body, []byte(`\u`)) {
		return false
	}
	in, err := matcher.ParseIntent(body)
	if err != nil {
		return strings.Contains(string(body), `"`+text+`"`)
	}
	accts := []icrc3.Account{in.CallerAccount()}
	for _, a := range []*icrc3.Account{in.Args.To, in.Args.From, in.Args.Spender} {
		if a != nil {
			accts = append(accts, *a)
		}
	}
	for _, a := range accts {
		if want.Subaccount == nil && a.Owner.Equal(want.Owner) || want.Subaccount != nil && a.Equal(want) {
			return true
		}
	}
	return false
}
