package icrc3_test

import (
	"context"
	"testing"
	"time"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3/ledgertest"
)

func TestScratchTiming(t *testing.T) {
	cfg := ledgertest.LedgerConfig{ArchiveThreshold: 4000, ArchiveBatch: 2000, ArchiveCapacity: 40_000}
	e := newEnv(t, cfg, 100000)
	for _, ep := range []icrc3.Endpoint{icrc3.EndpointLegacy, icrc3.EndpointICRC3} {
		c := e.client(t, icrc3.ClientConfig{Endpoint: ep, Concurrency: 4})
		ctx := context.Background()
		c.Detect(ctx)
		last := time.Now()
		err := c.BlocksDesc(ctx, 0, 100000, func(p []icrc3.Block) error {
			t.Logf("%s page %d..%d after %v", ep, p[0].Index, p[len(p)-1].Index, time.Since(last))
			last = time.Now()
			return nil
		})
		t.Log(err, c.Stats())
	}
}
