package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
)

// TestMain lets the test binary serve as the ledger child process, as the
// command does: startLedgerChild re-executes os.Executable with
// -serve-ledger.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-serve-ledger" {
		cfg, _, err := parseFlags(os.Args[1:])
		if err == nil {
			err = serveLedger(cfg, os.Stdin, os.Stdout)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "reconbench ledger:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// smokeConfig is the whole pipeline at a size CI affords: 20,000 blocks
// over ten days put 2,000 in the window.
func smokeConfig() config {
	cfg := defaultConfig()
	cfg.Blocks, cfg.Runs, cfg.Intents = 20_000, 2, 150
	cfg.DecodeTime = 100 * time.Millisecond
	cfg.Timeout = 10 * time.Minute
	return cfg
}

// checkWalkRead holds a case's fetched blocks to what the walk may read:
// every block it must verify, plus at most 2·C pages (the client keeps C
// in flight and C more fetched but not yet verified when the walk stops),
// and so less than the full sync's synced blocks whenever that bound
// leaves room.
func checkWalkRead(t *testing.T, c CaseResult, baseline uint64) {
	t.Helper()
	limit := c.BlocksToVerify + 2*uint64(c.Concurrency)*c.Page
	switch {
	case c.BlocksClient < float64(c.BlocksToVerify):
		t.Errorf("%s %s fetched %.0f blocks, fewer than the %d it must verify", c.Endpoint, c.Case, c.BlocksClient, c.BlocksToVerify)
	case c.BlocksClient > float64(limit):
		t.Errorf("%s %s fetched %.0f blocks, more than the %d to verify plus %d pages of %d", c.Endpoint, c.Case, c.BlocksClient, c.BlocksToVerify, 2*c.Concurrency, c.Page)
	case limit < baseline && c.BlocksClient >= float64(baseline):
		t.Errorf("%s %s fetched %.0f blocks, as many as the full sync's %d", c.Endpoint, c.Case, c.BlocksClient, baseline)
	}
}

// TestSmoke runs every phase at small size and checks that the figures
// are produced and sane. It asserts no timing: only counts that follow from
// the design (a verdict reads less than a full sync; many intents share one
// scan) and the shape of the table and JSON.
func TestSmoke(t *testing.T) {
	var log bytes.Buffer
	rep, err := run(context.Background(), smokeConfig(), &log)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if rep.Ledger.Host != "child" || rep.Ledger.RSSBytes == 0 {
		t.Errorf("ledger host %q, resident %d bytes: want a child process", rep.Ledger.Host, rep.Ledger.RSSBytes)
	}
	if rep.Ledger.Blocks != 20_000 {
		t.Errorf("ledger holds %d blocks, want 20000", rep.Ledger.Blocks)
	}
	if w := rep.Ledger.WindowBlocks; w < 1_800 || w > 2_600 {
		t.Errorf("window holds %d blocks, want about 2000", w)
	}
	if len(rep.Cases) != (len(endpoints)+1)*len(caseNames) {
		t.Fatalf("%d cases, want %d (the ICRC endpoints and the ICP ledger)", len(rep.Cases), (len(endpoints)+1)*len(caseNames))
	}
	for _, c := range rep.Cases {
		if c.Endpoint == "icp" {
			// Only a sequential baseline for the ICP family: a verdict
			// reads tip..window in 2000-block pages, as the legacy endpoint
			// does, plus the family probe and the certified minting account
			// of a cold client (the bound's +2 counts only the tip).
			// A cold walk asks the ledger for up to C pages before it
			// knows where the window lies (C−1 may go unused) or which
			// archive holds them (each archived one is then asked of its
			// archive too).
			if c.Queries <= 0 || c.Queries > c.Bound+3+2*float64(c.Concurrency) {
				t.Errorf("icp %s: %.1f queries %v, bound %.0f, C %d", c.Case, c.Queries, c.QueriesByMethod, c.Bound, c.Concurrency)
			}
			b := rep.baselineStyle("icp", styleSequential)
			if b == nil {
				t.Fatal("no sequential baseline for the ICP ledger")
			}
			checkWalkRead(t, c, b.BlocksClient)
			t.Logf("icp %s: %.1f queries %v, bound %.0f", c.Case, c.Queries, c.QueriesByMethod, c.Bound)
			continue
		}
		b := rep.baseline(c.Endpoint)
		if b == nil {
			t.Fatalf("no baseline for %s", c.Endpoint)
		}
		if b.Blocks != rep.Ledger.Blocks || b.BlocksClient < rep.Ledger.Blocks {
			t.Errorf("baseline %s synced %d blocks (fetched %d), want all %d", b.Endpoint, b.Blocks, b.BlocksClient, rep.Ledger.Blocks)
		}
		checkWalkRead(t, c, b.BlocksClient)
		if c.Queries <= 0 || c.Queries > float64(b.Queries) {
			t.Errorf("%s %s made %.0f queries, baseline %d", c.Endpoint, c.Case, c.Queries, b.Queries)
		}
		// Fewer queries than pages of what must be verified means the
		// count (or the verdict) is wrong.
		if pages := (c.BlocksToVerify + c.Page - 1) / c.Page; c.Queries < float64(pages) {
			t.Errorf("%s %s made %.0f queries for %d blocks to verify in pages of %d", c.Endpoint, c.Case, c.Queries, c.BlocksToVerify, c.Page)
		}
		if c.LatencyMS.P50 <= 0 || c.LatencyMS.P50 > c.LatencyMS.Max {
			t.Errorf("%s %s latency %+v", c.Endpoint, c.Case, c.LatencyMS)
		}
	}
	// The sequential baseline reads the whole chain one 2000-block window
	// at a time: at least a query per window, and the same verdicts.
	seq := rep.baselineStyle("legacy2000", styleSequential)
	if seq == nil || len(rep.Baseline) != len(endpoints)+2 {
		t.Fatalf("%d baselines, sequential legacy %v: want one per ICRC family, a sequential legacy one and the ICP ledger's", len(rep.Baseline), seq != nil)
	}
	for _, s := range []*BaselineResult{seq, rep.baselineStyle("icp", styleSequential)} {
		if windows := (rep.Ledger.Blocks + 1999) / 2000; s.Blocks != rep.Ledger.Blocks || s.BlocksClient < rep.Ledger.Blocks || s.Queries < windows {
			t.Errorf("sequential %s baseline synced %d blocks (fetched %d) in %d queries, want all %d in at least %d",
				s.Endpoint, s.Blocks, s.BlocksClient, s.Queries, rep.Ledger.Blocks, windows)
		}
	}
	for name, v := range rep.baseline("legacy2000").Verdicts {
		if seq.Verdicts[name] != v {
			t.Errorf("case %s: sequential baseline says %s, concurrent %s", name, seq.Verdicts[name], v)
		}
	}
	if rep.Many == nil {
		t.Fatal("no many-intents result")
	}
	// At most 1.2 scans, or one scan and the pages a cold walk may ask for
	// past a near window (C legacy pages), which on a chain this small is
	// more than a fifth of a scan.
	if m := rep.Many; m.OneScan == 0 || m.ScanRatio <= 0 ||
		m.BlocksClient > max(m.OneScan*12/10, m.OneScan+uint64(icrc3history.ConcurrencyLegacy)*2000) {
		t.Errorf("%d intents fetched %d blocks, one scan %d (ratio %.2f): want at most 1.2 scans or one and %d pages", m.Intents, m.BlocksClient, m.OneScan, m.ScanRatio, icrc3history.ConcurrencyLegacy)
	}
	// The backlog run decides the same intents from a new daemon's start:
	// its clock starts after the publishes, so every figure is its own.
	if q := rep.Queued; q == nil || !q.Queued || q.Intents != rep.Many.Intents || q.IntentsPerS <= 0 ||
		q.FirstVerdictMS <= 0 || q.FirstVerdictMS > q.Seconds*1000 || q.LatencyMS.Max > q.Seconds*1000+1 {
		t.Errorf("queued run: %+v", q)
	}
	// A share of the cores: some CPU was spent, and not more than every
	// core for the whole span (with room for the clocks' granularity: the
	// ledger's CPU is read in 10 ms ticks).
	for _, m := range []*ManyResult{rep.Many, rep.Queued} {
		if m != nil && (m.CoresBusy <= 0 || m.CoresBusy > 1.25) {
			t.Errorf("burst (queued %t): cores busy %.2f, CPU %.2f s and the ledger's %.2f s over %.3f s", m.Queued, m.CoresBusy, m.CPUSeconds, m.LedgerCPUSeconds, m.Seconds)
		}
	}
	for _, d := range rep.Decode {
		if d.Blocks == 0 || d.BlocksPerSec <= 0 || d.PageBlocks == 0 {
			t.Errorf("decode %s: %+v", d.Endpoint, d)
		}
	}
	if len(rep.Goals) != 7 {
		t.Errorf("%d goals evaluated, want 7", len(rep.Goals))
	}

	var table bytes.Buffer
	if err := rep.writeTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RECONCILED", "BASELINE", "legacy2000 absent", "icrc3_100 start", "one scan", "goals:"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := rep.writeJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("JSON does not read back: %v", err)
	}
	if len(back.Cases) != len(rep.Cases) || len(back.Baseline) != len(rep.Baseline) || back.Many == nil ||
		back.Cases[0].BlocksClient != rep.Cases[0].BlocksClient {
		t.Errorf("JSON lost figures: %d cases, %d baselines", len(back.Cases), len(back.Baseline))
	}
}

