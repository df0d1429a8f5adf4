package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
)

// ServiceConfig wires a Service.
type ServiceConfig struct {
	Decider Decider
	Store   Store
	Sink    Sink
	Log     *zap.Logger
	Metrics *Metrics
	// RetryDelay is the Nak delay after a store or publish failure
	// (default 2 s); a shutdown Nak is immediate.
	RetryDelay time.Duration
	// BackoffBase and BackoffMax bound the follow-up of unreadable intents
	// (defaults 2 s and 5 min): attempt n waits base·2^(n-1), at most max.
	BackoffBase, BackoffMax time.Duration
	// Now is the wall clock used only for scheduling checks, never to
	// decide anything (default time.Now).
	Now func() time.Time
	// Owns says whether this instance follows up the ledger's open intents
	// (it holds the fleet's lease on it); nil follows up every ledger.
	Owns func(ledger string) bool
	// Serves says whether the daemon reads the ledger at all (strict
	// ledgers: only configured ones); nil serves every ledger. An intent
	// for a ledger it does not serve is a final invalid CodeUnknownLedger
	// at intake: the configuration is trusted local input, not a network
	// answer, so nothing later can change the answer, and deciding it
	// here costs no lease, client, watch entry or ledger query.
	Serves func(ledger string) bool
	// Hold says, for an intent about to be decided at intake, why it must
	// wait instead (nil: decide it now). A held intent is stored with a
	// first verdict unreadable with that reason and a watch entry, without
	// reading the ledger: the follow-up decides it once this instance
	// follows its ledger. A daemon bounds so what canisters nobody
	// configured cost, without leaving intents on the intake stream.
	Hold func(ledger string) *reconciled.Reason
}

// Service takes intents from the work queue, decides them, stores and
// publishes verdicts, and follows up on the non-final ones.
type Service struct {
	cfg    ServiceConfig
	log    *zap.Logger
	m      *Metrics
	locks  keyedMutex
	batch  batcher
	parsed parsedIntents
	rounds ledgerRounds
}

// NewService checks cfg and applies defaults.
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Decider == nil || cfg.Store == nil || cfg.Sink == nil {
		return nil, errors.New("reconcile: new service: decider, store and sink are required")
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 2 * time.Second
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = 2 * time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if o, ok := cfg.Decider.(interface{ Observe(*Metrics) }); ok {
		o.Observe(cfg.Metrics)
	}
	return &Service{cfg: cfg, log: cfg.Log, m: cfg.Metrics}, nil
}

// HandleIntent handles one delivery of an intent message. It never asks
// for endless redelivery: a message that cannot be answered is terminated,
// and a malformed intent with a readable id gets an invalid verdict.
func (s *Service) HandleIntent(ctx context.Context, data []byte) reconciled.Outcome {
	return s.HandleIntentOn(ctx, "", data)
}

// HandleIntentOn is HandleIntent for a delivery whose intake subject names
// subjectCanister ("" when the transport names none). An intent whose body
// names another canister is a final invalid CodeSubjectMismatch: the
// subject is what publish permissions are granted on, so the body must
// not choose another ledger than the one the publisher may publish for.
func (s *Service) HandleIntentOn(ctx context.Context, subjectCanister string, data []byte) reconciled.Outcome {
	s.m.received()
	o := s.handle(ctx, subjectCanister, data)
	s.m.outcome(o)
	return o
}

