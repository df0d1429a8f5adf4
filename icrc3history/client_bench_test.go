package icrc3history_test

import (
	"context"
	"testing"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
)

// BenchmarkReadVerify reads a 100,000-block history (archived in 2,000-block
// batches over several archives, as ckBTC's settings would) end to end over
// loopback: certified tip, every page, chain verification. It reports
// verified blocks per second and the queries one full read costs through
// each endpoint family.
func BenchmarkReadVerify(b *testing.B) {
	const n = 100_000
	cfg := ledgertest.LedgerConfig{ArchiveThreshold: 4000, ArchiveBatch: 2000, ArchiveCapacity: 40_000}
	e := newEnv(b, cfg, n)
	for _, ep := range []icrc3.Endpoint{icrc3.EndpointICRC3, icrc3.EndpointLegacy} {
		b.Run(string(ep), func(b *testing.B) {
			ctx := context.Background()
			var queries uint64
			for b.Loop() {
				c := e.client(b, icrc3history.ClientConfig{Endpoint: ep})
				if _, err := c.Detect(ctx); err != nil {
					b.Fatal(err)
				}
				before := c.Stats().Total
				tip, err := c.Tip(ctx)
				if err != nil {
					b.Fatal(err)
				}
				v := icrc3.NewVerifier(tip.Anchor())
				if err := c.BlocksDesc(ctx, 0, tip.Len(), func(p []icrc3.Block) error { return v.PushPage(p) }); err != nil {
					b.Fatal(err)
				}
				if !v.Done() || v.Checked() != n {
					b.Fatalf("verified %d of %d", v.Checked(), n)
				}
				queries += c.Stats().Total - before
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
			b.ReportMetric(float64(queries)/float64(b.N), "queries/100k-blocks")
		})
	}
}