// TestInprocLedger runs the verdict cases with the ledger in this process,
// where the ledger's own counters are read too.
func TestInprocLedger(t *testing.T) {
	cfg := smokeConfig()
	cfg.Blocks, cfg.Runs, cfg.Intents, cfg.SkipBaseline, cfg.Ledger = 5_000, 1, 0, true, "inproc"
	cfg.ICP = false // TestSmoke measures the ICP ledger
	cfg.DecodeTime = 20 * time.Millisecond
	var log bytes.Buffer
	rep, err := run(context.Background(), cfg, &log)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if len(rep.Cases) != len(endpoints)*len(caseNames) || rep.Many != nil || len(rep.Baseline) != 0 {
		t.Fatalf("%d cases, many %v, %d baselines: want only the cases", len(rep.Cases), rep.Many != nil, len(rep.Baseline))
	}
	for _, c := range rep.Cases {
		// The ledger serves at least what the client received.
		if c.BlocksServed < c.BlocksClient || c.BlocksClient == 0 {
			t.Errorf("%s %s: ledger served %.0f blocks, client received %.0f", c.Endpoint, c.Case, c.BlocksServed, c.BlocksClient)
		}
	}
}

// TestICPCasesCountWhatTheyRead: the ICP family's verdicts report the
// blocks they received and read pages as many at a time as the round-trip
// floor assumes, with the client's default concurrency as with a set one.
func TestICPCasesCountWhatTheyRead(t *testing.T) {
	cfg := smokeConfig()
	// A window of 8,000 blocks: four pages below the tip's.
	cfg.Runs, cfg.RTT, cfg.Span, cfg.SkipBaseline = 1, 5*time.Millisecond, 60*time.Hour, true
	for _, conc := range []int{0, 2} {
		cfg.Concurrency = conc
		cases, _, err := runICPCases(context.Background(), cfg, t.TempDir())
		if err != nil {
			t.Fatalf("concurrency %d: %v", conc, err)
		}
		for _, c := range cases {
			tag := fmt.Sprintf("concurrency %d, icp %s", conc, c.Case)
			if c.BlocksClient < float64(c.BlocksToVerify) {
				t.Errorf("%s: %.0f blocks fetched, fewer than the %d it must verify", tag, c.BlocksClient, c.BlocksToVerify)
			}
			want := conc
			if conc == 0 {
				want = icrc3history.ConcurrencyLegacy
			}
			if c.Concurrency != want || c.RTTFloorMS <= 0 || c.FloorRatio <= 0 {
				t.Errorf("%s: C=%d, floor %.0f ms, ratio %.2f: want C=%d and a floor", tag, c.Concurrency, c.RTTFloorMS, c.FloorRatio, want)
			}
			// The tip's page is read alone; further pages together.
			if pages := (c.BlocksToVerify + c.Page - 1) / c.Page; pages >= 3 && c.MaxInFlight < 2 {
				t.Errorf("%s: %d pages to verify, at most %d queries in flight", tag, pages, c.MaxInFlight)
			}
		}
	}
}

