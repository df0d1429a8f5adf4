package daemon_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/internal/testutil"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/reconcile"
)

var strangersLong = flag.Bool("strangers-long", false, "run the 10,000-intent acceptance measurement of unconfigured canisters")

// strangersRun publishes perCanister intents for each of canisters ids the
// replica certifies missing and waits until every one is final.
type strangersRun struct {
	r   *daemontest.Rig
	d   *daemon.Daemon
	ids []string
}

func startStrangers(t *testing.T, seed int64, caps func(*daemon.Config, *daemon.Options)) *strangersRun {
	r := daemontest.New(t, daemontest.Options{Seed: seed, Timeout: 10 * time.Minute, NoDaemon: true})
	d := r.Start(daemontest.Options{MaxInflight: 64, Poll: 200 * time.Millisecond, LeaseTTL: 3 * time.Second,
		Tune: func(c *daemon.Config, o *daemon.Options) {
			c.HTTPAddr = "127.0.0.1:0"
			o.BackoffBase, o.BackoffMax = 50*time.Millisecond, 200*time.Millisecond
			if caps != nil {
				caps(c, o)
			}
		}})
	return &strangersRun{r: r, d: d}
}

func (s *strangersRun) publish(canisters []principal.Principal, perCanister int) {
	for i, c := range canisters {
		for k := range perCanister {
			id := fmt.Sprintf("s-%d-%d", i, k)
			s.r.Publish(c.Encode(), id, transferBody(id, c.Encode(), k))
			s.ids = append(s.ids, id)
		}
	}
}

// finalCount is how many of the run's intents have a final verdict in the
// daemon's store, and the reason codes seen.
func (s *strangersRun) finalCount(t *testing.T) (int, map[string]int) {
	codes := map[string]int{}
	n := 0
	for _, id := range s.ids {
		v, err := s.d.Store().LatestVerdict(context.Background(), id)
		if err != nil {
			continue
		}
		if v.Final {
			n++
		}
		if v.Reason != nil {
			codes[v.Reason.Code]++
		}
	}
	return n, codes
}

func (s *strangersRun) metrics(t *testing.T) string {
	t.Helper()
	resp, err := ledgertest.LoopbackHTTPClient().Get("http://" + s.d.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

var ledgerLabelRE = regexp.MustCompile(`ledger="([^"]*)"`)

func ledgerLabels(metrics string) map[string]bool {
	out := map[string]bool{}
	for _, m := range ledgerLabelRE.FindAllStringSubmatch(metrics, -1) {
		out[m[1]] = true
	}
	return out
}

// memNow is the process's RSS and live heap, in KiB, after a collection
// that returns freed memory to the OS.
func memNow() (rss, heap uint64) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return uint64(rssKiB()), ms.HeapInuse >> 10
}

func rssKiB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var n int
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
			return n
		}
	}
	return -1
}

// measureStrangers runs intents for canisters the replica certifies
// missing through one daemon and checks that every intent is final
// E_NO_SUCH_CANISTER and that nothing per canister is left behind.
func measureStrangers(t *testing.T, canisters, perCanister int) {
	s := startStrangers(t, 41, func(c *daemon.Config, _ *daemon.Options) { c.MaxStrangers, c.MaxStrangerOpen = 16, 8 })
	before, heapBefore := memNow()
	ids := make([]principal.Principal, canisters)
	for i := range ids {
		ids[i] = s.r.Replica.NewCanisterID()
	}
	start := time.Now()
	s.publish(ids, perCanister)
	// Polled by one count over the store (every intent is the run's); each
	// intent is checked once at the end.
	testutil.Eventually(t, 8*time.Minute, "every intent final", func() (bool, string) {
		c, err := s.d.Store().CountByStatus(context.Background())
		return err == nil && c[reconciled.StatusInvalid] == len(s.ids), fmt.Sprintf("%v %v of %d", c, err, len(s.ids))
	})
	took := time.Since(start)
	if n, codes := s.finalCount(t); n != len(s.ids) {
		t.Fatalf("%d of %d final; codes %v", n, len(s.ids), codes)
	}
	_, codes := s.finalCount(t)
	if codes[reconcile.CodeNoSuchCanister] != len(s.ids) {
		t.Fatalf("codes %v, want %d × %s", codes, len(s.ids), reconcile.CodeNoSuchCanister)
	}
	// The lease loop evicts clients without open intents at its next tick.
	testutil.Eventually(t, 30*time.Second, "clients of strangers evicted", func() (bool, string) {
		n := s.d.StrangerClients()
		return n == 0, fmt.Sprintf("%d clients of unconfigured canisters cached", n)
	})
	m := s.metrics(t)
	labels := ledgerLabels(m)
	for l := range labels {
		if l != daemon.StrangerLabel && l != "other" {
			t.Errorf("ledger label %q: an unconfigured canister minted a label value", l)
		}
	}
	if n := len(s.d.Leases().Held()); n > 16 {
		t.Errorf("%d leases held, cap 16", n)
	}
	after, heapAfter := memNow()
	t.Logf("%d intents for %d missing canisters: all final in %s; RSS %d → %d KiB, live heap %d → %d KiB (replica, NATS and daemon in one process); /metrics %d bytes, ledger labels %v; leases %d, clients %d",
		len(s.ids), canisters, took.Round(time.Millisecond), before, after, heapBefore, heapAfter, len(m), labels,
		len(s.d.Leases().Held()), s.d.StrangerClients())
}

