package main

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"time"

	"github.com/aviate-labs/agent-go"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/family"
	"github.com/reconciled/reconciled/icphistory"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/reconcile"
)

type endpoint struct {
	name string
	ep   icrc3.Endpoint
	page uint64
}

// endpoints are the two block endpoint families a DFINITY ledger serves.
var endpoints = []endpoint{
	{"legacy2000", icrc3.EndpointLegacy, icrc3.PageLegacy},
	{"icrc3_100", icrc3.EndpointICRC3, icrc3.PageICRC3},
}

// selectEndpoints is the endpoint family named, or all of them for "".
func selectEndpoints(name string) ([]endpoint, error) {
	if name == "" {
		return endpoints, nil
	}
	for _, ep := range endpoints {
		if ep.name == name {
			return []endpoint{ep}, nil
		}
	}
	return nil, fmt.Errorf("-endpoint %q: want legacy2000 or icrc3_100", name)
}

// CaseResult is one single-intent case on one endpoint family, over runs
// cold decisions (a fresh client, engine and cache each).
type CaseResult struct {
	Endpoint string `json:"endpoint"`
	Case     string `json:"case"`
	Status   string `json:"status"`
	Block    *int64 `json:"block,omitempty"`
	Runs     int    `json:"runs"`
	Page     uint64 `json:"page"`

	LatencyMS latencyMS `json:"latency_ms"`

	// Per verdict (the mean over runs; every run reads the same).
	Queries      float64 `json:"queries"`
	BlocksClient float64 `json:"blocks_fetched"`          // blocks in pages the client received
	BlocksServed float64 `json:"blocks_served,omitempty"` // blocks the ledger and archives served (in-process ledger only)
	CPUSeconds   float64 `json:"cpu_seconds_process"`     // user+sys of the whole process, replica included

	// Bound is blocks to verify / page + search steps + 2: what an ideal
	// reader needs; QueryRatio = Queries / Bound.
	// QueriesByMethod is one run's queries by "ledger:<method>" or
	// "archive:<method>": where the queries beyond the bound went.
	QueriesByMethod map[string]uint64 `json:"queries_by_method"`

	BlocksToVerify uint64  `json:"blocks_to_verify"`
	SearchSteps    uint64  `json:"search_steps"`
	Bound          float64 `json:"query_bound"`
	QueryRatio     float64 `json:"query_ratio"`

	// MaxInFlight is the most queries one run had outstanding at once.
	MaxInFlight int `json:"max_in_flight"`

	// RTTFloorMS is what any reader needs at the injected round trip with
	// Concurrency pages in flight: (ceil(pages to verify / C) + 2) × RTT,
	// the 2 for the certified tip and the ledger's metadata. FloorRatio =
	// latency p50 / floor. Both 0 without -rtt.
	Concurrency int     `json:"concurrency"`
	RTTFloorMS  float64 `json:"rtt_floor_ms"`
	FloorRatio  float64 `json:"floor_ratio"`
}

// rttFloor is (ceil(pages / conc) + 2) round trips.
func rttFloor(blocks, page uint64, conc int, rtt time.Duration) time.Duration {
	if conc < 1 || page == 0 {
		return 0
	}
	pages := (blocks + page - 1) / page
	rounds := (pages + uint64(conc) - 1) / uint64(conc)
	return time.Duration(rounds+2) * rtt
}

// concurrency is the C of the clients reading endpoint family ep.
func (sc *scenario) concurrency(ep icrc3.Endpoint) int {
	switch {
	case sc.conc > 0:
		return sc.conc
	case ep == icrc3.EndpointICRC3:
		return icrc3history.ConcurrencyICRC3
	}
	return icrc3history.ConcurrencyLegacy
}

// newClient is a fresh client for the scenario's ledger: nothing detected,
// no archive known, so every verdict pays for discovery as a cold one does.
func (sc *scenario) newClient(ag *agent.Agent, ep icrc3.Endpoint) (*icrc3history.Client, error) {
	return icrc3history.NewClient(icrc3history.ClientConfig{Agent: ag, Ledger: sc.ledgerID, RootKey: sc.RootKey, Endpoint: ep, Concurrency: sc.conc})
}

func (sc *scenario) newEngine(c *icrc3history.Client, cache reconcile.BlockCache) *reconcile.Engine {
	var h reconcile.History = c
	if sc.icp != nil {
		// As the daemon reads it: the family told by the endpoints.
		h = family.Choose(c)
	}
	return reconcile.NewEngine(func(ledger string) (reconcile.History, reconcile.LedgerConfig, error) {
		if ledger != sc.Ledger {
			return nil, reconcile.LedgerConfig{}, &reconcile.UnknownLedgerError{Ledger: ledger}
		}
		return h, reconcile.LedgerConfig{}, nil
	}, cache, nil)
}

// runICPCases decides the single-intent cases on an ICP-style ledger of
// cfg's shape, reported under the endpoint "icp", and unless
// cfg.SkipBaseline syncs it as ICP Rosetta does (sequential, in dir).
func runICPCases(ctx context.Context, cfg config, dir string) ([]CaseResult, *BaselineResult, error) {
	sc, err := buildScenarioOn(cfg.Blocks, cfg.Span, cfg.Seed, true)
	if err != nil {
		return nil, nil, err
	}
	defer sc.close()
	sc.injectRTT(cfg.RTT)
	sc.conc, sc.rtt = cfg.Concurrency, cfg.RTT
	ag, err := sc.newAgent()
	if err != nil {
		return nil, nil, err
	}
	var out []CaseResult
	for _, name := range caseNames {
		r, err := sc.runCase(ctx, ag, icrc3.EndpointAuto, "icp", icphistory.Page, name, cfg.Runs)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, r)
	}
	if cfg.SkipBaseline {
		return out, nil, nil
	}
	// One 2000-block window at a time from the certified tip down, through
	// query_encoded_blocks and the archives' get_encoded_blocks.
	c, err := sc.newBaselineClient(ag, icrc3.EndpointAuto, styleSequential)
	if err != nil {
		return nil, nil, err
	}
	phase := startMemPhase()
	b, err := sc.runBaselineOn(ctx, icphistory.New(c.Conn, c.Concurrency()), c, dir, "icp", styleSequential)
	if err != nil {
		return nil, nil, fmt.Errorf("baseline: %w", err)
	}
	b.PeakRSS, b.PeakRSSRise = phase.peak()
	removeBaselineFile(dir, "icp", styleSequential)
	return out, &b, nil
}