// TestBaselineRefusesForgedChain: a node that alters one block in its
// replies must stop the baseline's sync; an unverified mirror would answer
// from forged history.
func TestBaselineRefusesForgedChain(t *testing.T) {
	sc, err := buildScenario(5_000, 240*time.Hour, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.close()
	altered := sc.Blocks - 10 // held by the ledger itself, not an archive
	sc.srv.SetFaults(sc.ledgerID, ledgertest.Faults{AlterBlock: altered + 1})
	ag, err := sc.newAgent()
	if err != nil {
		t.Fatal(err)
	}
	c, err := sc.newClient(ag, icrc3.EndpointLegacy)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sc.runBaseline(context.Background(), c, t.TempDir(), "legacy2000", styleConcurrent)
	if want := fmt.Sprintf("block %d does not chain", altered+1); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("baseline over an altered block %d: %v, want an error with %q", altered, err, want)
	}
}

// TestRTTInjected: -rtt puts the latency switch on the ledger and every
// archive, so each request of either side pays the round trip.
func TestRTTInjected(t *testing.T) {
	sc, err := buildScenario(5_000, 240*time.Hour, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.close()
	sc.injectRTT(70 * time.Millisecond)
	ids := []principal.Principal{sc.ledger.ID()}
	for _, a := range sc.ledger.Archives() {
		ids = append(ids, a.ID)
	}
	if len(ids) < 2 {
		t.Fatalf("%d canisters: want the ledger and an archive", len(ids))
	}
	for _, id := range ids {
		if f := sc.srv.Faults(id); f.Latency != 70*time.Millisecond {
			t.Errorf("canister %s: latency %s, want 70ms", id, f.Latency)
		}
	}
}

// TestRTTFloor pins the round-trip floor: (ceil(pages / C) + 2) × RTT.
func TestRTTFloor(t *testing.T) {
	const rtt = 100 * time.Millisecond
	for _, c := range []struct {
		blocks, page uint64
		conc         int
		want         time.Duration
	}{
		{100_000, 2000, 4, 15 * rtt}, {104_001, 2000, 4, 16 * rtt}, {2000, 2000, 4, 3 * rtt}, {1, 100, 1, 3 * rtt},
		{1300, 100, 4, 6 * rtt}, {102_011, 100, 4, 258 * rtt}, {0, 2000, 4, 2 * rtt},
	} {
		if got := rttFloor(c.blocks, c.page, c.conc, rtt); got != c.want {
			t.Errorf("rttFloor(%d, %d, %d) = %s, want %s", c.blocks, c.page, c.conc, got, c.want)
		}
	}
}

// TestSearchSteps pins the search-step count of the query bound.
func TestSearchSteps(t *testing.T) {
	for _, c := range []struct{ distance, page, want uint64 }{
		{50, 100, 0}, {100, 100, 0}, {101, 100, 2}, {200, 100, 2}, {201, 100, 4}, {400, 100, 4}, {401, 100, 6},
		{100_000, 2000, 12}, {100_000, 100, 20},
	} {
		if got := searchSteps(c.distance, c.page); got != c.want {
			t.Errorf("searchSteps(%d, %d) = %d, want %d", c.distance, c.page, got, c.want)
		}
	}
}

// BenchmarkPipeline is the smoke size as a benchmark, reporting the
// figures the goals are stated in (go test -bench Pipeline -benchtime 1x).
func BenchmarkPipeline(b *testing.B) {
	for i := 0; i < b.N; i++ {
		rep, err := run(context.Background(), smokeConfig(), &bytes.Buffer{})
		if err != nil {
			b.Fatal(err)
		}
		for _, g := range rep.Goals {
			switch {
			case strings.HasPrefix(g.Name, "verdict vs"):
				b.ReportMetric(g.Achieved, "x-faster-than-full-sync")
			case strings.HasPrefix(g.Name, "queries per"):
				b.ReportMetric(g.Achieved, "queries/bound")
			case strings.Contains(g.Name, "one scan"):
				b.ReportMetric(g.Achieved, "scans/intents")
			case strings.HasPrefix(g.Name, "decode"):
				b.ReportMetric(g.Achieved, "blocks/s/core")
			case strings.HasPrefix(g.Name, "peak RSS"):
				b.ReportMetric(g.Achieved, "MiB-peak-rss")
			}
		}
	}
}

// TestEndpointSelectsOneFamily: -endpoint measures the cases and baselines
// of one endpoint family only, and refuses a name it does not know.
func TestEndpointSelectsOneFamily(t *testing.T) {
	if _, err := selectEndpoints("get_blocks"); err == nil {
		t.Fatal("-endpoint get_blocks accepted")
	}
	cfg := smokeConfig()
	cfg.Blocks, cfg.Runs, cfg.Intents, cfg.Ledger, cfg.ICP = 5_000, 1, 0, "inproc", false
	cfg.DecodeTime = 20 * time.Millisecond
	cfg.Endpoint = "legacy2000"
	var log bytes.Buffer
	rep, err := run(context.Background(), cfg, &log)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if len(rep.Cases) != len(caseNames) || len(rep.Decode) != 1 || len(rep.Baseline) != 2 {
		t.Fatalf("%d cases, %d decode figures, %d baselines: want one family's", len(rep.Cases), len(rep.Decode), len(rep.Baseline))
	}
	for _, c := range rep.Cases {
		if c.Endpoint != "legacy2000" {
			t.Errorf("case %s measured on %s", c.Case, c.Endpoint)
		}
	}
	for _, b := range rep.Baseline {
		if b.Endpoint != "legacy2000" {
			t.Errorf("baseline %s on %s", b.Style, b.Endpoint)
		}
	}
}

// TestRTTReachesEveryArchive: -rtt holds every request concerning the
// ledger or one of its archives, on the ICP-style ledger too, whose archives
// are its own rather than its inner ledger's.
func TestRTTReachesEveryArchive(t *testing.T) {
	for _, icp := range []bool{false, true} {
		sc, err := buildScenarioOn(20_000, 240*time.Hour, 1, icp)
		if err != nil {
			t.Fatal(err)
		}
		sc.injectRTT(7 * time.Millisecond)
		// The archives as the replica itself lists them, not through the
		// scenario's own choice of list.
		archives := sc.ledger.Archives()
		if icp {
			archives = sc.icp.Archives()
		}
		ids := []principal.Principal{sc.ledger.ID()}
		for _, a := range archives {
			ids = append(ids, a.ID)
		}
		if len(ids) < 2 {
			t.Fatalf("icp=%v: no archives to check", icp)
		}
		for _, id := range ids {
			if f := sc.srv.Faults(id); f.Latency != 7*time.Millisecond {
				t.Errorf("icp=%v: canister %s has latency %s, want 7ms", icp, id, f.Latency)
			}
		}
		if err := sc.close(); err != nil {
			t.Fatal(err)
		}
	}
}

// -burst-cpuprofile profiles each burst alone, its samples labelled by
// side, beside allocation profiles of its start and end; it cannot run
// with -cpuprofile, since the runtime holds one CPU profile at a time.
func TestBurstProfiles(t *testing.T) {
	if _, _, err := parseFlags([]string{"-cpuprofile", "a", "-burst-cpuprofile", "b"}); err == nil {
		t.Error("-cpuprofile with -burst-cpuprofile accepted")
	}
	cfg := smokeConfig()
	// Enough intents that the daemon's side is sampled at 100 Hz.
	cfg.Blocks, cfg.Runs, cfg.Intents, cfg.SkipBaseline, cfg.Ledger = 5_000, 1, 150, true, "inproc"
	cfg.ICP, cfg.DecodeTime = false, 20*time.Millisecond
	cfg.BurstProfile = filepath.Join(t.TempDir(), "burst.prof")
	var log bytes.Buffer
	if _, err := run(context.Background(), cfg, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	for _, p := range []string{cfg.BurstProfile, queuedProfile(cfg.BurstProfile)} {
		for _, f := range []string{p, p + ".heap0", p + ".heap1"} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			z, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			raw, err := io.ReadAll(z)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			// The CPU profile's string table (field 6 of the profile
			// message, each entry length-prefixed) holds the labels its
			// samples carry.
			if f == p {
				for _, s := range []string{"phase", "burst", "side", "daemon"} {
					if !bytes.Contains(raw, append([]byte{6<<3 | 2, byte(len(s))}, s...)) {
						t.Errorf("%s: no %q in its string table", f, s)
					}
				}
			}
		}
	}
}

// -bursts runs the burst and its queued twin that many times, each with a
// new daemon, and reports the run of median rate with the spread.
func TestBurstsReportTheMedianRun(t *testing.T) {
	if _, _, err := parseFlags([]string{"-bursts", "0"}); err == nil {
		t.Error("-bursts 0 accepted")
	}
	runs := []ManyResult{{IntentsPerS: 900}, {IntentsPerS: 1100}, {IntentsPerS: 700}, {IntentsPerS: 1000}}
	if m := medianRun(runs); m.IntentsPerS != 900 {
		t.Errorf("median of 700, 900, 1000, 1100: %.0f, want the lower middle 900", m.IntentsPerS)
	}
	if lo, med, hi := spread(runs[:3], func(m ManyResult) float64 { return m.IntentsPerS }); lo != 700 || med != 900 || hi != 1100 {
		t.Errorf("spread %.0f/%.0f/%.0f, want 700/900/1100", lo, med, hi)
	}
	cfg := smokeConfig()
	cfg.Blocks, cfg.Runs, cfg.Intents, cfg.Bursts, cfg.SkipBaseline, cfg.Ledger = 5_000, 1, 40, 3, true, "inproc"
	cfg.ICP, cfg.DecodeTime = false, 20*time.Millisecond
	var log bytes.Buffer
	rep, err := run(context.Background(), cfg, &log)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if len(rep.ManyRuns) != 3 || len(rep.QueuedRuns) != 3 {
		t.Fatalf("%d live and %d queued bursts, want 3 each", len(rep.ManyRuns), len(rep.QueuedRuns))
	}
	for _, c := range []struct {
		got  *ManyResult
		runs []ManyResult
	}{{rep.Many, rep.ManyRuns}, {rep.Queued, rep.QueuedRuns}} {
		_, med, _ := spread(c.runs, func(m ManyResult) float64 { return m.IntentsPerS })
		if c.got == nil || c.got.IntentsPerS != med || c.got.Intents != 40 {
			t.Errorf("reported burst %+v, want the median rate %.0f of %d runs", c.got, med, len(c.runs))
		}
	}
	if !strings.Contains(log.String(), "burst 3 of 3") {
		t.Errorf("log does not count the bursts:\n%s", log.String())
	}
}