func (s *Service) handle(ctx context.Context, subjectCanister string, data []byte) reconciled.Outcome {
	in, err := matcher.ParseIntent(data)
	if err != nil {
		var me *matcher.Error
		if !errors.As(err, &me) {
			me = &matcher.Error{Code: matcher.CodeBadJSON, Message: err.Error()}
		}
		return s.handleInvalid(ctx, data, me)
	}
	rec := reconciled.IntentRecord{
		IntentID: in.ID, CanisterID: in.Canister.Encode(), Caller: in.Caller.Encode(), Method: string(in.Method),
		Body: in.Canonical(), Hash: in.Hash(), Parsed: in,
	}
	if subjectCanister != "" && subjectCanister != rec.CanisterID {
		return s.refuse(ctx, rec, &reconciled.Reason{Code: CodeSubjectMismatch, Field: "canister_id",
			Message: fmt.Sprintf("the intent was published on the subject of canister %q but names canister %s", subjectCanister, rec.CanisterID)})
	}
	if s.cfg.Serves != nil && !s.cfg.Serves(rec.CanisterID) {
		return s.refuse(ctx, rec, &reconciled.Reason{Code: CodeUnknownLedger, Field: "canister_id",
			Message: fmt.Sprintf("canister %s is not a ledger this daemon is configured to read (strict ledgers)", rec.CanisterID)})
	}
	if s.cfg.Hold != nil {
		if r := s.cfg.Hold(rec.CanisterID); r != nil {
			v := reconciled.Verdict{IntentID: rec.IntentID, IntentHash: hex.EncodeToString(rec.Hash[:]), Seq: 1, Status: reconciled.StatusUnreadable,
				Reason: r, DecidedAt: s.cfg.Now().UTC()}
			return s.admit(ctx, rec, in, &v)
		}
	}
	return s.admit(ctx, rec, in, nil)
}

// refuse answers a well-formed intent with a final invalid verdict without
// deciding it; a redelivery, or an id already answered, is answered from
// the store as any other.
func (s *Service) refuse(ctx context.Context, rec reconciled.IntentRecord, r *reconciled.Reason) reconciled.Outcome {
	v := reconciled.Verdict{IntentID: rec.IntentID, IntentHash: hex.EncodeToString(rec.Hash[:]), Seq: 1, Status: reconciled.StatusInvalid, Final: true,
		Reason: r, DecidedAt: s.cfg.Now().UTC()}
	in, _ := rec.Parsed.(*matcher.Intent) // nil for a record without one
	return s.admit(ctx, rec, in, &v)
}

// handleInvalid answers a malformed intent on its id when it has one.
func (s *Service) handleInvalid(ctx context.Context, data []byte, me *matcher.Error) reconciled.Outcome {
	var head struct {
		ID       any `json:"intent_id"`
		Canister any `json:"canister_id"`
		Caller   any `json:"caller"`
		Method   any `json:"method"`
	}
	_ = json.Unmarshal(data, &head) // a body that is not JSON has no id either
	id, _ := head.ID.(string)
	if !reconciled.ValidIntentID(id) || !json.Valid(data) {
		fields := []zap.Field{zap.String("code", me.Code), zap.String("field", me.Field), zap.String("message", me.Message), zap.Int("bytes", len(data))}
		if len(data) <= 1024 {
			fields = append(fields, zap.ByteString("body", data))
		}
		s.log.Warn("intent without a usable intent_id terminated", fields...)
		return reconciled.Outcome{Kind: reconciled.Term, Reason: "invalid intent without a usable intent_id: " + me.Code}
	}
	str := func(v any) string {
		if t, ok := v.(string); ok && t != "" && len(t) <= 256 {
			return t
		}
		return "unknown"
	}
	rec := reconciled.IntentRecord{IntentID: id, CanisterID: str(head.Canister), Caller: str(head.Caller), Method: str(head.Method),
		Body: append([]byte(nil), data...), Hash: sha256.Sum256(data)}
	v := reconciled.Verdict{IntentID: id, IntentHash: hex.EncodeToString(rec.Hash[:]), Seq: 1, Status: reconciled.StatusInvalid, Final: true,
		Reason: &reconciled.Reason{Code: me.Code, Field: me.Field, Message: me.Message}, DecidedAt: s.cfg.Now().UTC()}
	return s.admit(ctx, rec, nil, &v)
}

