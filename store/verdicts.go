package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/reconciled/reconciled"
)

// AppendVerdict records the next verdict of an intent. Seq must be exactly
// one more than the last stored (the first is 1), and nothing follows a
// final verdict (ErrFinal). Re-appending a verdict identical to the stored
// one at its seq is a no-op, because the same verdict reaches the store both
// from the local engine and from the verdict stream; a different verdict at
// a stored seq is ErrSeqConflict, a skipped seq ErrSeqGap.
//
// The same transaction updates the intent's latest status and the watch
// list: a final verdict unwatches the intent, a non-final one refreshes an
// existing watch entry's status and window end. A verdict for an id with no
// stored intent (decided by another sidecar) creates a body-less intent row
// so that listings and counts cover the whole fleet.
//
// With w non-nil it also schedules the next check of a non-final verdict's
// intent in the same transaction, so a crash cannot leave an undecided
// intent recorded but unwatched. w.IntentID must be the verdict's;
// w.LastStatus is taken from the verdict, and a zero w.WindowToTS from the
// verdict's window. For a final verdict w is ignored.
func (s *Store) AppendVerdict(ctx context.Context, v reconciled.Verdict, w *reconciled.Watch) error {
	if w != nil && w.IntentID != v.IntentID {
		return fmt.Errorf("%w: watch entry for %q with verdict for %q", ErrInvalid, w.IntentID, v.IntentID)
	}
	if w != nil {
		c := *w // appendVerdict fills in status and window end
		w = &c
	}
	return s.appendVerdict(ctx, v, w, false)
}

// AppendAfterGap is AppendVerdict for a verdict of the verdict stream that follows seqs the stream does not hold
// (a stream written by an older release could skip one): its seq may be
// beyond the next one, and the seqs between stay missing, as on the
// stream. Every other rule is AppendVerdict's.
func (s *Store) AppendAfterGap(ctx context.Context, v reconciled.Verdict, w *reconciled.Watch) error {
	if w != nil && w.IntentID != v.IntentID {
		return fmt.Errorf("%w: watch entry for %q with verdict for %q", ErrInvalid, w.IntentID, v.IntentID)
	}
	if w != nil {
		c := *w
		w = &c
	}
	vw, err := s.appendVerdictWrite(v, w, false)
	if err != nil {
		return err
	}
	vw.afterGap = true
	return s.groupTx(ctx, vw.what, vw.write)
}

// ReplaceIntent makes rec and vs (its verdicts, oldest first, as the
// verdict stream holds them) the intent's record in place of whatever the
// store holds under rec's id, and w its watch entry (none when w is nil
// or the last verdict is final), in one transaction: the stored intent,
// its verdicts, search keys, outbox rows and watch entry go. Two stores
// can each take a different body first under one id; the one whose body
// the stream does not hold takes the stream's. The first_seen of a stored
// row stays, since listings page by it. Seqs the stream skips stay
// skipped.
func (s *Store) ReplaceIntent(ctx context.Context, rec reconciled.IntentRecord, vs []reconciled.Verdict, w *reconciled.Watch) error {
	put, err := s.putIntentWrite(rec)
	if err != nil {
		return err
	}
	writes := make([]*verdictWrite, len(vs))
	for i, v := range vs {
		if v.IntentID != rec.IntentID {
			return fmt.Errorf("%w: intent %q with verdict for %q", ErrInvalid, rec.IntentID, v.IntentID)
		}
		var ww *reconciled.Watch
		if i == len(vs)-1 && w != nil {
			c := *w
			ww = &c
		}
		if writes[i], err = s.appendVerdictWrite(v, ww, false); err != nil {
			return err
		}
		writes[i].afterGap = true
	}
	what := "replace intent " + rec.IntentID
	return s.groupTx(ctx, what, func(ctx context.Context, t *Tx) error {
		var seen []int64
		if err := t.SelectContext(ctx, &seen, `SELECT first_seen FROM intents WHERE intent_id = ?`, rec.IntentID); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		// Every row referring to the intent goes with it (ON DELETE CASCADE).
		if _, err := t.ExecContext(ctx, `DELETE FROM intents WHERE intent_id = ?`, rec.IntentID); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		if _, _, err := put(ctx, t, nil); err != nil {
			return err
		}
		if len(seen) == 1 {
			if _, err := t.ExecContext(ctx, `UPDATE intents SET first_seen = ? WHERE intent_id = ?`, seen[0], rec.IntentID); err != nil {
				return fmt.Errorf("store: %s: %w", what, err)
			}
		}
		for _, vw := range writes {
			if err := vw.write(ctx, t); err != nil {
				return err
			}
		}
		return nil
	})
}

