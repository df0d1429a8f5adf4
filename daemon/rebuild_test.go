package daemon_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"
	_ "modernc.org/sqlite"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/reconcile"
)

// fleetLedger is the ledger of the intents another instance decided; the
// follower imports them without reading it.
var fleetLedger = principal.Principal{Raw: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1}}.Encode()

// publishFleetVerdicts publishes, as another instance of the fleet would,
// a final verdict for each of the intents fleet-<from>..fleet-<to-1>.
func publishFleetVerdicts(t *testing.T, r *daemontest.Rig, from, to int) []string {
	t.Helper()
	sink := queue.Sink{C: r.Tool, Origin: "other-instance:1"}
	var ids []string
	for n := from; n < to; n++ {
		id := fmt.Sprintf("fleet-%05d", n)
		body := transferBody(id, fleetLedger, n)
		v := reconciled.Verdict{IntentID: id, Seq: 1, Status: reconciled.StatusInvalid, Final: true,
			Reason: &reconciled.Reason{Code: "E_BAD_ARGS", Message: "test"}, DecidedAt: time.Now().UTC()}
		if err := sink.PublishVerdict(r.Ctx, v, reconciled.IntentHeader{Body: body, Hash: sha256.Sum256(body)}); err != nil {
			t.Fatalf("publish the verdict of %s: %v", id, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// storedCount is how many intents of ids d's store holds a verdict of.
func storedCount(t *testing.T, d *daemon.Daemon, ids []string) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		if _, err := d.Store().LatestVerdict(context.Background(), id); err == nil {
			n++
		}
	}
	return n
}

// waitStored waits until d's store holds a verdict of every one of ids.
func waitStored(t *testing.T, d *daemon.Daemon, ids []string, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, "every verdict imported", func() (bool, string) {
		n := storedCount(t, d, ids)
		return n == len(ids), fmt.Sprintf("%d of %d verdicts in the store", n, len(ids))
	})
}

// gatedStore holds the follower's imports (PutIntent) until open is
// closed.
type gatedStore struct {
	reconcile.Store
	open <-chan struct{}
}

func (s gatedStore) PutIntent(ctx context.Context, rec reconciled.IntentRecord) (reconciled.PutResult, error) {
	select {
	case <-s.open:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.Store.PutIntent(ctx, rec)
}

func gated(open <-chan struct{}) func(*daemon.Config, *daemon.Options) {
	return func(_ *daemon.Config, o *daemon.Options) {
		o.ServiceStore = func(s reconcile.Store) reconcile.Store { return gatedStore{Store: s, open: open} }
	}
}

// wipeStore leaves the store a 0-byte file, as an operator's truncation
// or a volume restored empty does.
func wipeStore(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "reconciled.db")
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + ext); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// copyStore copies the closed store of src to dst (file and WAL).
func copyStore(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"", "-wal", "-shm"} {
		from := filepath.Join(src, "reconciled.db"+ext)
		to := filepath.Join(dst, "reconciled.db"+ext)
		b, err := os.ReadFile(from)
		if os.IsNotExist(err) {
			_ = os.Remove(to)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWipedStoreRebuiltAndNotReadyUntilDone: a store file wiped to 0
// bytes under the same instance name imports every verdict of the stream
// again, and /readyz says the daemon is not ready, and how far behind it
// is, until it has caught up.
func TestWipedStoreRebuiltAndNotReadyUntilDone(t *testing.T) {
	r := daemontest.New(t, daemontest.Options{Seed: 41, NoDaemon: true})
	dir := t.TempDir()
	d := r.Start(daemontest.Options{Instance: "pod-0", DataDir: dir})
	const n = 400
	ids := publishFleetVerdicts(t, r, 0, n)
	waitStored(t, d, ids, 60*time.Second)
	daemontest.Stop(d, 5*time.Second)

	wipeStore(t, dir)
	open := make(chan struct{})
	d = r.Start(daemontest.Options{Instance: "pod-0", DataDir: dir, Tune: gated(open)})
	h := d.Handler()
	var why string
	testutil.Eventually(t, 30*time.Second, "/readyz not ready, naming the import", func() (bool, string) {
		got := getReadyz(t, h)
		if got.Code == http.StatusOK {
			t.Fatalf("/readyz ready with %d of %d verdicts in the wiped store: %s", storedCount(t, d, ids), n, got.Body)
		}
		why, _ = got.failing("import")
		return strings.Contains(why, "behind"), got.Body
	})
	if !strings.Contains(why, fmt.Sprintf("%d behind", n)) {
		t.Errorf("/readyz while the import is held: %q, want %d behind", why, n)
	}
	t.Logf("while importing: %s", why)
	if lag := gaugeValue(t, d, "reconciled_import_lag_verdicts"); lag != n {
		t.Errorf("reconciled_import_lag_verdicts = %v, want %d", lag, n)
	}
	close(open)
	testutil.Eventually(t, 60*time.Second, "/readyz ready once imported", func() (bool, string) {
		got := getReadyz(t, h)
		if got.Code != http.StatusOK {
			return false, got.Body
		}
		// Ready is caught up to within the lag a busy stream keeps.
		if have := storedCount(t, d, ids); have < n-64 {
			t.Fatalf("/readyz ready with %d of %d verdicts in the store", have, n)
		}
		return true, ""
	})
	waitStored(t, d, ids, 30*time.Second)
	if !strings.Contains(r.Logs.String(), "the store is being rebuilt from the verdict stream") {
		t.Error("the rebuild was not logged")
	}
}

// TestOlderStoreCopyReimportsMissing: a store replaced by an older copy
// of itself imports the verdicts its follower read after the copy was
// taken.
func TestOlderStoreCopyReimportsMissing(t *testing.T) {
	r := daemontest.New(t, daemontest.Options{Seed: 42, NoDaemon: true})
	dir, backup := t.TempDir(), t.TempDir()
	d := r.Start(daemontest.Options{Instance: "pod-0", DataDir: dir})
	first := publishFleetVerdicts(t, r, 0, 150)
	waitStored(t, d, first, 60*time.Second)
	daemontest.Stop(d, 5*time.Second)
	copyStore(t, dir, backup)

	d = r.Start(daemontest.Options{Instance: "pod-0", DataDir: dir})
	later := publishFleetVerdicts(t, r, 150, 300)
	waitStored(t, d, later, 60*time.Second)
	daemontest.Stop(d, 5*time.Second)

	copyStore(t, backup, dir)
	d = r.Start(daemontest.Options{Instance: "pod-0", DataDir: dir})
	all := append(first, later...)
	testutil.Eventually(t, 20*time.Second, "the verdicts missing from the older copy imported", func() (bool, string) {
		have := storedCount(t, d, all)
		return have == len(all), fmt.Sprintf("%d of %d verdicts in the store (%d of the later ones)",
			have, len(all), storedCount(t, d, later))
	})
}

// TestRestartContinuesFollower: a normal restart resumes the follower
// where it was: nothing is imported again and nothing is logged as
// rebuilt.
func TestRestartContinuesFollower(t *testing.T) {
	r := daemontest.New(t, daemontest.Options{Seed: 43, NoDaemon: true})
	dir := t.TempDir()
	d := r.Start(daemontest.Options{Instance: "pod-0", DataDir: dir})
	ids := publishFleetVerdicts(t, r, 0, 200)
	waitStored(t, d, ids, 60*time.Second)
	daemontest.Stop(d, 5*time.Second)

	d = r.Start(daemontest.Options{Instance: "pod-0", DataDir: dir})
	more := publishFleetVerdicts(t, r, 200, 210)
	waitStored(t, d, more, 30*time.Second)
	if known := d.Metrics().Get(reconcile.MetricImported, "known"); known != 0 {
		t.Errorf("%d verdicts imported again after a normal restart", known)
	}
	if stored := d.Metrics().Get(reconcile.MetricImported, "stored"); stored != uint64(len(more)) {
		t.Errorf("%d verdicts stored after the restart, want the %d new ones", stored, len(more))
	}
	logs := r.Logs.String()
	for _, msg := range []string{"rebuilt from the verdict stream", "imported again"} {
		if strings.Contains(logs, msg) {
			t.Errorf("a normal restart logged %q", msg)
		}
	}
}

// TestUpgradeTakesFollowerPosition: the first start after a release that
// recorded no import position and named no store on its follower takes
// the follower's position as the store's, imports nothing again, and
// names the store on the follower from then on.
func TestUpgradeTakesFollowerPosition(t *testing.T) {
	r := daemontest.New(t, daemontest.Options{Seed: 44, NoDaemon: true})
	dir := t.TempDir()
	d := r.Start(daemontest.Options{Instance: "pod-0", DataDir: dir})
	ids := publishFleetVerdicts(t, r, 0, 100)
	waitStored(t, d, ids, 60*time.Second)
	daemontest.Stop(d, 5*time.Second)

	// As the earlier release left them: no position in the store, no
	// store named on the consumer.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "reconciled.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE import_position SET stream = '', stream_seq = NULL`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	js := r.Tool.JetStream()
	cons, err := js.Consumer(r.Ctx, queue.VerdictsStream, "verdicts-pod-0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := cons.CachedInfo().Config
	cfg.Metadata = nil
	if _, err := js.UpdateConsumer(r.Ctx, queue.VerdictsStream, cfg); err != nil {
		t.Fatal(err)
	}
	if fi, err := r.Tool.FollowerInfo(r.Ctx, "verdicts-pod-0"); err != nil || fi.StoreID != "" {
		t.Fatalf("the consumer as an earlier release left it: %+v %v", fi, err)
	}

	d = r.Start(daemontest.Options{Instance: "pod-0", DataDir: dir})
	more := publishFleetVerdicts(t, r, 100, 105)
	waitStored(t, d, more, 30*time.Second)
	if known := d.Metrics().Get(reconcile.MetricImported, "known"); known != 0 {
		t.Errorf("%d verdicts imported again after the upgrade", known)
	}
	if !strings.Contains(r.Logs.String(), "the verdict follower's position is taken as the store's") {
		t.Error("taking the follower's position was not logged")
	}
	pos, err := d.Store().ImportPosition(r.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := r.Tool.FollowerInfo(r.Ctx, "verdicts-pod-0")
	if err != nil {
		t.Fatal(err)
	}
	if fi.StoreID != pos.StoreID || !pos.Known || pos.Stream != fi.Stream {
		t.Fatalf("after the upgrade: consumer %+v, store %+v", fi, pos)
	}
}

// holdable holds the follower's imports (PutIntent) while held.
type holdable struct {
	mu   sync.Mutex
	gate chan struct{} // closed: imports go on
}

func newHoldable() *holdable {
	h := &holdable{gate: make(chan struct{})}
	close(h.gate)
	return h
}

func (h *holdable) hold() {
	h.mu.Lock()
	h.gate = make(chan struct{})
	h.mu.Unlock()
}

func (h *holdable) release() {
	h.mu.Lock()
	close(h.gate)
	h.mu.Unlock()
}

type heldStore struct {
	reconcile.Store
	h *holdable
}

func (s heldStore) PutIntent(ctx context.Context, rec reconciled.IntentRecord) (reconciled.PutResult, error) {
	s.h.mu.Lock()
	gate := s.h.gate
	s.h.mu.Unlock()
	select {
	case <-gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.Store.PutIntent(ctx, rec)
}

// TestBurstKeepsCaughtUpInstanceReady: an instance that has caught up
// stays ready through a burst of the fleet's verdicts far above the ready
// lag, which every instance meets at once, while it works it off.
func TestBurstKeepsCaughtUpInstanceReady(t *testing.T) {
	r := daemontest.New(t, daemontest.Options{Seed: 46, NoDaemon: true})
	h := newHoldable()
	d := r.Start(daemontest.Options{Instance: "pod-0", Tune: func(_ *daemon.Config, o *daemon.Options) {
		o.ServiceStore = func(s reconcile.Store) reconcile.Store { return heldStore{Store: s, h: h} }
	}})
	probe := d.Handler()
	if got := getReadyz(t, probe); got.Code != http.StatusOK {
		t.Fatalf("an instance with nothing to import: %d %s", got.Code, got.Body)
	}
	h.hold()
	const n = 1200
	ids := publishFleetVerdicts(t, r, 0, n)
	testutil.Eventually(t, 30*time.Second, "the burst counted as the lag", func() (bool, string) {
		lag := gaugeValue(t, d, "reconciled_import_lag_verdicts")
		return lag >= n-1, fmt.Sprint(lag)
	})
	if got := getReadyz(t, probe); got.Code != http.StatusOK {
		t.Fatalf("/readyz with a burst of %d verdicts pending: %d %s", n, got.Code, got.Body)
	}
	h.release()
	testutil.Eventually(t, 60*time.Second, "the burst imported", func() (bool, string) {
		stored := d.Metrics().Get(reconcile.MetricImported, "stored")
		return stored == uint64(len(ids)), fmt.Sprintf("%d of %d imported", stored, len(ids))
	})
	if got := getReadyz(t, probe); got.Code != http.StatusOK {
		t.Fatalf("/readyz after the burst: %d %s", got.Code, got.Body)
	}
}

// gaugeValue is the value of the unlabelled gauge name on /metrics.
func gaugeValue(t *testing.T, d *daemon.Daemon, name string) float64 {
	t.Helper()
	var b strings.Builder
	if err := d.WriteMetrics(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(b.String()) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(strings.TrimSpace(v), &f); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no %s on /metrics", name)
	return 0
}