// admit stores the intent and settles it: a new one is decided (or, when
// invalid, answered with its invalid verdict); a known one is answered from
// the store without scanning.
//
// The intent's lock serialises its store and stream writes in this
// instance, but it is not held across the decision, which reads the ledger
// for as long as its calls' deadlines allow: the verdict follower imports
// the fleet's verdicts one at a time and must not wait behind it. The
// state is read again under the lock once the verdict is decided; if a
// verdict was stored meanwhile (imported, or decided by another delivery),
// the decision is dropped and the stored one answers.
func (s *Service) admit(ctx context.Context, rec reconciled.IntentRecord, in *matcher.Intent, invalid *reconciled.Verdict) reconciled.Outcome {
	log := s.log.With(zap.String("intent_id", rec.IntentID))
	var d *firstDecision
	for {
		o, decide := s.admitLocked(ctx, log, rec, d)
		if !decide {
			return o
		}
		v, w, err := s.firstVerdict(ctx, rec, in, invalid)
		if err != nil {
			return s.retry(ctx, log, "decide", err)
		}
		d = &firstDecision{v: v, w: w}
	}
}

// firstDecision is a first verdict decided without the intent's lock, with
// the watch entry it needs.
type firstDecision struct {
	v reconciled.Verdict
	w *reconciled.Watch
}

// admitLocked is admit under the intent's lock. It reports decide when the
// intent needs its first verdict and d holds none; admit then decides it
// without the lock and calls again.
func (s *Service) admitLocked(ctx context.Context, log *zap.Logger, rec reconciled.IntentRecord, d *firstDecision) (o reconciled.Outcome, decide bool) {
	unlock := s.locks.lock(rec.IntentID)
	defer unlock()

	// A store that does not know the intent may lag the fleet (a new
	// instance, a follower behind): what the stream already holds is
	// taken first, so this instance neither decides a seq the fleet has
	// decided nor stores a body other than the one the fleet answered.
	_, err := s.cfg.Store.LatestVerdict(ctx, rec.IntentID)
	imported := false
	if errors.Is(err, reconciled.ErrNotFound) {
		if d != nil {
			// Decided since the stream was read without a verdict: a
			// verdict the fleet published meanwhile makes the stream
			// refuse this one, which then yields to it (publishDecided).
			return s.admitNew(ctx, log, rec, *d), false
		}
		last, err := s.cfg.Sink.LastVerdict(ctx, rec.IntentID)
		if err != nil {
			return s.retry(ctx, log, "read the stream's verdict", err), false
		}
		if last == nil {
			// Neither the store nor the stream holds a verdict: the intent
			// is decided, then stored with its verdict in one transaction.
			return reconciled.Outcome{}, true
		}
		if err := s.yieldToStream(ctx, log, rec.IntentID); err != nil {
			return s.retry(ctx, log, "import the stream's verdicts", err), false
		}
		imported = true
	} else if err != nil {
		return s.retry(ctx, log, "read latest verdict", err), false
	}

	res, err := s.cfg.Store.PutIntent(ctx, rec)
	if err != nil {
		return s.retry(ctx, log, "store intent", err), false
	}
	if res == reconciled.PutConflict {
		return s.admitConflict(ctx, log, rec), false
	}
	if !imported {
		// Storing the intent changed none of its verdicts, and under the
		// lock nothing else here writes them.
		return s.admitKnown(ctx, log, rec, res), false
	}
	_, err = s.cfg.Store.LatestVerdict(ctx, rec.IntentID)
	switch {
	case errors.Is(err, reconciled.ErrNotFound):
		// The import brought no verdict (the stream's were of an intent
		// stored by an instance that stopped before deciding).
	case err != nil:
		return s.retry(ctx, log, "read latest verdict", err), false
	default:
		return s.admitKnown(ctx, log, rec, res), false
	}
	if d == nil {
		return reconciled.Outcome{}, true
	}

	if err := s.cfg.Store.AppendDecided(ctx, d.v, d.w); err != nil {
		return s.storeFailed(ctx, log, err), false
	}
	return s.publishDecided(ctx, log, rec, d.v), false
}