// toOutbox: the verdict was decided here, so the same transaction records it
// in the outbox (see AppendDecided).
func (s *Store) appendVerdict(ctx context.Context, v reconciled.Verdict, w *reconciled.Watch, toOutbox bool) error {
	vw, err := s.appendVerdictWrite(v, w, toOutbox)
	if err != nil {
		return err
	}
	return s.groupTx(ctx, vw.what, vw.write)
}

// verdictWrite is a checked and encoded verdict (and watch entry), to be
// appended inside a writer transaction so that other writes can share that
// transaction.
type verdictWrite struct {
	s        *Store
	v        reconciled.Verdict
	what     string
	doc      []byte
	decided  int64
	wr       *watchRow
	toOutbox bool
	// afterGap accepts a seq beyond the next one (see AppendAfterGap).
	afterGap bool
}

// appendVerdictWrite checks and encodes v (and w).
func (s *Store) appendVerdictWrite(v reconciled.Verdict, w *reconciled.Watch, toOutbox bool) (*verdictWrite, error) {
	v = normalise(v)
	if err := validateVerdict(&v); err != nil {
		return nil, err
	}
	doc, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("store: encode verdict %s/%d: %w", v.IntentID, v.Seq, err)
	}
	decided, err := nanos("decided_at", v.DecidedAt)
	if err != nil {
		return nil, err
	}
	var wr *watchRow
	if w != nil && !v.Final {
		w.LastStatus = v.Status
		if w.WindowToTS == 0 && v.Window != nil {
			w.WindowToTS = uint64(v.Window.ToTS)
		}
		r, err := watchRowOf(w)
		if err != nil {
			return nil, err
		}
		wr = &r
	}
	what := fmt.Sprintf("append verdict %s/%d", v.IntentID, v.Seq)
	return &verdictWrite{s: s, v: v, what: what, doc: doc, decided: decided, wr: wr, toOutbox: toOutbox}, nil
}

// write appends the verdict after the intent's stored ones.
func (vw *verdictWrite) write(ctx context.Context, t *Tx) error {
	v, what := &vw.v, vw.what
	now := vw.s.now().UnixNano()
	var head struct {
		Seq   int64 `db:"latest_seq"`
		Final bool  `db:"final"`
	}
	err := t.GetContext(ctx, &head, `SELECT latest_seq, final FROM intents WHERE intent_id = ?`, v.IntentID)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = t.ExecContext(ctx, `INSERT INTO intents (intent_id, first_seen, updated_at) VALUES (?, ?, ?)`,
			v.IntentID, now, now)
	}
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	seq := int64(v.Seq)
	if seq <= head.Seq {
		var stored []byte
		if err := t.GetContext(ctx, &stored, `SELECT json FROM verdicts WHERE intent_id = ? AND seq = ?`,
			v.IntentID, seq); err != nil {
			return fmt.Errorf("store: %s: read stored: %w", what, err)
		}
		same, err := sameVerdict(stored, vw.v)
		if err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		if !same {
			return fmt.Errorf("%w: %s: stored %s", ErrSeqConflict, what, stored)
		}
		if vw.wr != nil && seq == head.Seq && !head.Final {
			return upsertWatch(ctx, t, vw.wr)
		}
		return nil
	}
	if head.Final {
		return fmt.Errorf("%w: %s: seq %d is final", ErrFinal, what, head.Seq)
	}
	if seq != head.Seq+1 && !(vw.afterGap && seq > head.Seq+1) {
		return fmt.Errorf("%w: %s: last stored seq is %d", ErrSeqGap, what, head.Seq)
	}
	if _, err := t.ExecContext(ctx, `UPDATE intents SET status = ?, final = ?, latest_seq = ?, updated_at = ?
		WHERE intent_id = ?`, string(v.Status), v.Final, seq, now, v.IntentID); err != nil {
		return fmt.Errorf("store: %s: update intent: %w", what, err)
	}
	if err := indexVerdict(ctx, t, v, vw.decided); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return vw.rows(ctx, t)
}

