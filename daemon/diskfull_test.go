package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
	"github.com/reconciled/reconciled/store"
)

// tinyFS is a small file system of its own at dir: a tmpfs of 5 MiB, so
// that filling it fails real writes with ENOSPC. Where mounting is not
// permitted it falls back to injecting the failure: ENOSPC into the
// store's commits (store.Options.WriteFault), or, for the NATS server's
// store, the server's own reaction to a storage failure (it shuts its
// JetStream down).
type tinyFS struct {
	t        *testing.T
	dir      string
	injected bool
	full     atomic.Bool
	// onFill runs in place of filling when injecting.
	onFill func()
}

// mountTiny mounts the file system at dir (created). It is detached when
// the test ends, after everything started later has stopped.
func mountTiny(t *testing.T, dir string) *tinyFS {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=5m"); err != nil {
		t.Logf("mount a 5 MiB tmpfs at %s: %v; injecting the failure instead", dir, err)
		return &tinyFS{t: t, dir: dir, injected: true}
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return &tinyFS{t: t, dir: dir}
}

// storeFault is the store's WriteFault: nil unless injecting.
func (f *tinyFS) storeFault(o *store.Options) {
	if !f.injected {
		return
	}
	o.WriteFault = func(p store.WritePath) error {
		if f.full.Load() {
			return fmt.Errorf("write %s: %w", f.dir, syscall.ENOSPC)
		}
		return nil
	}
}

// fill writes a file until the file system has no space left.
func (f *tinyFS) fill() {
	f.t.Helper()
	if f.injected {
		f.full.Store(true)
		if f.onFill != nil {
			f.onFill()
		}
		return
	}
	w, err := os.Create(filepath.Join(f.dir, "filler"))
	if err != nil {
		f.t.Fatal(err)
	}
	defer w.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := w.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			f.t.Fatalf("fill %s: %v", f.dir, err)
		}
	}
}

// free gives the space back.
func (f *tinyFS) free() {
	f.t.Helper()
	if f.injected {
		f.full.Store(false)
		return
	}
	if err := os.Remove(filepath.Join(f.dir, "filler")); err != nil {
		f.t.Fatal(err)
	}
}

// poll checks cond every 5 ms until it holds (true) or timeout passes
// (false).
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// readyz is what /readyz answers.
type readyz struct {
	Code    int
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Failing []struct {
		Check string `json:"check"`
		Since string `json:"since"`
		Error string `json:"error"`
	} `json:"failing"`
	Body string
}

func getReadyz(t *testing.T, h http.Handler) readyz {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	r := readyz{Code: rec.Code, Body: rec.Body.String()}
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("/readyz body %q: %v", r.Body, err)
	}
	return r
}

// failing returns the failing check named check, if any.
func (r readyz) failing(check string) (string, bool) {
	for _, f := range r.Failing {
		if f.Check == check {
			return f.Error + " (since " + f.Since + ")", true
		}
	}
	return "", false
}

// transferBody is an icrc1_transfer intent to a fresh account, created now:
// a payment the ledger has not seen, so its first verdict is not_yet.
func transferBody(id, ledger string, n int) []byte {
	to := icrc3.Account{Owner: principal.Principal{Raw: []byte{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, byte(n >> 8), byte(n), 2}}}
	caller := principal.Principal{Raw: []byte{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 2}}.Encode()
	return fmt.Appendf(nil, `{"intent_id":%q,"canister_id":%q,"method":"icrc1_transfer","caller":%q,`+
		`"args":{"from_subaccount":null,"to":%q,"amount":"1000","fee":null,"memo":null,"created_at_time":"%d"},`+
		`"after":"unknown"}`, id, ledger, caller, to.String(), time.Now().UnixNano())
}

// waitVerdicts waits until every one of ids has a verdict on the stream.
func waitVerdicts(t *testing.T, c *queue.Conn, ids []string, timeout time.Duration) {
	t.Helper()
	left := map[string]bool{}
	for _, id := range ids {
		left[id] = true
	}
	testutil.Eventually(t, timeout, "a verdict for every acknowledged intent", func() (bool, string) {
		for id := range left {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			v, err := c.LastVerdict(ctx, id)
			cancel()
			if err == nil && v != nil {
				delete(left, id)
			}
		}
		return len(left) == 0, fmt.Sprintf("%d of %d intents without a verdict", len(left), len(ids))
	})
}