// admitKnown answers an intent the store holds with verdicts, without
// scanning: the stream is made to hold every stored verdict, in seq order,
// and an open intent is watched. A stream that holds another body for the
// id is the fleet's answer: the store takes it, and rec is refused.
func (s *Service) admitKnown(ctx context.Context, log *zap.Logger, rec reconciled.IntentRecord, res reconciled.PutResult) reconciled.Outcome {
	last, err := s.cfg.Sink.LastVerdict(ctx, rec.IntentID)
	if err != nil {
		return s.retry(ctx, log, "read the stream's verdict", err)
	}
	if holdsOtherBody(last, rec) {
		if err := s.yieldToStream(ctx, log, rec.IntentID); err != nil {
			return s.retry(ctx, log, "take the stream's intent", err)
		}
		return s.refuseConflict(ctx, log, rec, fmt.Sprintf("intent %s is already decided for another body; its verdicts stay", rec.IntentID))
	}
	hdr := reconciled.IntentHeader{Body: rec.Body, Hash: rec.Hash}
	top, err := s.publishStoredOver(ctx, log, rec.IntentID, hdr, last)
	if err != nil {
		return s.retry(ctx, log, "re-publish stored verdict", err)
	}
	if top == nil {
		// The store took the stream's verdicts meanwhile.
		v, err := s.cfg.Store.LatestVerdict(ctx, rec.IntentID)
		if err != nil {
			return s.retry(ctx, log, "read latest verdict", err)
		}
		top = &v
	}
	latest := *top
	if !latest.Final {
		if err := s.ensureWatched(ctx, rec); err != nil {
			return s.retry(ctx, log, "watch", err)
		}
	}
	log.Debug("known intent answered from the store", zap.String("put", fmt.Sprint(res)), zap.Uint64("seq", latest.Seq), zap.String("status", string(latest.Status)))
	return reconciled.Outcome{Kind: reconciled.Ack}
}

// admitConflict answers rec when the store holds another body under its
// id. The stream is the fleet's record: when its verdicts are of a body
// other than the stored one (two stores each took a different body
// first), the store takes the stream's body and verdicts; rec is then
// answered from the store if it is that body, and refused otherwise.
func (s *Service) admitConflict(ctx context.Context, log *zap.Logger, rec reconciled.IntentRecord) reconciled.Outcome {
	last, err := s.cfg.Sink.LastVerdict(ctx, rec.IntentID)
	if err != nil {
		return s.retry(ctx, log, "read the stream's verdict", err)
	}
	if last == nil || last.IntentHash == "" {
		// The stream names no body: the stored one stands.
		return s.refuseStoredConflict(ctx, log, rec)
	}
	stored, err := s.cfg.Store.Intent(ctx, rec.IntentID)
	if err != nil {
		return s.retry(ctx, log, "read the stored intent", err)
	}
	if last.IntentHash != hex.EncodeToString(stored.Hash[:]) {
		if err := s.yieldToStream(ctx, log, rec.IntentID); err != nil {
			return s.retry(ctx, log, "take the stream's intent", err)
		}
		if stored, err = s.cfg.Store.Intent(ctx, rec.IntentID); err != nil {
			return s.retry(ctx, log, "read the stored intent", err)
		}
	}
	if holdsOtherBody(last, rec) {
		return s.refuseConflict(ctx, log, rec, fmt.Sprintf("intent %s is already decided for another body; its verdicts stay", rec.IntentID))
	}
	if stored.Hash != rec.Hash {
		// The stream's verdicts carry no body to take.
		return s.refuseStoredConflict(ctx, log, rec)
	}
	return s.admitKnown(ctx, log, rec, reconciled.PutExisting)
}