// writeFirst stores rec with the verdict as its first, unless a row holds
// rec's id already: then it writes nothing and reports false. The intent
// row carries the verdict's status from its insert, and its search keys
// and facts the verdict's, a statement each where storing the intent and
// then appending (write) would update them after the fact. The verdict
// must be seq 1.
func (vw *verdictWrite) writeFirst(ctx context.Context, t *Tx, rec *reconciled.IntentRecord, seen, now int64, ix bodyIndex) (bool, error) {
	v := &vw.v
	res, err := t.ExecContext(ctx, `INSERT INTO intents
		(intent_id, canister_id, caller, method, body, canonical_hash, first_seen, updated_at, status, final, latest_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT (intent_id) DO NOTHING`,
		rec.IntentID, rec.CanisterID, rec.Caller, rec.Method, string(rec.Body),
		rec.Hash[:], seen, now, string(v.Status), v.Final)
	if err != nil {
		return false, fmt.Errorf("store: put intent %s: %w", rec.IntentID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("store: put intent %s: %w", rec.IntentID, err)
	} else if n != 1 {
		return false, nil
	}
	ts := append(ix.terms[:len(ix.terms):len(ix.terms)], verdictTerms(v)...)
	if err := insertTerms(ctx, t, rec.IntentID, ts); err != nil {
		return false, fmt.Errorf("store: put intent %s: %w", rec.IntentID, err)
	}
	// The intent row is new, so no row of intent_facts, verdicts, outbox
	// or watch refers to it (foreign keys): plain inserts, and no watch
	// entry to clear.
	if _, err := t.ExecContext(ctx, `INSERT INTO intent_facts (intent_id, stamp, indexed, decided_at) VALUES (?, ?, 1, ?)`,
		rec.IntentID, ix.stamp, vw.decided); err != nil {
		return false, fmt.Errorf("store: put intent %s: index: %w", rec.IntentID, err)
	}
	if err := vw.verdictRows(ctx, t); err != nil {
		return false, err
	}
	if vw.wr != nil {
		if err := upsertWatch(ctx, t, vw.wr); err != nil {
			return false, err
		}
	}
	return true, nil
}

// verdictRows writes the verdict's own row and its outbox row.
func (vw *verdictWrite) verdictRows(ctx context.Context, t *Tx) error {
	v, what := &vw.v, vw.what
	seq := int64(v.Seq)
	if _, err := t.ExecContext(ctx, `INSERT INTO verdicts (intent_id, seq, status, final, json, decided_at)
		VALUES (?, ?, ?, ?, ?, ?)`, v.IntentID, seq, string(v.Status), v.Final, string(vw.doc), vw.decided); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if vw.toOutbox {
		if err := addOutbox(ctx, t, v.IntentID, seq); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
	}
	return nil
}

// rows writes the verdict's own rows, its outbox row and its watch entry;
// the intent row is at the verdict's seq.
func (vw *verdictWrite) rows(ctx context.Context, t *Tx) error {
	v, what := &vw.v, vw.what
	if err := vw.verdictRows(ctx, t); err != nil {
		return err
	}
	var err error
	switch {
	case v.Final:
		_, err = t.ExecContext(ctx, `DELETE FROM watch WHERE intent_id = ?`, v.IntentID)
	case vw.wr != nil:
		return upsertWatch(ctx, t, vw.wr)
	default:
		var to int64
		if v.Window != nil {
			to = sat64(uint64(v.Window.ToTS))
		}
		_, err = t.ExecContext(ctx, `UPDATE watch SET last_status = ?,
			window_to_ts = CASE WHEN ? > 0 THEN ? ELSE window_to_ts END WHERE intent_id = ?`,
			string(v.Status), to, to, v.IntentID)
	}
	if err != nil {
		return fmt.Errorf("store: %s: update watch: %w", what, err)
	}
	return nil
}

// sameVerdict reports whether the stored verdict at v's seq decides what v
// decides (reconciled.SameDecision, the project's one definition): the
// same verdict reaches the store from the local engine and from the
// verdict stream, possibly re-encoded by another version of the Verdict
// type or stored before verdicts carried intent_hash, and is stored once.
func sameVerdict(stored []byte, v reconciled.Verdict) (bool, error) {
	var old reconciled.Verdict
	if err := json.Unmarshal(stored, &old); err != nil {
		return false, fmt.Errorf("decode stored verdict: %w", err)
	}
	return reconciled.SameDecision(old, v), nil
}

// normalise gives a verdict the one form it is stored and compared in, so
// that a verdict and its own JSON round trip through the verdict stream
// compare equal: UTC without a monotonic reading, and no empty-but-non-nil
// slices (JSON would turn them into [] on one side and null on the other).
func normalise(v reconciled.Verdict) reconciled.Verdict {
	v.DecidedAt = v.DecidedAt.Round(0).UTC()
	if len(v.NearMisses) == 0 {
		v.NearMisses = nil
	} else {
		nm := make([]reconciled.NearMiss, len(v.NearMisses))
		for i, m := range v.NearMisses {
			if len(m.Differs) == 0 {
				m.Differs = nil
			}
			nm[i] = m
		}
		v.NearMisses = nm
	}
	return v
}

func validateVerdict(v *reconciled.Verdict) error {
	switch {
	case !reconciled.ValidIntentID(v.IntentID):
		return fmt.Errorf("%w: verdict intent id %q", ErrInvalid, v.IntentID)
	case v.Seq == 0:
		return fmt.Errorf("%w: verdict %s: seq 0 (the first is 1)", ErrInvalid, v.IntentID)
	case v.Seq > math.MaxInt64:
		return fmt.Errorf("%w: verdict %s: seq %d", ErrOutOfRange, v.IntentID, v.Seq)
	case !v.Status.Valid():
		return fmt.Errorf("%w: verdict %s/%d: status %q", ErrInvalid, v.IntentID, v.Seq, v.Status)
	case v.Final != v.Status.Final():
		return fmt.Errorf("%w: verdict %s/%d: final=%t with status %s", ErrInvalid, v.IntentID, v.Seq, v.Final, v.Status)
	case v.DecidedAt.IsZero():
		return fmt.Errorf("%w: verdict %s/%d: no decided_at", ErrInvalid, v.IntentID, v.Seq)
	}
	return nil
}

// Verdicts returns an intent's verdict history, oldest first; empty (not an
// error) when it has none.
func (s *Store) Verdicts(ctx context.Context, id string) ([]reconciled.Verdict, error) {
	var docs [][]byte
	if err := s.r.SelectContext(ctx, &docs, `SELECT json FROM verdicts WHERE intent_id = ? ORDER BY seq`, id); err != nil {
		return nil, fmt.Errorf("store: verdicts of %s: %w", id, err)
	}
	out := make([]reconciled.Verdict, len(docs))
	for i, d := range docs {
		if err := json.Unmarshal(d, &out[i]); err != nil {
			return nil, fmt.Errorf("store: verdicts of %s: decode #%d: %w", id, i+1, err)
		}
	}
	return out, nil
}

// LatestVerdict returns the intent's newest verdict, or ErrNotFound.
func (s *Store) LatestVerdict(ctx context.Context, id string) (reconciled.Verdict, error) {
	var doc []byte
	err := s.r.GetContext(ctx, &doc, `SELECT json FROM verdicts WHERE intent_id = ? ORDER BY seq DESC LIMIT 1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return reconciled.Verdict{}, fmt.Errorf("store: latest verdict of %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return reconciled.Verdict{}, fmt.Errorf("store: latest verdict of %s: %w", id, err)
	}
	var v reconciled.Verdict
	if err := json.Unmarshal(doc, &v); err != nil {
		return reconciled.Verdict{}, fmt.Errorf("store: latest verdict of %s: decode: %w", id, err)
	}
	return v, nil
}
