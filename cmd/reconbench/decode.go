package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
)

// DecodeResult is the per-core cost of the hot path on one captured page:
// decode the Candid reply, hash every block (the decoder hashes while
// decoding) and run the matcher on every block.
type DecodeResult struct {
	Endpoint     string  `json:"endpoint"`
	PageBlocks   int     `json:"page_blocks"`
	PageBytes    int     `json:"page_bytes"`
	Blocks       uint64  `json:"blocks"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	BlocksPerSec float64 `json:"blocks_per_cpu_second"` // best trial
	MedianPerSec float64 `json:"median_blocks_per_cpu_second"`
}

// capturePage fetches the raw reply of one page of the ledger's own
// (unarchived) blocks, as the client receives it.
func (sc *scenario) capturePage(ctx context.Context, ag *agent.Agent, ep icrc3.Endpoint, page uint64) ([]byte, error) {
	n := sc.Blocks
	start := n - min(n, page)
	var arg []byte
	var err error
	switch ep {
	case icrc3.EndpointLegacy:
		type req struct {
			Start  uint64 `ic:"start"`
			Length uint64 `ic:"length"`
		}
		arg, err = candid.Marshal([]any{req{start, page}})
	default:
		type req struct {
			Start  idl.Nat `ic:"start"`
			Length idl.Nat `ic:"length"`
		}
		arg, err = candid.Marshal([]any{[]req{{idl.NewNat(start), idl.NewNat(page)}}})
	}
	if err != nil {
		return nil, fmt.Errorf("capture %s page: encode: %w", ep, err)
	}
	r, err := ag.CreateRawAPIRequest(agent.RequestTypeQuery, sc.ledgerID, string(ep), arg)
	if err != nil {
		return nil, fmt.Errorf("capture %s page: %w", ep, err)
	}
	var out []byte
	if err := r.QueryWithContext(ctx, &out, true); err != nil {
		return nil, fmt.Errorf("capture %s page: %w", ep, err)
	}
	return out, nil
}

// decodePage decodes (and hashes) one captured page.
func decodePage(ep icrc3.Endpoint, raw []byte) ([]icrc3.Block, error) {
	if ep == icrc3.EndpointLegacy {
		r, err := icrc3.DecodeLegacyGetBlocks(raw)
		if err != nil {
			return nil, err
		}
		return r.Blocks, nil
	}
	r, err := icrc3.DecodeGetBlocksResult(raw)
	if err != nil {
		return nil, err
	}
	return r.Blocks, nil
}

// decodeTrials splits a decode measurement: on a shared machine a trial
// can be slowed by others (cache, hyper-threads); the best trial is the
// least disturbed, the median the typical.
const decodeTrials = 5

// measureDecode runs decode+hash+match on raw for about d of wall time on
// one goroutine, in decodeTrials trials, and reports blocks per CPU second
// of the process, so the garbage collector's work is charged to the blocks.
// Nothing else runs meanwhile, and the trials run with GOMAXPROCS 1, as
// go test -cpu 1 does: with a second P idle the collector runs an idle
// mark worker on it for as long as each cycle marks, CPU time no work
// needed that made the figure a measure of idle cores rather than of the
// blocks (at two Ps the legacy page measured 367,000-464,000 blocks a
// second where one core did 540,000).
func measureDecode(ep icrc3.Endpoint, epName string, raw []byte, in *matcher.Intent, d time.Duration) (DecodeResult, error) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	res := DecodeResult{Endpoint: epName, PageBytes: len(raw)}
	first, err := decodePage(ep, raw)
	if err != nil {
		return res, fmt.Errorf("decode %s page: %w", epName, err)
	}
	if len(first) == 0 {
		return res, fmt.Errorf("decode %s page: no blocks", epName)
	}
	res.PageBlocks = len(first)
	rates := make([]float64, 0, decodeTrials)
	for trial := 0; trial < decodeTrials; trial++ {
		runtime.GC()
		c0 := cpuTime()
		var blocks uint64
		matches := 0
		deadline := time.Now().Add(d / decodeTrials)
		for time.Now().Before(deadline) {
			bl, err := decodePage(ep, raw)
			if err != nil {
				return res, err
			}
			for i := range bl {
				if matcher.Match(in, &bl[i], matcher.LedgerRules{}).Match {
					matches++
				}
			}
			blocks += uint64(len(bl))
		}
		cpu := (cpuTime() - c0).Seconds()
		if matches != 0 {
			return res, fmt.Errorf("decode %s page: the benchmark intent matched %d generated blocks", epName, matches)
		}
		res.Blocks += blocks
		res.CPUSeconds += cpu
		if cpu > 0 {
			rates = append(rates, float64(blocks)/cpu)
		}
	}
	if len(rates) == 0 {
		return res, fmt.Errorf("decode %s page: no CPU time measured", epName)
	}
	sort.Float64s(rates)
	res.BlocksPerSec = rates[len(rates)-1]
	res.MedianPerSec = rates[len(rates)/2]
	return res, nil
}