// admitNew settles an intent that neither the store nor the stream knows:
// it is decided first, and the intent, its verdict and the verdict's outbox
// row are then stored in one transaction (shared with the rest of a burst).
func (s *Service) admitNew(ctx context.Context, log *zap.Logger, rec reconciled.IntentRecord, d firstDecision) reconciled.Outcome {
	v := d.v
	res, err := s.cfg.Store.PutIntentDecided(ctx, rec, v, d.w)
	if err != nil {
		return s.storeFailed(ctx, log, err)
	}
	if res == reconciled.PutConflict {
		return s.admitConflict(ctx, log, rec)
	}
	return s.publishDecided(ctx, log, rec, v)
}

// firstVerdict decides rec (or takes the verdict given: an invalid one, or
// a held intent's unreadable one) as its seq 1, with the watch entry a
// verdict that is not final needs.
func (s *Service) firstVerdict(ctx context.Context, rec reconciled.IntentRecord, in *matcher.Intent, invalid *reconciled.Verdict) (reconciled.Verdict, *reconciled.Watch, error) {
	var v reconciled.Verdict
	if invalid != nil {
		v = *invalid
	} else {
		var err error
		if v, err = s.decide(ctx, in); err != nil {
			return v, nil, err
		}
	}
	v.Seq = 1
	// The verdict answers the body stored with it, whatever the decider set.
	v.IntentHash = hex.EncodeToString(rec.Hash[:])
	var w *reconciled.Watch
	if !v.Final {
		attempts := 0
		if v.Status == reconciled.StatusUnreadable {
			attempts = 1
		}
		w = &reconciled.Watch{IntentID: rec.IntentID, CanisterID: rec.CanisterID, Attempts: attempts, NextCheck: s.nextCheck(v.Status, attempts)}
	}
	return v, w, nil
}

// storeFailed answers a failure to store a decided verdict.
func (s *Service) storeFailed(ctx context.Context, log *zap.Logger, err error) reconciled.Outcome {
	if errors.Is(err, reconciled.ErrInvalidRecord) {
		// The store can never hold this verdict: redelivery would
		// repeat the same refusal until the server gives up.
		log.Error("verdict refused by the store; intent terminated", zap.Error(err))
		return reconciled.Outcome{Kind: reconciled.Term, Reason: "verdict not storable: " + err.Error()}
	}
	return s.retry(ctx, log, "store verdict", err)
}

// refuseStoredConflict answers a body under an id this store holds for
// another body.
func (s *Service) refuseStoredConflict(ctx context.Context, log *zap.Logger, rec reconciled.IntentRecord) reconciled.Outcome {
	return s.refuseConflict(ctx, log, rec, fmt.Sprintf("intent %s is already stored with another body; the stored intent and its verdicts stay", rec.IntentID))
}

// publishDecided publishes a verdict decided here and just stored.
func (s *Service) publishDecided(ctx context.Context, log *zap.Logger, rec reconciled.IntentRecord, v reconciled.Verdict) reconciled.Outcome {
	hdr := reconciled.IntentHeader{Body: rec.Body, Hash: rec.Hash}
	s.m.verdict(v.Status)
	s.logVerdict(log, v)
	if err := s.cfg.Sink.PublishVerdict(ctx, v, hdr); err != nil && s.streamHoldsOtherBody(ctx, rec) {
		// Another instance, whose store took this id first for another
		// body, decided it: the stream is the fleet's answer, and this
		// store takes its body, verdicts and watch in place of rec's.
		if err := s.yieldToStream(ctx, log, rec.IntentID); err != nil {
			// The outbox pass, or a redelivery, takes it later.
			log.Warn("the stream's intent not taken; will retry", zap.Error(err))
		}
		return s.refuseConflict(ctx, log, rec, fmt.Sprintf("intent %s is already decided for another body; its verdicts stay", rec.IntentID))
	} else if errors.Is(err, reconciled.ErrHistory) {
		// Another instance decided it first: its answer stands.
		if err := s.yieldToStream(ctx, log, rec.IntentID); err != nil {
			return s.retry(ctx, log, "import the stream's verdicts", err)
		}
		return reconciled.Outcome{Kind: reconciled.Ack}
	} else if err != nil {
		// Stored but not published: the redelivery finds it in the store
		// and publishes it, with this seq; so does the outbox, should the
		// intent never be redelivered here.
		return s.retry(ctx, log, "publish verdict", err)
	}
	s.markPublished(ctx, log, v)
	return reconciled.Outcome{Kind: reconciled.Ack}
}