func TestStrangersMissingCanistersAllFinalAndBounded(t *testing.T) {
	measureStrangers(t, 200, 5)
}

// TestStrangersAcceptanceLong is the acceptance measurement: 10,000
// intents for 2,000 missing canisters, and for 100 to compare.
func TestStrangersAcceptanceLong(t *testing.T) {
	if !*strangersLong {
		t.Skip("run with -strangers-long")
	}
	t.Run("100 canisters", func(t *testing.T) { measureStrangers(t, 100, 100) })
	t.Run("2000 canisters", func(t *testing.T) { measureStrangers(t, 2000, 5) })
}

// Intents of unconfigured canisters over a cap are stored unread with a
// waiting verdict, are not lost, and reach their final verdict once the
// canisters followed end. The canisters answer nothing certified at first
// (every request fails with HTTP 500), so their intents stay open.
func TestStrangersOverCapsWaitThenEnd(t *testing.T) {
	s := startStrangers(t, 42, func(c *daemon.Config, _ *daemon.Options) { c.MaxStrangers, c.MaxStrangerOpen = 2, 3 })
	var cans []principal.Principal
	for range 3 {
		id := s.r.Replica.NewCanisterID()
		s.r.Replica.SetFaults(id, ledgertest.Faults{HTTPStatus: http.StatusInternalServerError})
		cans = append(cans, id)
	}
	s.publish(cans, 5)
	// Every intent has its first verdict: at most two canisters' first
	// three intents were decided (and failed), the rest wait unread.
	testutil.Eventually(t, 30*time.Second, "a first verdict for every intent", func() (bool, string) {
		c, err := s.d.Store().CountByStatus(context.Background())
		return err == nil && c[reconciled.StatusUnreadable] == len(s.ids), fmt.Sprintf("%v %v", c, err)
	})
	_, codes := s.finalCount(t)
	if codes["E_TRANSPORT"] > 6 || codes[reconcile.CodeUnconfiguredWait] < 9 {
		t.Fatalf("codes %v: want at most 2 canisters × 3 intents decided, the rest waiting", codes)
	}
	s.d.FollowUpNow()
	testutil.Eventually(t, 30*time.Second, "at most two canisters followed", func() (bool, string) {
		l, c := len(s.d.Leases().Held()), s.d.StrangerClients()
		return l == 2 && c <= 2, fmt.Sprintf("%d leases, %d clients", l, c)
	})
	// The IC now answers: each canister is certified missing.
	for _, c := range cans {
		s.r.Replica.SetFaults(c, ledgertest.Faults{})
	}
	testutil.Eventually(t, 2*time.Minute, "every intent final", func() (bool, string) {
		s.d.FollowUpNow()
		if l, c := len(s.d.Leases().Held()), s.d.StrangerClients(); l > 2 || c > 2 {
			t.Fatalf("%d leases, %d clients: caps are 2", l, c)
		}
		n, codes := s.finalCount(t)
		return n == len(s.ids), fmt.Sprintf("%d of %d final; codes %v", n, len(s.ids), codes)
	})
	if _, codes := s.finalCount(t); codes[reconcile.CodeNoSuchCanister] != len(s.ids) {
		t.Fatalf("codes %v", codes)
	}
}
