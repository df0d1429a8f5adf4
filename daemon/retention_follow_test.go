package daemon_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/daemon"
	"github.com/reconciled/reconciled/daemon/daemontest"
	"github.com/reconciled/reconciled/internal/testutil"
)

// A fresh store's follower starts at now - retention: of a stream holding
// verdicts older and younger than the retention, it imports only the
// younger ones.
func TestFreshStoreImportsOnlyTheRetention(t *testing.T) {
	const retention = 3 * time.Second
	r := daemontest.New(t, daemontest.Options{Seed: 41, NoDaemon: true})
	publish := func(id string) {
		t.Helper()
		v := reconciled.Verdict{IntentID: id, Seq: 1, Status: reconciled.StatusNotYet, DecidedAt: time.Now().UTC()}
		if err := r.Tool.PublishVerdict(r.Ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		publish(fmt.Sprintf("old-%d", i))
	}
	// The stream's clock is this machine's: once the retention has passed
	// since the last old verdict, every old one is older than it.
	old := time.Now()
	testutil.Eventually(t, 10*time.Second, "the old verdicts to age past the retention", func() (bool, string) {
		return time.Since(old) > retention+100*time.Millisecond, "waiting"
	})
	for i := range 2 {
		publish(fmt.Sprintf("young-%d", i))
	}
	d := r.Start(daemontest.Options{Tune: func(c *daemon.Config, _ *daemon.Options) {
		c.Retention, c.RepublishHorizon = retention, time.Second
	}})
	st := d.Store()
	testutil.Eventually(t, 30*time.Second, "the young verdicts imported", func() (bool, string) {
		for i := range 2 {
			if _, err := st.LatestVerdict(r.Ctx, fmt.Sprintf("young-%d", i)); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	})
	// The follower hands verdicts over in stream order: had it started
	// before the young ones, the old ones would be stored by now.
	for i := range 3 {
		if v, err := st.LatestVerdict(r.Ctx, fmt.Sprintf("old-%d", i)); err == nil {
			t.Errorf("old-%d imported (%+v): the follower started before now - retention", i, v)
		}
	}
}
