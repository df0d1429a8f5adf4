package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/reconciled/reconciled/icrc3history"
)

// Report is everything one run measured; it is written as JSON so runs can
// be compared.
type Report struct {
	Config     config `json:"config"`
	GoVersion  string `json:"go_version"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// LoadStart and LoadEnd are the machine's 1-minute load average.
	LoadStart float64 `json:"load_start"`
	LoadEnd   float64 `json:"load_end"`

	Ledger   LedgerInfo       `json:"ledger"`
	Cases    []CaseResult     `json:"cases"`
	Baseline []BaselineResult `json:"baseline,omitempty"`
	// Many is the burst whose rate is the median of ManyRuns (-bursts).
	Many     *ManyResult  `json:"many,omitempty"`
	ManyRuns []ManyResult `json:"many_runs,omitempty"`
	// Queued is the same intents published before the daemon starts: the
	// median of QueuedRuns.
	Queued     *ManyResult    `json:"queued,omitempty"`
	QueuedRuns []ManyResult   `json:"queued_runs,omitempty"`
	Decode     []DecodeResult `json:"decode"`

	// Peak RSS while our single-intent cases ran, and its rise above what
	// was resident before (the replica and its ledger).
	OursPeakRSS     uint64 `json:"ours_peak_rss_bytes"`
	OursPeakRSSRise uint64 `json:"ours_peak_rss_rise_bytes"`

	Goals []Goal `json:"goals"`
}

// LedgerInfo describes the scenario's ledger. RSSBytes is the ledger's
// resident memory: the child process's, or what the in-process replica and
// ledger added (then it is in every later RSS figure of this process).
type LedgerInfo struct {
	Host         string            `json:"host"` // child or inproc
	Blocks       uint64            `json:"blocks"`
	Archives     int               `json:"archives"`
	WindowFirst  uint64            `json:"window_first"`
	WindowLast   uint64            `json:"window_last"`
	WindowBlocks uint64            `json:"window_blocks"`
	Found        map[string]uint64 `json:"found_at"`
	BuildSeconds float64           `json:"build_seconds"`
	RSSBytes     uint64            `json:"rss_bytes"`
}

// Goal is one of the project's speed goals with what this run achieved.
type Goal struct {
	Name     string  `json:"name"`
	Target   string  `json:"target"`
	Achieved float64 `json:"achieved"`
	Met      bool    `json:"met"`
	Note     string  `json:"note,omitempty"`
}

// baseline is the concurrent baseline of an endpoint family, the one the
// goals without a round trip compare with.
func (r *Report) baseline(ep string) *BaselineResult { return r.baselineStyle(ep, styleConcurrent) }

func (r *Report) baselineStyle(ep, style string) *BaselineResult {
	for i := range r.Baseline {
		if b := &r.Baseline[i]; b.Endpoint == ep && b.Style == style {
			return b
		}
	}
	return nil
}

const mib = 1 << 20

// evaluate states each goal against the figures.
func (r *Report) evaluate() {
	r.Goals = nil
	if len(r.Baseline) > 0 {
		worst, worstAt := math.Inf(1), ""
		for _, c := range r.Cases {
			b := r.baseline(c.Endpoint)
			if b == nil || c.LatencyMS.P50 <= 0 {
				continue
			}
			if ratio := b.FirstAnswerS * 1000 / c.LatencyMS.P50; ratio < worst {
				worst, worstAt = ratio, c.Endpoint+"/"+c.Case
			}
		}
		// CPU time does not depend on what else the machine runs; with
		// the ledger in a child process it is the reader's work alone.
		worstCPU, cpuAt := math.Inf(1), ""
		for _, c := range r.Cases {
			if b := r.baseline(c.Endpoint); b != nil && c.CPUSeconds > 0 {
				if ratio := b.CPUSeconds / c.CPUSeconds; ratio < worstCPU {
					worstCPU, cpuAt = ratio, c.Endpoint+"/"+c.Case
				}
			}
		}
		r.Goals = append(r.Goals, Goal{Name: "verdict vs baseline first answer", Target: ">= 100x",
			Achieved: worst, Met: worst >= 100,
			Note: fmt.Sprintf("worst case %s (wall p50); by CPU time worst %.1fx (%s); a cold verdict reads tip..window start, the baseline the whole chain",
				worstAt, worstCPU, cpuAt)})
	}
	worstQ, worstAt := 0.0, ""
	for _, c := range r.Cases {
		if c.QueryRatio > worstQ {
			worstQ, worstAt = c.QueryRatio, c.Endpoint+"/"+c.Case
		}
	}
	r.Goals = append(r.Goals, Goal{Name: "queries per verdict vs blocks/page + search + 2", Target: "<= 1.1x",
		Achieved: worstQ, Met: worstQ <= 1.1, Note: "worst case " + worstAt})
	if r.Many != nil {
		r.Goals = append(r.Goals, Goal{Name: fmt.Sprintf("%d intents: blocks fetched vs one scan", r.Many.Intents), Target: "<= 1.2x",
			Achieved: r.Many.ScanRatio, Met: r.Many.ScanRatio <= 1.2})
		// Over several bursts the rate is the median run's and p99 the
		// median of the runs' p99s, each with its range.
		of, p99, note := "", r.Many.LatencyMS.P99, ""
		if n := len(r.ManyRuns); n > 1 {
			lo, _, hi := spread(r.ManyRuns, func(m ManyResult) float64 { return m.IntentsPerS })
			of = fmt.Sprintf("; median of %d bursts, %.0f-%.0f/s", n, lo, hi)
			lo, p99, hi = spread(r.ManyRuns, func(m ManyResult) float64 { return m.LatencyMS.P99 })
			note = fmt.Sprintf("median of %d bursts, %.0f-%.0f ms", n, lo, hi)
		}
		r.Goals = append(r.Goals, Goal{Name: fmt.Sprintf("%d intents: decided and published per second", r.Many.Intents), Target: ">= 1000",
			Achieved: r.Many.IntentsPerS, Met: r.Many.IntentsPerS >= 1000,
			Note: fmt.Sprintf("first publish to last verdict; the publishes alone took %.0f ms%s", r.Many.PublishedMS, of)})
		r.Goals = append(r.Goals, Goal{Name: fmt.Sprintf("%d intents: p99 publish->verdict", r.Many.Intents), Target: "<= 1000 ms",
			Achieved: p99, Met: p99 <= 1000, Note: note})
	}
	if r.Config.RTT > 0 {
		r.rttGoals()
	}
	minDec := math.Inf(1)
	for _, d := range r.Decode {
		minDec = min(minDec, d.BlocksPerSec)
	}
	r.Goals = append(r.Goals, Goal{Name: "decode+hash+match per core", Target: ">= 500000 blocks/s",
		Achieved: minDec, Met: minDec >= 500_000, Note: "slowest endpoint family"})
	ours := r.OursPeakRSSRise
	for _, m := range []*ManyResult{r.Many, r.Queued} {
		if m != nil {
			ours = max(ours, m.PeakRSSRise)
		}
	}
	name, note := "peak RSS of reconciled", fmt.Sprintf("the ledger runs in a child process (%d MiB there)", r.Ledger.RSSBytes/mib)
	if r.Ledger.Host != "child" {
		name = "peak RSS of reconciled (rise above the in-process ledger)"
		note = fmt.Sprintf("the in-process replica+ledger holds %d MiB and its live heap raises the GC target", r.Ledger.RSSBytes/mib)
	}
	if r.Ledger.Host == "child" {
		ours = max(r.OursPeakRSS, r.manyPeak())
	}
	r.Goals = append(r.Goals, Goal{Name: name, Target: "< 200 MiB", Achieved: float64(ours) / mib, Met: ours < 200*mib,
		Note: note + fmt.Sprintf("; process peak %d MiB", max(r.OursPeakRSS, r.manyPeak())/mib)})
}

// rttGoals are the goals at a mainnet round trip: against the sequential
// (Rosetta-style) baseline on legacy pages, and against each case's floor.
func (r *Report) rttGoals() {
	for _, fam := range []struct{ ep, name string }{{"legacy2000", "legacy"}, {"icp", "ICP ledger"}} {
		seq := r.baselineStyle(fam.ep, styleSequential)
		if seq == nil {
			continue
		}
		worst, at := math.Inf(1), ""
		for _, c := range r.Cases {
			if c.Endpoint == fam.ep && (c.Case == "start" || c.Case == "absent") && c.LatencyMS.P50 > 0 {
				if ratio := seq.FirstAnswerS * 1000 / c.LatencyMS.P50; ratio < worst {
					worst, at = ratio, c.Case
				}
			}
		}
		r.Goals = append(r.Goals, Goal{Name: "cold start/absent verdict vs sequential baseline first answer (" + fam.name + ")", Target: ">= 50x",
			Achieved: worst, Met: worst >= 50, Note: "worst case " + at})
	}
	// The floor goals hold per family: the ICRC ledgers' two page
	// families together, the ICP ledger on its own.
	for _, fam := range []struct {
		name string
		of   func(ep string) bool
	}{{"ICRC page families", func(ep string) bool { return ep != "icp" }}, {"ICP ledger", func(ep string) bool { return ep == "icp" }}} {
		far, farAt, near, nearAt := 0.0, "", 0.0, ""
		for _, c := range r.Cases {
			if !fam.of(c.Endpoint) {
				continue
			}
			switch c.Case {
			case "start", "absent":
				if c.FloorRatio > far {
					far, farAt = c.FloorRatio, c.Endpoint+"/"+c.Case
				}
			case "end":
				if c.FloorRatio > near {
					near, nearAt = c.FloorRatio, c.Endpoint+"/"+c.Case
				}
			}
		}
		if farAt == "" && nearAt == "" {
			continue
		}
		r.Goals = append(r.Goals,
			Goal{Name: "cold start/absent verdict vs RTT floor (" + fam.name + ")", Target: "<= 1.3x", Achieved: far, Met: far <= 1.3, Note: "worst case " + farAt},
			Goal{Name: "near-tip verdict vs RTT floor (" + fam.name + ")", Target: "<= 1.5x", Achieved: near, Met: near <= 1.5, Note: "worst case " + nearAt})
	}
}

func (r *Report) manyPeak() uint64 {
	var peak uint64
	for _, m := range []*ManyResult{r.Many, r.Queued} {
		if m != nil {
			peak = max(peak, m.PeakRSS)
		}
	}
	return peak
}

// writeTable prints one table: our figures, the baseline's, and the ratio
// baseline/ours (how many times better we are; for the bounds, measured /
// bound).
func (r *Report) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "ledger: %d blocks, %d archives, window of %d blocks [%d, %d], built in %.1f s; %s, %d CPUs, load %.1f -> %.1f; rtt %s, concurrency %s\n\n",
		r.Ledger.Blocks, r.Ledger.Archives, r.Ledger.WindowBlocks, r.Ledger.WindowFirst, r.Ledger.WindowLast, r.Ledger.BuildSeconds,
		r.GoVersion, r.CPUs, r.LoadStart, r.LoadEnd, r.Config.RTT, concName(r.Config.Concurrency))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(metric, ours, base, ratio string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", metric, ours, base, ratio)
	}
	row("METRIC", "RECONCILED", "BASELINE", "RATIO")
	for _, c := range r.Cases {
		b := r.baseline(c.Endpoint)
		tag := c.Endpoint + " " + c.Case
		base, ratio := "-", "-"
		if b != nil {
			base = fmt.Sprintf("%.0f ms", b.FirstAnswerS*1000)
			ratio = fmt.Sprintf("%.0fx", b.FirstAnswerS*1000/c.LatencyMS.P50)
		}
		row(tag+": latency p50/p99/max vs first answer",
			fmt.Sprintf("%.1f/%.1f/%.1f ms", c.LatencyMS.P50, c.LatencyMS.P99, c.LatencyMS.Max), base, ratio)
		if seq := r.baselineStyle(c.Endpoint, styleSequential); seq != nil {
			row(tag+": latency p50 vs sequential first answer", fmt.Sprintf("%.1f ms", c.LatencyMS.P50),
				fmt.Sprintf("%.0f ms", seq.FirstAnswerS*1000), fmt.Sprintf("%.0fx", seq.FirstAnswerS*1000/c.LatencyMS.P50))
		}
		if c.RTTFloorMS > 0 {
			row(tag+fmt.Sprintf(": RTT floor (C=%d), p50/floor", c.Concurrency),
				fmt.Sprintf("%.0f ms, %.2fx", c.RTTFloorMS, c.FloorRatio), "-", "-")
		}
		bq, bb, rq, rb, bc, rc := "-", "-", "-", "-", "-", "-"
		if b != nil {
			bq, bb = fmt.Sprint(b.Queries), fmt.Sprint(b.BlocksClient)
			rq, rb = fmt.Sprintf("%.0fx", float64(b.Queries)/c.Queries), fmt.Sprintf("%.0fx", float64(b.BlocksClient)/c.BlocksClient)
			bc, rc = fmt.Sprintf("%.2f s", b.CPUSeconds), fmt.Sprintf("%.0fx", b.CPUSeconds/c.CPUSeconds)
		}
		row(tag+": queries (bound, measured/bound)", fmt.Sprintf("%.0f (%.0f, %.2fx)", c.Queries, c.Bound, c.QueryRatio), bq, rq)
		row(tag+": blocks fetched (to verify)", fmt.Sprintf("%.0f (%d)", c.BlocksClient, c.BlocksToVerify), bb, rb)
		row(tag+": CPU per verdict (process)", fmt.Sprintf("%.3f s", c.CPUSeconds), bc, rc)
	}
	for _, b := range r.Baseline {
		tag := "baseline " + b.Endpoint + " " + b.Style
		row(tag+": sync (index) / search", "-",
			fmt.Sprintf("%.1f s (%.1f s) / %.1f ms", b.SyncSeconds, b.IndexSeconds, b.SearchMS), "-")
		row(tag+": queries, SQLite size, peak RSS rise", "-",
			fmt.Sprintf("%d, %d MiB, %d MiB", b.Queries, b.DBBytes/mib, b.PeakRSSRise/mib), "-")
	}
	if len(r.Baseline) > 0 {
		row("peak RSS (rise): single verdicts vs baseline", fmt.Sprintf("%d (%d) MiB", r.OursPeakRSS/mib, r.OursPeakRSSRise/mib),
			fmt.Sprintf("%d (%d) MiB", r.Baseline[0].PeakRSS/mib, r.Baseline[0].PeakRSSRise/mib), fmt.Sprintf("%.1fx", float64(r.Baseline[0].PeakRSS)/float64(max(r.OursPeakRSS, 1))))
	}
	if m := r.Many; m != nil {
		row(fmt.Sprintf("%d intents via NATS: blocks fetched vs one scan", m.Intents),
			fmt.Sprintf("%d", m.BlocksClient), fmt.Sprintf("%d (one scan)", m.OneScan), fmt.Sprintf("%.2fx", m.ScanRatio))
		row("  intents/s, queries (certified tips)", fmt.Sprintf("%.0f/s, %d (%d)", m.IntentsPerS, m.Queries, m.QueriesByMethod["ledger:icrc3_get_tip_certificate"]), "-", "-")
		row("  publish->verdict p50/p99/max", fmt.Sprintf("%.0f/%.0f/%.0f ms", m.LatencyMS.P50, m.LatencyMS.P99, m.LatencyMS.Max), "-", "-")
		row("  statuses", fmt.Sprint(m.Statuses), "-", "-")
		row("  CPU (test ledger's), peak RSS (rise)", fmt.Sprintf("%.2f (%.2f) s, %d (%d) MiB", m.CPUSeconds, m.LedgerCPUSeconds, m.PeakRSS/mib, m.PeakRSSRise/mib), "-", "-")
		row("  publishes done, first and last verdict", fmt.Sprintf("%.0f, %.0f, %.0f ms", m.PublishedMS, m.FirstVerdictMS, m.Seconds*1000), "-", "-")
	}
	for _, rs := range []struct {
		name string
		runs []ManyResult
	}{{"live", r.ManyRuns}, {"queued", r.QueuedRuns}} {
		if len(rs.runs) < 2 {
			continue
		}
		rlo, rmed, rhi := spread(rs.runs, func(m ManyResult) float64 { return m.IntentsPerS })
		plo, pmed, phi := spread(rs.runs, func(m ManyResult) float64 { return m.LatencyMS.P99 })
		clo, cmed, chi := spread(rs.runs, func(m ManyResult) float64 { return m.CPUSeconds })
		blo, bmed, bhi := spread(rs.runs, func(m ManyResult) float64 { return 100 * m.CoresBusy })
		row(fmt.Sprintf("  %d %s bursts: intents/s, p99, CPU, cores busy (min/median/max)", len(rs.runs), rs.name),
			fmt.Sprintf("%.0f/%.0f/%.0f, %.0f/%.0f/%.0f ms, %.2f/%.2f/%.2f s, %.0f/%.0f/%.0f%%", rlo, rmed, rhi, plo, pmed, phi, clo, cmed, chi, blo, bmed, bhi), "-", "-")
	}
	if q := r.Queued; q != nil {
		row(fmt.Sprintf("%d intents queued before the daemon starts", q.Intents),
			fmt.Sprintf("%.0f/s, first verdict %.0f ms, last %.0f ms", q.IntentsPerS, q.FirstVerdictMS, q.Seconds*1000), "-", "-")
		row("  CPU, peak RSS (rise)", fmt.Sprintf("%.1f s, %d (%d) MiB", q.CPUSeconds, q.PeakRSS/mib, q.PeakRSSRise/mib), "-", "-")
	}
	for _, d := range r.Decode {
		row("decode+hash+match "+d.Endpoint+" per core (best/median)", fmt.Sprintf("%.0f/%.0f blocks/s", d.BlocksPerSec, d.MedianPerSec), "-", "-")
	}
	row("test ledger resident ("+r.Ledger.Host+")", fmt.Sprintf("%d MiB", r.Ledger.RSSBytes/mib), "-", "-")
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\ngoals:")
	for _, g := range r.Goals {
		mark := "MET"
		if !g.Met {
			mark = "NOT MET"
		}
		fmt.Fprintf(w, "  %-7s %s: %.3g (target %s) %s\n", mark, g.Name, g.Achieved, g.Target, g.Note)
	}
	return nil
}

// concName is the configured concurrency, 0 being the client's defaults.
func concName(c int) string {
	if c == 0 {
		return fmt.Sprintf("client default (%d legacy, %d icrc3)", icrc3history.ConcurrencyLegacy, icrc3history.ConcurrencyICRC3)
	}
	return fmt.Sprint(c)
}
