package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// ---------------------------------------------------------------- faults

// outage is a fault switch shared by the wrappers of every instance of a
// world: the verdict stream or the stores fail while it is on.
type outage struct{ on atomic.Bool }

func (o *outage) set(on bool) { o.on.Store(on) }

var (
	errStreamOutage = errors.New("nats: timeout (injected verdict-stream outage)")
	errStoreOutage  = errors.New("disk I/O error (injected store write failure)")
)

// outageSink is the verdict sink of an instance whose verdict stream does
// not answer while its outage is on: every publish and every read fails.
type outageSink struct {
	reconcile.Sink
	o *outage
}

func (s outageSink) PublishVerdict(ctx context.Context, v reconciled.Verdict, in reconciled.IntentHeader) error {
	if s.o.on.Load() {
		return errStreamOutage
	}
	return s.Sink.PublishVerdict(ctx, v, in)
}

func (s outageSink) PublishReject(ctx context.Context, id, code, msg string) error {
	if s.o.on.Load() {
		return errStreamOutage
	}
	return s.Sink.PublishReject(ctx, id, code, msg)
}

func (s outageSink) LastVerdict(ctx context.Context, id string) (*reconciled.Verdict, error) {
	if s.o.on.Load() {
		return nil, errStreamOutage
	}
	return s.Sink.LastVerdict(ctx, id)
}

func (s outageSink) History(ctx context.Context, id string) ([]reconciled.StreamedVerdict, error) {
	if s.o.on.Load() {
		return nil, errStreamOutage
	}
	return s.Sink.History(ctx, id)
}

// outageStore is an instance's store whose writes fail while its outage
// is on; reads still work, as on a disk that went read-only.
type outageStore struct {
	reconcile.Store
	o *outage
	// err is what a write fails with (errStoreOutage when nil).
	err error
}

func (s outageStore) fail() error {
	if !s.o.on.Load() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errStoreOutage
}

func (s outageStore) PutIntent(ctx context.Context, rec reconciled.IntentRecord) (reconciled.PutResult, error) {
	if err := s.fail(); err != nil {
		return 0, err
	}
	return s.Store.PutIntent(ctx, rec)
}

func (s outageStore) PutIntentDecided(ctx context.Context, rec reconciled.IntentRecord, v reconciled.Verdict, w *reconciled.Watch) (reconciled.PutResult, error) {
	if err := s.fail(); err != nil {
		return 0, err
	}
	return s.Store.PutIntentDecided(ctx, rec, v, w)
}

func (s outageStore) AppendVerdict(ctx context.Context, v reconciled.Verdict, w *reconciled.Watch) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.AppendVerdict(ctx, v, w)
}

func (s outageStore) AppendDecided(ctx context.Context, v reconciled.Verdict, w *reconciled.Watch) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.AppendDecided(ctx, v, w)
}

func (s outageStore) MarkPublished(ctx context.Context, id string, seq uint64) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.MarkPublished(ctx, id, seq)
}

func (s outageStore) DiscardUnpublished(ctx context.Context, id string, seq uint64) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.DiscardUnpublished(ctx, id, seq)
}

func (s outageStore) Reschedule(ctx context.Context, w reconciled.Watch) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.Reschedule(ctx, w)
}

// readyz asks an in-process daemon's HTTP surface whether it is ready.
func readyz(d *daemon.Daemon) (bool, string) {
	rec := httptest.NewRecorder()
	d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code == http.StatusOK, strings.TrimSpace(rec.Body.String())
}

// ---------------------------------------------------------------- feed

// lvFeed follows the verdict stream from its start as a tool layer does
// and records when each intent's first final verdict arrived.
type lvFeed struct {
	mu      sync.Mutex
	seen    map[uint64]bool
	byID    map[string][]reconciled.Verdict
	finalAt map[string]time.Time
	bad     []string
	changed chan struct{}
}

func followLiveness(t testing.TB, ctx context.Context, js jetstream.JetStream) *lvFeed {
	t.Helper()
	f := &lvFeed{seen: map[uint64]bool{}, byID: map[string][]reconciled.Verdict{}, finalAt: map[string]time.Time{},
		changed: make(chan struct{}, 1)}
	f.follow(t, ctx, js)
	return f
}

