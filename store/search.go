package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
)

// Key is a search key of ListFilter.Keys: an exact term, or with Prefix
// every term that starts with it. Make keys with the *Key functions.
type Key struct {
	Term   string
	Prefix bool
}

// OwnerKey finds every account of a principal; prefix: of every principal
// whose text starts with owner.
func OwnerKey(owner string, prefix bool) Key {
	return Key{Term: "p:" + strings.ToLower(owner), Prefix: prefix}
}

// AccountKey finds one account.
func AccountKey(a icrc3.Account) Key { return Key{Term: "a:" + a.String()} }

// AccountIDKey finds the account whose ICP account identifier is the hex
// id (or starts with it).
func AccountIDKey(id string, prefix bool) Key {
	return Key{Term: "x:" + strings.ToLower(id), Prefix: prefix}
}

// AmountKey finds intents of amount units (raw, decimal) on a ledger.
func AmountKey(canister, units string) Key { return Key{Term: "u:" + canister + ":" + units} }

// MemoKey finds intents whose memo is the hex memo (or starts with it).
func MemoKey(memo string, prefix bool) Key {
	return Key{Term: "m:" + strings.ToLower(memo), Prefix: prefix}
}

// MemoFoldKey finds intents whose memo, its ASCII letters lower-cased,
// starts with the bytes of text lower-cased the same way: a memo as a
// customer types it, in whatever case.
func MemoFoldKey(text string) Key {
	return Key{Term: "mf:" + hex.EncodeToString(foldASCII([]byte(text))), Prefix: true}
}

// foldASCII lower-cases the ASCII letters of b, and only those, as SQLite's
// lower() does without ICU.
func foldASCII(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// BlockKey finds intents whose verdicts name block idx, as the match or as
// a near miss.
func BlockKey(idx uint64) Key { return Key{Term: "b:" + strconv.FormatUint(idx, 10)} }

type term struct{ term, role string }

func accountTerms(a icrc3.Account, role string) []term {
	ts := []term{{"p:" + a.Owner.Encode(), role}, {"a:" + a.String(), role}}
	if id, err := icp.AccountIDOf(a); err == nil { // a subaccount of another length has none
		ts = append(ts, term{"x:" + id.String(), role})
	}
	return ts
}

// bodyTerms are the keys of an intent's body and its stamp. A body the
// matcher refuses still has its caller and ledger, so a refused intent is
// found by the account that sent it.
func bodyTerms(rec *reconciled.IntentRecord) ([]term, *int64) {
	in, _ := rec.Parsed.(*matcher.Intent)
	if in == nil {
		var err error
		if in, err = matcher.ParseIntent(rec.Body); err != nil {
			return refusedTerms(rec), nil
		}
	}
	ts := accountTerms(in.CallerAccount(), "caller")
	for _, a := range []struct {
		acct *icrc3.Account
		role string
	}{{in.Args.From, "from"}, {in.Args.To, "to"}, {in.Args.Spender, "spender"}} {
		if a.acct != nil {
			ts = append(ts, accountTerms(*a.acct, a.role)...)
		}
	}
	ts = append(ts, term{"p:" + in.Canister.Encode(), "canister"},
		term{"u:" + in.Canister.Encode() + ":" + in.Args.Amount.String(), "amount"})
	if in.Args.HasMemo && len(in.Args.Memo) > 0 {
		ts = append(ts, term{"m:" + hex.EncodeToString(in.Args.Memo), "memo"},
			term{"mf:" + hex.EncodeToString(foldASCII(in.Args.Memo)), "memo"})
	}
	stamp := sat64(in.Stamp())
	return ts, &stamp
}

// refusedTerms reads a body the matcher refused loosely: its caller, its
// ledger and whichever accounts still parse, so that support staff find a
// refused intent by the accounts the customer names.
func refusedTerms(rec *reconciled.IntentRecord) []term {
	var ts []term
	if rec.Caller != "" {
		ts = append(ts, term{"p:" + strings.ToLower(rec.Caller), "caller"})
	}
	ts = append(ts, term{"p:" + rec.CanisterID, "canister"})
	var body struct {
		Args map[string]any `json:"args"`
	}
	if json.Unmarshal(rec.Body, &body) != nil {
		return ts
	}
	for _, role := range []string{"from", "to", "spender"} {
		if s, ok := body.Args[role].(string); ok {
			if a, err := icrc3.ParseAccount(s); err == nil {
				ts = append(ts, accountTerms(a, role)...)
			}
		}
	}
	return ts
}

func insertTerms(ctx context.Context, t *Tx, id string, ts []term) error {
	if len(ts) == 0 {
		return nil
	}
	// One statement for the intent's terms (a dozen or so), not one each.
	args := make([]any, 0, 3*len(ts))
	for _, k := range ts {
		args = append(args, k.term, id, k.role)
	}
	q := `INSERT OR IGNORE INTO intent_keys (term, intent_id, role) VALUES (?, ?, ?)` + strings.Repeat(`, (?, ?, ?)`, len(ts)-1)
	if _, err := t.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("index %q: %w", id, err)
	}
	return nil
}