// refuseConflict answers a body under an id taken by another body.
func (s *Service) refuseConflict(ctx context.Context, log *zap.Logger, rec reconciled.IntentRecord, msg string) reconciled.Outcome {
	log.Warn("conflicting intent refused", zap.String("code", "E_INTENT_CONFLICT"), zap.String("canister_id", rec.CanisterID))
	s.m.reject("E_INTENT_CONFLICT")
	if err := s.cfg.Sink.PublishReject(ctx, rec.IntentID, "E_INTENT_CONFLICT", msg); err != nil {
		// The reject is advisory (core NATS); the stored data is what
		// matters and it is untouched. Redelivering would only repeat it.
		log.Warn("publish reject", zap.Error(err))
	}
	return reconciled.Outcome{Kind: reconciled.Ack}
}

// streamHoldsOtherBody reports whether the verdict stream's latest verdict
// of rec's id was decided for another body. Each instance's store refuses
// a second body on its own, but two stores can each take a different body
// first; the stream then holds one of them.
func (s *Service) streamHoldsOtherBody(ctx context.Context, rec reconciled.IntentRecord) bool {
	last, err := s.cfg.Sink.LastVerdict(ctx, rec.IntentID)
	return err == nil && holdsOtherBody(last, rec)
}

// holdsOtherBody reports whether last, the stream's latest verdict of
// rec's id, was decided for another body.
func holdsOtherBody(last *reconciled.Verdict, rec reconciled.IntentRecord) bool {
	return last != nil && last.IntentHash != "" && last.IntentHash != hex.EncodeToString(rec.Hash[:])
}

// markPublished clears v's outbox entries once the stream holds it. A
// failure only costs a stream lookup later: the outbox retry finds the
// verdict there and clears the entries then.
func (s *Service) markPublished(ctx context.Context, log *zap.Logger, v reconciled.Verdict) {
	if err := s.cfg.Store.MarkPublished(ctx, v.IntentID, v.Seq); err != nil && ctx.Err() == nil {
		log.Warn("published verdict not cleared from the outbox; will re-check", zap.Uint64("seq", v.Seq), zap.Error(err))
	}
}

// retry turns a failure into a Nak: immediately when shutting down (another
// instance takes over), after RetryDelay otherwise.
func (s *Service) retry(ctx context.Context, log *zap.Logger, what string, err error) reconciled.Outcome {
	if ctx.Err() != nil {
		log.Info("intent given back: shutting down", zap.String("during", what))
		return reconciled.Outcome{Kind: reconciled.Nak, Reason: "shutting down"}
	}
	log.Warn("intent will be redelivered", zap.String("during", what), zap.Error(err))
	return reconciled.Outcome{Kind: reconciled.Nak, Delay: s.cfg.RetryDelay, Reason: what + ": " + err.Error()}
}

// publishStored makes the stream hold every stored verdict of the intent,
// in seq order: those after the stream's last verdict are published one
// by one, each only once the one before it is on the stream, so the
// stream never skips a seq this store holds. When the stream holds later
// seqs than the store, another decision at a stored seq, or another
// body, the stream's history is taken instead (yieldToStream). Once the
// stream holds the store's latest verdict its outbox rows are cleared.
// The caller holds the intent's lock.
func (s *Service) publishStored(ctx context.Context, log *zap.Logger, id string, hdr reconciled.IntentHeader) error {
	last, err := s.cfg.Sink.LastVerdict(ctx, id)
	if err != nil {
		return err
	}
	_, err = s.publishStoredOver(ctx, log, id, hdr, last)
	return err
}

