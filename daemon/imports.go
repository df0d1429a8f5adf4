package daemon

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled/queue"
)

// The verdict follower imports the fleet's verdicts into the store; until
// it has caught up, the store answers "not found" for intents the fleet
// knows, so the daemon is not ready (importHealth).
//
// Caught up: the follower has handled a verdict after which the server
// counted at most readyLag more, or was set up with at most that many
// pending. Once caught up it stays ready while the lag stays at most
// behindLag, and through a lag above that lasting at most behindFor: every
// instance follows the same stream at about the same rate, so a burst of
// the fleet's verdicts puts them all behind at once, and taking them all
// out of service for a burst they work off within behindFor would make
// every support query fail instead of a few. A follower behind for longer
// than that is stuck or too slow, and its store's answers are stale.
const (
	// readyLag: on a busy stream a few verdicts are always in flight
	// between the publishers and the follower, which imports one at a time;
	// 64 is above that and a small fraction of a second of import.
	readyLag uint64 = 64
	// behindLag is more than a busy stream keeps in flight, and about a
	// second or more of import.
	behindLag uint64 = 1000
	behindFor        = time.Minute
)

// importHealth is the verdict follower's progress as readiness sees it.
type importHealth struct {
	mu          sync.Mutex
	now         func() time.Time
	since       time.Time // when the daemon began importing (not ready since)
	reported    bool      // the follower has reported at least once
	caughtUp    bool
	lag         uint64
	seq         uint64 // highest stream seq through which the store holds every verdict
	behindSince time.Time
	setupErr    error         // why the follower is not set up, while it is not
	tried       chan struct{} // closed at the first report or failure
	triedOnce   sync.Once
}

func newImportHealth(now func() time.Time) *importHealth {
	return &importHealth{now: now, since: now(), tried: make(chan struct{})}
}

// setUpTried is closed once the follower has been set up or failed to be
// once: from then on readiness knows its lag, or why it has none.
func (h *importHealth) setUpTried() <-chan struct{} { return h.tried }

// progress takes a follower's report.
func (h *importHealth) progress(p queue.FollowProgress) {
	defer h.triedOnce.Do(func() { close(h.tried) })
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reported, h.setupErr = true, nil
	h.lag = p.Pending
	h.seq = max(h.seq, p.Seq)
	switch {
	case h.lag <= readyLag:
		h.caughtUp, h.behindSince = true, time.Time{}
	case !h.caughtUp:
	case h.lag <= behindLag:
		h.behindSince = time.Time{}
	case h.behindSince.IsZero():
		h.behindSince = h.now()
	}
}

// polled takes the pending count the server gave for the follower, once
// the follower has reported itself set up.
func (h *importHealth) polled(pending uint64) {
	h.mu.Lock()
	set := h.reported
	h.mu.Unlock()
	if set {
		h.progress(queue.FollowProgress{Pending: pending})
	}
}

// failed records why the follower could not be set up.
func (h *importHealth) failed(err error) {
	defer h.triedOnce.Do(func() { close(h.tried) })
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setupErr = err
}

// imported is the stream seq through which the store holds every verdict
// as far as this run has seen.
func (h *importHealth) imported() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq
}

// lagNow is the latest lag and whether the follower has reported one.
func (h *importHealth) lagNow() (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lag, h.reported
}