// bodyIndex is the search keys of an intent body, derived outside the
// writer transaction: parsing the body is a third of an intent's write.
type bodyIndex struct {
	terms []term
	stamp *int64
}

func indexOf(rec *reconciled.IntentRecord) bodyIndex {
	ts, stamp := bodyTerms(rec)
	return bodyIndex{ts, stamp}
}

// indexIntent writes the search keys of a stored body.
func indexIntent(ctx context.Context, t *Tx, id string, ix bodyIndex) error {
	if err := insertTerms(ctx, t, id, ix.terms); err != nil {
		return err
	}
	if _, err := t.ExecContext(ctx, `INSERT INTO intent_facts (intent_id, stamp, indexed) VALUES (?, ?, 1)
		ON CONFLICT (intent_id) DO UPDATE SET stamp = excluded.stamp, indexed = 1`, id, ix.stamp); err != nil {
		return fmt.Errorf("index %q: %w", id, err)
	}
	return nil
}

// indexVerdict records the latest decided time and the blocks a verdict
// names.
func indexVerdict(ctx context.Context, t *Tx, v *reconciled.Verdict, decided int64) error {
	if _, err := t.ExecContext(ctx, `INSERT INTO intent_facts (intent_id, decided_at) VALUES (?, ?)
		ON CONFLICT (intent_id) DO UPDATE SET decided_at = excluded.decided_at`, v.IntentID, decided); err != nil {
		return fmt.Errorf("index %q: %w", v.IntentID, err)
	}
	return insertTerms(ctx, t, v.IntentID, verdictTerms(v))
}

// verdictTerms are the keys of the blocks a verdict names.
func verdictTerms(v *reconciled.Verdict) []term {
	var ts []term
	if v.Block != nil {
		ts = append(ts, term{"b:" + strconv.FormatUint(uint64(v.Block.Index), 10), "block"})
	}
	for _, nm := range v.NearMisses {
		ts = append(ts, term{"b:" + strconv.FormatUint(uint64(nm.Index), 10), "near_miss"})
	}
	return ts
}