// publishStoredOver is publishStored given the stream's last verdict of
// the intent (nil for none), for a caller that has already read it. It
// returns the store's latest verdict when the store's verdicts stood (nil
// when it has none, or took the stream's instead).
func (s *Service) publishStoredOver(ctx context.Context, log *zap.Logger, id string, hdr reconciled.IntentHeader, last *reconciled.Verdict) (*reconciled.Verdict, error) {
	local, err := s.cfg.Store.Verdicts(ctx, id)
	if err != nil || len(local) == 0 {
		return nil, err
	}
	top := local[len(local)-1]
	var from uint64
	if last != nil {
		if last.Seq > top.Seq {
			// Newer in the stream: another instance decided it.
			return nil, s.yieldToStream(ctx, log, id)
		}
		for _, v := range local {
			if v.Seq == last.Seq && !reconciled.SameDecision(*last, withIntentHash(v, hdr)) {
				return nil, s.yieldToStream(ctx, log, id)
			}
		}
		from = last.Seq
	}
	for _, v := range local {
		if v.Seq <= from {
			continue
		}
		if err := s.cfg.Sink.PublishVerdict(ctx, withIntentHash(v, hdr), hdr); errors.Is(err, reconciled.ErrHistory) {
			// Another instance published this seq meanwhile.
			return nil, s.yieldToStream(ctx, log, id)
		} else if err != nil {
			return nil, err
		}
		s.log.Info("stored verdict re-published", zap.String("intent_id", id), zap.Uint64("seq", v.Seq))
	}
	s.markPublished(ctx, log, top)
	return &top, nil
}

// withIntentHash gives a verdict stored before verdicts carried intent_hash
// the hash of the stored intent it was decided for, which hdr carries.
func withIntentHash(v reconciled.Verdict, hdr reconciled.IntentHeader) reconciled.Verdict {
	if v.IntentHash == "" && len(hdr.Body) > 0 {
		v.IntentHash = hex.EncodeToString(hdr.Hash[:])
	}
	return v
}

// ensureWatched adds a watch entry for a non-final intent that has none,
// e.g. one whose verdicts were imported from another instance that may be
// gone: a re-published intent is then followed up here too.
func (s *Service) ensureWatched(ctx context.Context, rec reconciled.IntentRecord) error {
	ws, err := s.cfg.Store.Watches(ctx)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.IntentID == rec.IntentID {
			return nil
		}
	}
	return s.cfg.Store.Reschedule(ctx, reconciled.Watch{IntentID: rec.IntentID, CanisterID: rec.CanisterID, NextCheck: s.cfg.Now()})
}

// nextCheck: not_yet is looked at every round (the shared chain only reads
// new blocks); unreadable backs off exponentially, without giving up.
func (s *Service) nextCheck(st reconciled.Status, attempts int) time.Time {
	now := s.cfg.Now()
	if st != reconciled.StatusUnreadable {
		return now
	}
	return now.Add(s.backoff(attempts))
}

func (s *Service) backoff(attempts int) time.Duration {
	d := s.cfg.BackoffBase
	for i := 1; i < attempts && d < s.cfg.BackoffMax; i++ {
		d *= 2
	}
	return min(d, s.cfg.BackoffMax)
}

func (s *Service) logVerdict(log *zap.Logger, v reconciled.Verdict) {
	fields := []zap.Field{zap.Uint64("seq", v.Seq), zap.String("status", string(v.Status)), zap.Bool("final", v.Final)}
	if v.Block != nil {
		fields = append(fields, zap.Uint64("block", uint64(v.Block.Index)))
	}
	if v.Reason != nil {
		fields = append(fields, zap.String("code", v.Reason.Code))
	}
	if v.Evidence != nil {
		fields = append(fields, zap.Uint64("blocks_read", v.Evidence.BlocksRead))
	}
	log.Info("verdict", fields...)
}

// keyedMutex serialises work on one intent id (intake and follow-up may
// both append to its history) without a lock per id living forever.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