// grouped writes n with its thousands grouped: 8,753.
func grouped(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// problem is the readiness problem of the import, nil when there is none.
func (h *importHealth) problem() *Problem {
	h.mu.Lock()
	defer h.mu.Unlock()
	behind := func() string {
		return fmt.Sprintf("%s behind (stream seq %s, imported %s)", grouped(h.lag), grouped(h.seq+h.lag), grouped(h.seq))
	}
	switch {
	case !h.caughtUp && h.setupErr != nil:
		return &Problem{Check: "import", Since: h.since, Error: fmt.Sprintf("verdict follower not set up: %v", h.setupErr)}
	case !h.caughtUp && !h.reported:
		return &Problem{Check: "import", Since: h.since, Error: "verdict follower not set up yet"}
	case !h.caughtUp:
		return &Problem{Check: "import", Since: h.since, Error: "importing verdicts: " + behind()}
	case !h.behindSince.IsZero() && h.now().Sub(h.behindSince) > behindFor:
		return &Problem{Check: "import", Since: h.behindSince,
			Error: fmt.Sprintf("importing verdicts fell behind for over %s: %s", behindFor, behind())}
	}
	return nil
}

// followerName is the durable name of this instance's verdict follower.
func (d *Daemon) followerName() string { return "verdicts-" + d.cfg.Instance }

// planImport compares the store's import position with the verdict
// follower's before the follower starts, so that the store holds every
// verdict the follower has acked:
//
//   - no follower: a new one starts where new followers start; the store's
//     position is reset to that stream.
//   - the follower feeds another store (a new store file, a store of
//     another fleet), or the store's position is of another stream: the
//     follower is deleted and the store rebuilt from the stream.
//   - the store's position is below the follower's ack floor (a store
//     restored from an older copy, or one whose last position write was
//     lost in a crash): the follower is recreated to start after the
//     store's position, and the verdicts after it are imported again.
//   - a follower of a release that named no store, and a store migrated
//     from a release that recorded no position: the follower's position
//     is taken as the store's, as that release did.
//
// It returns the stream and the store's position at the follower's start.
func (d *Daemon) planImport(ctx context.Context) (stream string, startAfter uint64, err error) {
	fi, err := d.conn.FollowerInfo(ctx, d.followerName())
	if err != nil {
		return "", 0, err
	}
	pos, err := d.store.ImportPosition(ctx)
	if err != nil {
		return "", 0, err
	}
	d.storeID = pos.StoreID
	log := d.log.With(zap.String("consumer", d.followerName()), zap.String("store_id", pos.StoreID))
	rebuild := func(why string) (string, uint64, error) {
		log.Warn("the store is being rebuilt from the verdict stream: every verdict is imported again, and the daemon is not ready until it is done",
			zap.String("reason", why), zap.Uint64("consumer_ack_floor", fi.AckFloor))
		if err := d.conn.ForgetFollower(ctx, d.followerName()); err != nil {
			return "", 0, err
		}
		return fi.Stream, 0, d.store.SetImportPosition(ctx, fi.Stream, 0)
	}
	switch {
	case !fi.Exists:
		if pos.Known && pos.Seq == 0 && pos.Stream == fi.Stream {
			return fi.Stream, 0, nil
		}
		return fi.Stream, 0, d.store.SetImportPosition(ctx, fi.Stream, 0)
	case d.store.Created():
		return rebuild("the store is new, and the follower of this instance has read the stream before")
	case fi.StoreID == "" && !pos.Known:
		log.Info("the verdict follower's position is taken as the store's, recorded from now on",
			zap.Uint64("stream_seq", fi.AckFloor))
		return fi.Stream, fi.AckFloor, d.store.SetImportPosition(ctx, fi.Stream, fi.AckFloor)
	case fi.StoreID == "":
		return rebuild("the follower names no store (an earlier release created or updated it), so what it read cannot be matched with this store's position")
	case fi.StoreID != pos.StoreID:
		return rebuild(fmt.Sprintf("the follower of this instance fed another store (%q)", fi.StoreID))
	case pos.Stream != "" && pos.Stream != fi.Stream:
		return rebuild("the store's position is of another verdict stream (created " + pos.Stream + ")")
	case !pos.Known || pos.Seq < fi.AckFloor:
		log.Warn("the store holds fewer verdicts than its follower has read (an older copy, or its last position was lost): the verdicts after its position are imported again",
			zap.Uint64("store_stream_seq", pos.Seq), zap.Uint64("consumer_ack_floor", fi.AckFloor))
		if err := d.conn.ForgetFollower(ctx, d.followerName()); err != nil {
			return "", 0, err
		}
		return fi.Stream, pos.Seq, d.store.SetImportPosition(ctx, fi.Stream, pos.Seq)
	}
	return fi.Stream, pos.Seq, nil
}

// pollImportLag reads the follower's pending count from the server every
// period: the follower reports its lag at each delivery only, and one
// stuck in a verdict's import would otherwise leave its last lag standing
// while the stream grows.
func (d *Daemon) pollImportLag(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fi, err := d.conn.FollowerInfo(ctx, d.followerName())
		if err != nil || !fi.Exists {
			// The follower's own set-up reports a consumer it cannot have,
			// the nats and jetstream checks a server that does not answer.
			continue
		}
		d.imports.polled(fi.Pending)
	}
}

// recordImports writes the follower's position into the store every
// period, and once more after stop is closed (the follower has returned).
// A position written is one the follower handled, so its verdicts have
// committed: the store's position never runs ahead of it. One lost in a
// crash makes the next start import again the verdicts after the last one
// written.
func (d *Daemon) recordImports(ctx context.Context, stream string, from uint64, period time.Duration, stop <-chan struct{}) {
	written := from
	write := func(ctx context.Context) {
		seq := d.imports.imported()
		if seq <= written {
			return
		}
		if err := d.store.SetImportPosition(ctx, stream, seq); err != nil {
			if ctx.Err() == nil {
				d.log.Warn("record the store's import position", zap.Uint64("stream_seq", seq), zap.Error(err))
			}
			return
		}
		written = seq
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			write(context.WithoutCancel(ctx))
			return
		case <-t.C:
			write(ctx)
		}
	}
}