// follow (re)starts the feed on js: stream sequences already seen are
// skipped and first arrival times kept.
func (f *lvFeed) follow(t testing.TB, ctx context.Context, js jetstream.JetStream) {
	t.Helper()
	cons, err := js.OrderedConsumer(ctx, queue.VerdictsStream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(f.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
}

func (f *lvFeed) add(msg jetstream.Msg) {
	now := time.Now()
	md, err := msg.Metadata()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.bad = append(f.bad, fmt.Sprintf("verdict on %s without metadata: %v", msg.Subject(), err))
		return
	}
	if f.seen[md.Sequence.Stream] {
		return
	}
	f.seen[md.Sequence.Stream] = true
	var v reconciled.Verdict
	if err := json.Unmarshal(msg.Data(), &v); err != nil {
		f.bad = append(f.bad, fmt.Sprintf("stream seq %d: %v", md.Sequence.Stream, err))
		return
	}
	f.byID[v.IntentID] = append(f.byID[v.IntentID], v)
	if _, ok := f.finalAt[v.IntentID]; v.Final && !ok {
		f.finalAt[v.IntentID] = now
	}
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond (run under the feed's lock) holds or deadline
// passes; it reports whether cond held.
func (f *lvFeed) waitFor(ctx context.Context, deadline time.Time, cond func(byID map[string][]reconciled.Verdict) bool) bool {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		f.mu.Lock()
		ok := cond(f.byID)
		f.mu.Unlock()
		if ok {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-f.changed:
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// ---------------------------------------------------------------- oracle

// lvIntent is one intent of a liveness world: what the ledger did with it,
// and when nothing but the daemon kept it from its final verdict.
type lvIntent struct {
	*plannedIntent
	ledger int
	// readyAt is when the intent could first be settled for good: its
	// publication (found, invalid), its execution (late) or its window's
	// close (absent).
	readyAt time.Time
	// other is a second body under the same id (the conflict race): the
	// stream answers whichever body took the id first, and only that one.
	other []byte
}

// lvResult is one fault kind's row of the table.
type lvResult struct {
	kind                       string
	worlds, instances          int
	intents, finals            int
	lost, stuck, late, wrong   int
	gaps, storeDiffs, notReady int
	worst                      time.Duration
	// openBy counts, per ledger, the intents left lost or stuck.
	openBy   map[int]int
	problems []string
	allowed  time.Duration
}

func (r *lvResult) add(o *lvResult) {
	r.worlds += o.worlds
	r.instances = max(r.instances, o.instances)
	r.intents += o.intents
	r.finals += o.finals
	r.lost += o.lost
	r.stuck += o.stuck
	r.late += o.late
	r.wrong += o.wrong
	r.gaps += o.gaps
	r.storeDiffs += o.storeDiffs
	r.notReady += o.notReady
	r.worst = max(r.worst, o.worst)
	for l, n := range o.openBy {
		r.open(l, n)
	}
	r.allowed = max(r.allowed, o.allowed)
	r.problems = append(r.problems, o.problems...)
}

func (r *lvResult) open(ledger, n int) {
	if r.openBy == nil {
		r.openBy = map[int]int{}
	}
	r.openBy[ledger] += n
}

func (r *lvResult) failed() bool {
	return r.lost+r.stuck+r.late+r.wrong+r.gaps+r.storeDiffs+r.notReady > 0 || r.finals != r.intents
}

func (r *lvResult) problem(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// lvTable prints one row per fault kind.
func lvTable(rows []*lvResult) string {
	sort.Slice(rows, func(i, j int) bool { return rows[i].kind < rows[j].kind })
	var b strings.Builder
	fmt.Fprintf(&b, "%-20s %6s %5s %8s %7s %5s %6s %5s %6s %5s %6s %9s %9s %9s\n", "fault", "worlds", "inst",
		"intents", "finals", "lost", "stuck", "late", "wrong", "gaps", "stores", "not-ready", "worst", "allowed")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-20s %6d %5d %8d %7d %5d %6d %5d %6d %5d %6d %9d %9s %9s\n", r.kind, r.worlds, r.instances,
			r.intents, r.finals, r.lost, r.stuck, r.late, r.wrong, r.gaps, r.storeDiffs, r.notReady,
			r.worst.Round(100*time.Millisecond), r.allowed.Round(time.Second))
	}
	return b.String()
}

// judge checks every intent against the verdict stream (read afresh) and
// the feed's arrival times: exactly one final verdict, the last, with seqs
// 1..n, the truth for the body that took the id, and no later than
// allowed after the intent was ready.
func judge(res *lvResult, plan []*lvIntent, stream map[string][]reconciled.Verdict, finalAt map[string]time.Time, allowed time.Duration) {
	res.intents += len(plan)
	res.allowed = max(res.allowed, allowed)
	for _, p := range plan {
		vs := stream[p.ID]
		if len(vs) == 0 {
			res.lost++
			res.open(p.ledger, 1)
			res.problem("lost: %s (%s, ledger %d): no verdict on the stream", p.ID, p.Class, p.ledger)
			continue
		}
		gap := false
		finals := 0
		for i, v := range vs {
			if v.Seq != uint64(i+1) {
				gap = true
			}
			if v.Final {
				finals++
			}
		}
		if gap {
			res.gaps++
			res.problem("gap: %s (%s): stream holds %s", p.ID, p.Class, describe(vs))
		}
		last := vs[len(vs)-1]
		if finals == 0 {
			res.stuck++
			res.open(p.ledger, 1)
			res.problem("stuck: %s (%s, ledger %d): no final verdict: %s", p.ID, p.Class, p.ledger, describe(vs))
			continue
		}
		res.finals++
		if finals > 1 || !last.Final {
			res.wrong++
			res.problem("wrong: %s: %d final verdicts, or one not last: %s", p.ID, finals, describe(vs))
		}
		if w := wrongFinal(p, vs); w != "" {
			res.wrong++
			res.problem("wrong: %s (%s): %s: %s", p.ID, p.Class, w, describe(vs))
		}
		at, ok := finalAt[p.ID]
		if !ok {
			// On the stream but never seen by the tool layer's consumer.
			res.late++
			res.problem("late: %s: final verdict on the stream never reached the tool layer's consumer", p.ID)
			continue
		}
		d := at.Sub(p.readyAt)
		res.worst = max(res.worst, d)
		if d > allowed {
			res.late++
			res.problem("late: %s (%s): final %s after the intent was ready (allowed %s)", p.ID, p.Class, d.Round(time.Millisecond), allowed)
		}
	}
}

// wrongFinal says what is wrong with an intent's final verdict ("" when
// nothing is).
func wrongFinal(p *lvIntent, vs []reconciled.Verdict) string {
	last := vs[len(vs)-1]
	if last.Final != last.Status.Final() {
		return fmt.Sprintf("status %s with final=%v", last.Status, last.Final)
	}
	for _, v := range vs {
		if v.IntentHash != vs[0].IntentHash {
			return "verdicts of two bodies on one subject"
		}
	}
	switch p.Class {
	case classFound, classLate:
		if last.Status != reconciled.StatusFound || last.Block == nil || uint64(last.Block.Index) != p.block {
			return fmt.Sprintf("executed at block %d, final %s", p.block, describeOne(last))
		}
	case classAbsent:
		if last.Status != reconciled.StatusAbsent {
			return "never executed, final " + describeOne(last)
		}
	case classInvalid:
		if last.Status != reconciled.StatusInvalid || last.Reason == nil || last.Reason.Code != "E_NO_STAMP" {
			return "no stamp, final " + describeOne(last)
		}
	}
	return ""
}

// sameVerdicts reports whether a store's history of an intent is the
// stream's, seq by seq and decision by decision.
func sameVerdicts(a, b []reconciled.Verdict) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Seq != b[i].Seq || a[i].IntentHash != b[i].IntentHash || !reconciled.SameDecision(a[i], b[i]) {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------- ledgers

// ledgerOn is a ledgerEnv for one more ledger of an existing replica.
func ledgerOn(t testing.TB, srv *ledgertest.Server, tag byte, callers int) *ledgerEnv {
	t.Helper()
	e := &ledgerEnv{srv: srv, to: principal.Principal{Raw: []byte{0xE3, tag, 0xE0, 0x01}}}
	var bal []ledgertest.Balance
	for i := range callers {
		p := principal.Principal{Raw: []byte{0xE3, tag, byte(i + 1), 0x01}}
		e.callers = append(e.callers, p)
		bal = append(bal, ledgertest.Balance{Account: icrc3.Account{Owner: p}, Amount: icrc3.NatFromUint64(1_000_000_000_000)})
	}
	var err error
	if e.ledger, err = srv.NewLedger(ledgertest.LedgerConfig{InitialBalances: bal}); err != nil {
		t.Fatal(err)
	}
	return e
}