// backfillIndex indexes bodies stored before the search keys existed, a
// batch per transaction so that a large database does not hold the writer
// for long.
func (s *Store) backfillIndex(ctx context.Context) error {
	for {
		var rows []struct {
			ID       string `db:"intent_id"`
			Canister string `db:"canister_id"`
			Caller   string `db:"caller"`
			Body     string `db:"body"`
		}
		if err := s.w.SelectContext(ctx, &rows, `SELECT i.intent_id, i.canister_id, coalesce(i.caller, '') AS caller, i.body
			FROM intents i LEFT JOIN intent_facts f ON f.intent_id = i.intent_id
			WHERE i.body IS NOT NULL AND coalesce(f.indexed, 0) = 0 LIMIT 500`); err != nil {
			return fmt.Errorf("store: backfill search index: %w", err)
		}
		if len(rows) == 0 {
			return nil
		}
		if err := s.tx(ctx, "backfill search index", func(t *Tx) error {
			for _, r := range rows {
				rec := reconciled.IntentRecord{IntentID: r.ID, CanisterID: r.Canister, Caller: r.Caller, Body: []byte(r.Body)}
				if err := indexIntent(ctx, t, rec.IntentID, indexOf(&rec)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
}

// keyCond is the SQL condition of the filter's keys on intents i, or "".
func keyCond(f *ListFilter) (string, []any) {
	var ors []string
	var args []any
	if len(f.Keys) > 0 {
		c, a := termsCond(f.Keys)
		ors = append(ors, "i.intent_id IN (SELECT intent_id FROM intent_keys WHERE "+c+")")
		args = append(args, a...)
	}
	if f.IDPrefix != "" {
		ors = append(ors, "(i.intent_id >= ? AND i.intent_id < ?)")
		args = append(args, f.IDPrefix, prefixEnd(f.IDPrefix))
	}
	if len(ors) == 0 {
		return "", nil
	}
	return "(" + strings.Join(ors, " OR ") + ")", args
}

// termsCond is the condition on intent_keys.term of any of the keys.
func termsCond(keys []Key) (string, []any) {
	var ks []string
	var args []any
	for _, k := range keys {
		c, a := termCond(k)
		ks = append(ks, c)
		args = append(args, a...)
	}
	return "(" + strings.Join(ks, " OR ") + ")", args
}

func termCond(k Key) (string, []any) {
	if k.Prefix {
		return "(term >= ? AND term < ?)", []any{k.Term, prefixEnd(k.Term)}
	}
	return "term = ?", []any{k.Term}
}

// prefixEnd is the least string above every string with prefix p. Terms and
// intent ids are ASCII, so incrementing the last byte cannot overflow.
func prefixEnd(p string) string {
	b := []byte(p)
	b[len(b)-1]++
	return string(b)
}

// matches fills in why each listed intent matched the filter's keys.
func (s *Store) matches(ctx context.Context, f *ListFilter, out []IntentSummary) error {
	if len(out) == 0 || (len(f.Keys) == 0 && f.IDPrefix == "") {
		return nil
	}
	at := make(map[string]int, len(out))
	for i := range out {
		at[out[i].IntentID] = i
		if f.IDPrefix != "" && strings.HasPrefix(out[i].IntentID, f.IDPrefix) {
			out[i].Matches = append(out[i].Matches, "intent_id")
		}
	}
	if len(f.Keys) == 0 {
		return nil
	}
	cond, args := termsCond(f.Keys)
	ids := make([]any, 0, len(out))
	for i := range out {
		ids = append(ids, out[i].IntentID)
	}
	var rows []struct {
		ID   string `db:"intent_id"`
		Role string `db:"role"`
	}
	// cond names the terms, so the primary key (term, intent_id, role)
	// answers this, or the index by intent (0013) when the planner finds
	// that cheaper.
	q := `SELECT DISTINCT intent_id, role FROM intent_keys WHERE intent_id IN (?` + strings.Repeat(", ?", len(ids)-1) +
		`) AND ` + cond + ` ORDER BY intent_id, role`
	if err := s.r.SelectContext(ctx, &rows, q, append(ids, args...)...); err != nil {
		return fmt.Errorf("store: search matches: %w", err)
	}
	for _, r := range rows {
		i := at[r.ID]
		out[i].Matches = append(out[i].Matches, r.Role)
	}
	return nil
}

// Canisters lists the ledgers of stored intents.
func (s *Store) Canisters(ctx context.Context) ([]string, error) {
	var out []string
	if err := s.r.SelectContext(ctx, &out,
		`SELECT DISTINCT canister_id FROM intents WHERE canister_id IS NOT NULL ORDER BY canister_id`); err != nil {
		return nil, fmt.Errorf("store: list ledgers: %w", err)
	}
	return out, nil
}