// TestStoreOnFullDiskNotReadyThenRecovers puts the SQLite store on a small
// file system and fills it: /readyz must turn false, naming the store,
// from the first failed write, and once space returns every acknowledged
// intent gets its verdict and /readyz turns true again.
func TestStoreOnFullDiskNotReadyThenRecovers(t *testing.T) {
	r := daemontest.New(t, daemontest.Options{Seed: 31, Timeout: 3 * time.Minute, NoDaemon: true})
	data := filepath.Join(t.TempDir(), "data")
	fs := mountTiny(t, data)
	d := r.Start(daemontest.Options{DataDir: data, MaxInflight: 8,
		Tune: func(_ *daemon.Config, o *daemon.Options) { fs.storeFault(&o.Store) }})
	h := d.Handler()
	l, err := r.Replica.NewLedger(ledgertest.LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ledger := l.ID().Encode()

	r.Publish(ledger, "warm-up", transferBody("warm-up", ledger, 0))
	waitVerdicts(t, r.Tool, []string{"warm-up"}, 30*time.Second)
	if got := getReadyz(t, h); got.Code != http.StatusOK {
		t.Fatalf("before the disk fills: /readyz %d %s", got.Code, got.Body)
	}

	fs.fill()
	var ids []string
	notReady := readyz{}
	stopAt := time.Now().Add(40 * time.Second)
	for n := 1; n <= 300 && notReady.Code == 0 && time.Now().Before(stopAt); n++ {
		id := fmt.Sprintf("full-%03d", n)
		r.Publish(ledger, id, transferBody(id, ledger, n))
		ids = append(ids, id)
		if n%5 != 0 {
			continue
		}
		// The batch is decided and written within a few seconds.
		poll(3*time.Second, func() bool {
			if got := getReadyz(t, h); got.Code != http.StatusOK {
				notReady = got
				return true
			}
			return false
		})
	}
	if notReady.Code == 0 {
		fs.free()
		t.Fatalf("/readyz stayed ready with the disk full after %d intents: %s", len(ids), getReadyz(t, h).Body)
	}
	why, ok := notReady.failing("store")
	if notReady.Code != http.StatusServiceUnavailable || !ok || !(strings.Contains(why, "full") || strings.Contains(why, "no space")) {
		t.Fatalf("/readyz with the disk full: %d %s; want 503 naming the store's full disk", notReady.Code, notReady.Body)
	}
	t.Logf("with the disk full after %d intents: %s", len(ids), notReady.Body)

	fs.free()
	waitVerdicts(t, r.Tool, ids, 60*time.Second)
	testutil.Eventually(t, 30*time.Second, "/readyz ready again", func() (bool, string) {
		got := getReadyz(t, h)
		return got.Code == http.StatusOK, got.Body
	})
}

// TestEmbeddedJetStreamOnFullDiskNotReadyThenRecovers puts the embedded
// NATS server's store on a small file system and fills it: JetStream's
// file store then fails every write until it is reopened. /readyz must
// turn false naming JetStream, and once space returns the server's store
// must be recovered, every acknowledged intent get its verdict and /readyz
// turn true again.
func TestEmbeddedJetStreamOnFullDiskNotReadyThenRecovers(t *testing.T) {
	r := daemontest.New(t, daemontest.Options{Seed: 32, Timeout: 3 * time.Minute, NoDaemon: true})
	data := t.TempDir()
	fs := mountTiny(t, filepath.Join(data, "nats"))
	d := r.Start(daemontest.Options{DataDir: data, MaxInflight: 8,
		Tune: func(c *daemon.Config, o *daemon.Options) { o.Embedded = nil }})
	if d.Embedded() == nil {
		t.Fatal("the daemon did not start its own NATS server")
	}
	tool, err := queue.Connect(r.Ctx, queue.ConnConfig{Embedded: d.Embedded(), Name: "tool-layer-own"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tool.Close)
	fs.onFill = func() { _ = d.Embedded().Server().ShutdownJetStream() }
	h := d.Handler()
	l, err := r.Replica.NewLedger(ledgertest.LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ledger := l.ID().Encode()
	publish := func(id string, n int) error {
		ctx, cancel := context.WithTimeout(r.Ctx, time.Second)
		defer cancel()
		_, err := tool.PublishIntent(ctx, ledger, id, transferBody(id, ledger, n), matcher.IntentHash(transferBody(id, ledger, n)))
		return err
	}

	if err := publish("warm-up", 0); err != nil {
		t.Fatal(err)
	}
	waitVerdicts(t, tool, []string{"warm-up"}, 30*time.Second)
	if got := getReadyz(t, h); got.Code != http.StatusOK {
		t.Fatalf("before the disk fills: /readyz %d %s", got.Code, got.Body)
	}

	fs.fill()
	var acked []string
	refused := 0
	notReady := readyz{}
	stopAt := time.Now().Add(40 * time.Second)
	for n := 1; n <= 300 && notReady.Code == 0 && time.Now().Before(stopAt); n++ {
		id := fmt.Sprintf("full-%03d", n)
		if err := publish(id, n); err != nil {
			refused++
		} else {
			acked = append(acked, id)
		}
		if got := getReadyz(t, h); got.Code != http.StatusOK {
			notReady = got
			break
		}
		if n%5 != 0 {
			continue
		}
		poll(3*time.Second, func() bool {
			if got := getReadyz(t, h); got.Code != http.StatusOK {
				notReady = got
				return true
			}
			return false
		})
	}
	if notReady.Code == 0 {
		fs.free()
		t.Fatalf("/readyz stayed ready with JetStream's disk full (%d intents acknowledged, %d refused): %s",
			len(acked), refused, getReadyz(t, h).Body)
	}
	why, ok := notReady.failing("embedded_jetstream")
	if notReady.Code != http.StatusServiceUnavailable || !ok {
		t.Fatalf("/readyz with JetStream's disk full: %d %s; want 503 naming the embedded JetStream", notReady.Code, notReady.Body)
	}
	t.Logf("with JetStream's disk full (%d acknowledged, %d refused): %s", len(acked), refused, why)

	fs.free()
	testutil.Eventually(t, 60*time.Second, "/readyz ready again", func() (bool, string) {
		got := getReadyz(t, h)
		return got.Code == http.StatusOK, got.Body
	})
	waitVerdicts(t, tool, acked, 60*time.Second)
}