// check refuses a verdict that is not the scenario's truth: a benchmark of
// wrong answers measures nothing.
func (sc *scenario) check(name string, v reconciled.Verdict) error {
	if name == "absent" {
		if v.Status != reconciled.StatusAbsent {
			return fmt.Errorf("case %s: verdict %s (reason %+v), want absent", name, v.Status, v.Reason)
		}
		return nil
	}
	if v.Status != reconciled.StatusFound || v.Block == nil || uint64(v.Block.Index) != sc.Found[name] {
		return fmt.Errorf("case %s: verdict %s %+v (reason %+v), want found at %d", name, v.Status, v.Block, v.Reason, sc.Found[name])
	}
	return nil
}

// runCase decides one case runs times, cold each time.
func (sc *scenario) runCase(ctx context.Context, ag *agent.Agent, ep icrc3.Endpoint, epName string, page uint64, name string, runs int) (CaseResult, error) {
	r := CaseResult{Endpoint: epName, Case: name, Runs: runs, Page: page}
	in := sc.cases[name]
	lat := make([]time.Duration, 0, runs)
	var cpu time.Duration
	var queries, fetched, served uint64
	for i := 0; i < runs; i++ {
		c, err := sc.newClient(ag, ep)
		if err != nil {
			return r, err
		}
		e := sc.newEngine(c, reconcile.NewMemCache())
		before := sc.blocksServed()
		cpu0 := cpuTime()
		t0 := time.Now()
		v, err := e.Decide(ctx, in)
		el := time.Since(t0)
		cpu += cpuTime() - cpu0
		if err != nil {
			return r, fmt.Errorf("case %s on %s: %w", name, epName, err)
		}
		if err := sc.check(name, v); err != nil {
			return r, fmt.Errorf("%s: %w", epName, err)
		}
		st := c.Stats()
		lat = append(lat, el)
		queries += st.Total
		fetched += st.Blocks
		served += sc.blocksServed() - before
		r.QueriesByMethod = st.Queries
		r.MaxInFlight = max(r.MaxInFlight, st.MaxInFlight)
		r.Status = string(v.Status)
		if v.Block != nil {
			b := int64(v.Block.Index)
			r.Block = &b
		}
	}
	p50, p99, mx := percentiles(lat)
	r.LatencyMS = latencyMS{ms(p50), ms(p99), ms(mx)}
	n := float64(runs)
	r.Queries, r.BlocksClient, r.BlocksServed = float64(queries)/n, float64(fetched)/n, float64(served)/n
	r.CPUSeconds = cpu.Seconds() / n

	// What must be read: from the tip down to the match, or for absent to
	// the block below the window (its ts proves the window is covered).
	tip := sc.Blocks - 1
	low := sc.Window[0] - min(sc.Window[0], 1)
	if name != "absent" {
		low = sc.Found[name]
	}
	r.BlocksToVerify = tip - low + 1
	r.SearchSteps = searchSteps(tip+1-low, page)
	r.Bound = math.Ceil(float64(r.BlocksToVerify)/float64(page)) + float64(r.SearchSteps) + 2
	r.QueryRatio = r.Queries / r.Bound
	r.Concurrency = sc.concurrency(ep)
	if floor := rttFloor(r.BlocksToVerify, page, r.Concurrency, sc.rtt); floor > 0 {
		r.RTTFloorMS = ms(floor)
		r.FloorRatio = r.LatencyMS.P50 / r.RTTFloorMS
	}
	return r, nil
}

// searchSteps is the probes of a galloping search over distance blocks in
// page-sized steps followed by a bisection to page precision: with
// k = ceil(log2(distance/page)), k+1 probes to overshoot and k-1 halvings
// back. Within one page there is nothing to search.
func searchSteps(distance, page uint64) uint64 {
	if distance <= page {
		return 0
	}
	k := uint64(bits.Len64((distance - 1) / page))
	return 2 * k
}

func percentiles(d []time.Duration) (p50, p99, mx time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return at(0.50), at(0.99), s[len(s)-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// oneScan is the blocks a single cold decision of the earliest window in
// ins reads: the reference for what many intents should cost together.
func (sc *scenario) oneScan(ctx context.Context, ag *agent.Agent, ins []*matcher.Intent) (uint64, error) {
	earliest := ins[0]
	for _, in := range ins {
		if in.Stamp() < earliest.Stamp() {
			earliest = in
		}
	}
	// An intent with the earliest stamp that matches nothing reads its
	// whole window and everything above it.
	probe, err := matcher.ParseIntent(transferIntentJSON("one-scan", sc.Ledger, earliest.Stamp(), 7, []byte("never-sent"), carol))
	if err != nil {
		return 0, err
	}
	c, err := sc.newClient(ag, icrc3.EndpointAuto)
	if err != nil {
		return 0, err
	}
	if _, err := sc.newEngine(c, reconcile.NewMemCache()).Decide(ctx, probe); err != nil {
		return 0, err
	}
	return c.Stats().Blocks, nil
}
