package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/aviate-labs/agent-go"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/matcher"
)

// The baselines are the indexer approach (as Rosetta does it): mirror the
// whole chain into a local database, verified, then answer questions with
// SQL. They use the same icrc3history.Client as the daemon (same transport,
// decoder and hashing), write rows in large transactions from a writer
// goroutine that overlaps the network, and index the stamp once the bulk
// load is done. They differ in how they fetch:
//   - concurrent: pages from genesis upwards, Concurrency in flight, the
//     chain checked forward up to the certified tip (an indexer built for
//     speed);
//   - sequential: one 2000-block window at a time from the certified tip
//     downwards, archives read one at a time, the chain checked from the
//     tip down, as ICRC Rosetta syncs. The client knows the archives'
//     ranges and asks them directly, where Rosetta asks the ledger first:
//     if anything this baseline is faster than Rosetta.
const (
	styleConcurrent = "concurrent"
	styleSequential = "sequential"
)

// newBaselineClient is a fresh client fetching as the style does.
func (sc *scenario) newBaselineClient(ag *agent.Agent, ep icrc3.Endpoint, style string) (*icrc3history.Client, error) {
	if style == styleConcurrent {
		return sc.newClient(ag, ep)
	}
	return icrc3history.NewClient(icrc3history.ClientConfig{Agent: ag, Ledger: sc.ledgerID, RootKey: sc.RootKey, Endpoint: ep,
		Concurrency: 1, PageSize: icrc3.PageLegacy})
}

func baselineFile(epName, style string) string { return "baseline-" + epName + "-" + style + ".db" }

// BaselineResult is one full sync plus the searches of the four cases.
type BaselineResult struct {
	Endpoint     string            `json:"endpoint"`
	Style        string            `json:"style"` // concurrent or sequential
	Blocks       uint64            `json:"blocks"`
	Queries      uint64            `json:"queries"`
	BlocksClient uint64            `json:"blocks_fetched"`
	SyncSeconds  float64           `json:"sync_seconds"`  // tip, pages, chain check, inserts, index
	IndexSeconds float64           `json:"index_seconds"` // of which the stamp index
	SearchMS     float64           `json:"search_ms"`     // the first case's search
	FirstAnswerS float64           `json:"first_answer_seconds"`
	CPUSeconds   float64           `json:"cpu_seconds_process"`
	DBBytes      int64             `json:"db_bytes"`
	PeakRSS      uint64            `json:"peak_rss_bytes"`
	PeakRSSRise  uint64            `json:"peak_rss_rise_bytes"`
	Verdicts     map[string]string `json:"verdicts"`
	firstAnswer  time.Duration
}

const baselineBatch = 20_000 // rows per transaction

type baseRow struct {
	idx, ts uint64
	stamp   *uint64
	hash    icrc3.Hash
	raw     []byte
}

// baselineHistory is what a baseline syncs from: an icrc3history.Client, or the
// ICP family's reader over one.
type baselineHistory interface {
	Tip(ctx context.Context) (icrc3.Tip, error)
	Blocks(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error
	BlocksDesc(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error
	Detect(ctx context.Context) (icrc3.Features, error)
}

// runBaseline syncs the scenario's ledger into a fresh SQLite file in dir
// as style fetches, and answers the four cases.
func (sc *scenario) runBaseline(ctx context.Context, c *icrc3history.Client, dir, epName, style string) (BaselineResult, error) {
	return sc.runBaselineOn(ctx, c, c, dir, epName, style)
}

// runBaselineOn is runBaseline reading through h, c being the client
// under it (for its counters).
func (sc *scenario) runBaselineOn(ctx context.Context, h baselineHistory, c *icrc3history.Client, dir, epName, style string) (BaselineResult, error) {
	res := BaselineResult{Endpoint: epName, Style: style, Verdicts: map[string]string{}}
	path := filepath.Join(dir, baselineFile(epName, style))
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return res, fmt.Errorf("baseline: open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	cpu0 := cpuTime()
	t0 := time.Now()
	if _, err := db.ExecContext(ctx, `CREATE TABLE blocks (
		idx   INTEGER PRIMARY KEY,
		ts    INTEGER NOT NULL,
		stamp INTEGER,
		hash  BLOB NOT NULL,
		raw   BLOB NOT NULL)`); err != nil {
		return res, fmt.Errorf("baseline: create table: %w", err)
	}
	tip, err := h.Tip(ctx)
	if err != nil {
		return res, fmt.Errorf("baseline: tip: %w", err)
	}
	if tip.Empty {
		return res, errors.New("baseline: the ledger is empty")
	}

	rows := make(chan []baseRow, 8)
	written := make(chan error, 1)
	go func() { written <- writeRows(ctx, db, rows) }()

	// The concurrent indexer syncs from genesis upwards: rows then append
	// at the end of the table's B-tree. Its chain is checked forward as it
	// arrives and must end at the certified tip. The sequential one walks
	// down from the tip with a Verifier, as Rosetta does.
	var count uint64
	var prev icrc3.Hash
	fetch, check := h.Blocks, func(page []icrc3.Block) error {
		for i := range page {
			b := &page[i]
			switch {
			case b.Index != count:
				return fmt.Errorf("baseline: got block %d, want %d", b.Index, count)
			case b.Index == 0 && b.PHash != nil:
				return errors.New("baseline: block 0 has a phash")
			case b.Index > 0 && (b.PHash == nil || *b.PHash != prev):
				return fmt.Errorf("baseline: block %d does not chain to block %d", b.Index, b.Index-1)
			}
			prev = b.Hash
			count++
		}
		return nil
	}
	down := icrc3.NewVerifier(tip.Anchor())
	if style == styleSequential {
		fetch, check = h.BlocksDesc, func(page []icrc3.Block) error {
			if err := down.PushPage(page); err != nil {
				return fmt.Errorf("baseline: %w", err)
			}
			count += uint64(len(page))
			return nil
		}
	}
	err = fetch(ctx, 0, tip.Index+1, func(page []icrc3.Block) error {
		if err := check(page); err != nil {
			return err
		}
		batch := make([]baseRow, len(page))
		for i := range page {
			b := &page[i]
			// As an indexer keeps them: in the ledger's own encoding.
			raw := b.Raw
			if b.Native != nil {
				raw = b.Native
			}
			batch[i] = baseRow{idx: b.Index, ts: b.TS, hash: b.Hash, raw: raw}
			if b.CreatedAt != nil {
				st := *b.CreatedAt
				batch[i].stamp = &st
			}
		}
		select {
		case rows <- batch:
			return nil
		case err := <-written:
			// The writer stopped early: report its error, not a hang.
			written <- err
			return fmt.Errorf("baseline: writer stopped: %w", err)
		}
	})
	close(rows)
	werr := <-written
	if err != nil {
		return res, err
	}
	if werr != nil {
		return res, werr
	}
	if style == styleSequential {
		if !down.Done() || count != tip.Index+1 {
			return res, fmt.Errorf("baseline: walk from the certified tip %d stopped at block %d", tip.Index, down.Next())
		}
	} else if count != tip.Index+1 || prev != tip.Hash {
		return res, fmt.Errorf("baseline: chain of %d blocks does not end at the certified tip %d", count, tip.Index)
	}
	ti := time.Now()
	if _, err := db.ExecContext(ctx, `CREATE INDEX blocks_by_stamp ON blocks (stamp) WHERE stamp IS NOT NULL`); err != nil {
		return res, fmt.Errorf("baseline: index: %w", err)
	}
	res.IndexSeconds = time.Since(ti).Seconds()
	synced := time.Since(t0)

	f, err := h.Detect(ctx)
	if err != nil {
		return res, err
	}
	rules := matcher.LedgerRules{MintingAccount: f.MintingAccount}
	for k, name := range caseNames {
		ts := time.Now()
		v, err := searchBaseline(ctx, db, sc.cases[name], rules, tip)
		if err != nil {
			return res, err
		}
		if k == 0 {
			res.SearchMS = ms(time.Since(ts))
			res.firstAnswer = time.Since(t0)
		}
		if err := sc.check(name, v); err != nil {
			return res, fmt.Errorf("baseline %s: %w", epName, err)
		}
		res.Verdicts[name] = string(v.Status)
	}
	res.CPUSeconds = (cpuTime() - cpu0).Seconds()
	res.SyncSeconds = synced.Seconds()
	res.FirstAnswerS = res.firstAnswer.Seconds()
	st := c.Stats()
	res.Blocks, res.Queries, res.BlocksClient = count, st.Total, st.Blocks
	var pages, size int64
	if err := db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err == nil {
		if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err == nil {
			res.DBBytes = pages * size
		}
	}
	return res, nil
}

// writeRows inserts batches in transactions of about baselineBatch rows.
func writeRows(ctx context.Context, db *sql.DB, rows <-chan []baseRow) (err error) {
	var tx *sql.Tx
	var stmt *sql.Stmt
	n := 0
	commit := func() error {
		if tx == nil {
			return nil
		}
		stmt.Close()
		err := tx.Commit()
		tx, stmt, n = nil, nil, 0
		return err
	}
	defer func() {
		if tx != nil {
			tx.Rollback()
		}
		// Drain so the producer never blocks on a writer that gave up.
		for range rows {
		}
	}()
	for batch := range rows {
		if tx == nil {
			if tx, err = db.BeginTx(ctx, nil); err != nil {
				return fmt.Errorf("baseline: begin: %w", err)
			}
			if stmt, err = tx.PrepareContext(ctx, `INSERT INTO blocks (idx, ts, stamp, hash, raw) VALUES (?, ?, ?, ?, ?)`); err != nil {
				return fmt.Errorf("baseline: prepare: %w", err)
			}
		}
		for i := range batch {
			r := &batch[i]
			var stamp any
			if r.stamp != nil {
				if *r.stamp > math.MaxInt64 {
					return fmt.Errorf("baseline: block %d: stamp %d does not fit an INTEGER", r.idx, *r.stamp)
				}
				stamp = int64(*r.stamp)
			}
			if r.idx > math.MaxInt64 || r.ts > math.MaxInt64 {
				return fmt.Errorf("baseline: block %d: index or ts does not fit an INTEGER", r.idx)
			}
			if _, err := stmt.ExecContext(ctx, int64(r.idx), int64(r.ts), stamp, r.hash[:], r.raw); err != nil {
				return fmt.Errorf("baseline: insert block %d: %w", r.idx, err)
			}
		}
		if n += len(batch); n >= baselineBatch {
			if err := commit(); err != nil {
				return fmt.Errorf("baseline: commit: %w", err)
			}
		}
	}
	if err := commit(); err != nil {
		return fmt.Errorf("baseline: commit: %w", err)
	}
	return nil
}

// searchBaseline answers one intent from the mirrored chain: the blocks
// stamped with its created_at_time inside its window, rebuilt and matched.
func searchBaseline(ctx context.Context, db *sql.DB, in *matcher.Intent, rules matcher.LedgerRules, tip icrc3.Tip) (reconciled.Verdict, error) {
	v := reconciled.Verdict{IntentID: in.ID, IntentHash: in.HashHex()}
	w := in.Window(rules)
	if w.From > math.MaxInt64 || w.To > math.MaxInt64 || in.Stamp() > math.MaxInt64 {
		return v, fmt.Errorf("baseline: window of %s does not fit an INTEGER", in.ID)
	}
	q, err := db.QueryContext(ctx, `SELECT idx, hash, raw FROM blocks WHERE stamp = ? AND ts BETWEEN ? AND ? ORDER BY idx`,
		int64(in.Stamp()), int64(w.From), int64(w.To))
	if err != nil {
		return v, fmt.Errorf("baseline: search %s: %w", in.ID, err)
	}
	defer q.Close()
	for q.Next() {
		var idx int64
		var hash, raw []byte
		if err := q.Scan(&idx, &hash, &raw); err != nil {
			return v, fmt.Errorf("baseline: search %s: %w", in.ID, err)
		}
		b, err := parseRow(uint64(idx), hash, raw, tip.Format)
		if err != nil {
			return v, err
		}
		if matcher.Match(in, &b, rules).Match {
			v.Status, v.Final = reconciled.StatusFound, true
			v.Block = &reconciled.BlockRef{Index: reconciled.U64(b.Index), TS: reconciled.U64(b.TS), Hash: b.Hash.String(), Kind: string(b.Kind)}
			return v, nil
		}
	}
	if err := q.Err(); err != nil {
		return v, fmt.Errorf("baseline: search %s: %w", in.ID, err)
	}
	if w.ClosedAt(tip.Time) {
		v.Status, v.Final = reconciled.StatusAbsent, true
	} else {
		v.Status = reconciled.StatusNotYet
	}
	return v, nil
}

// parseRow rebuilds a mirrored block: protobuf when the tip is the ICP
// ledger's, an ICRC-3 Value otherwise.
func parseRow(idx uint64, hash, raw []byte, format string) (icrc3.Block, error) {
	if format == icrc3.TipFormatICP {
		b, _, err := icp.ToICRC3(idx, raw)
		if err != nil {
			return b, fmt.Errorf("baseline: %w", err)
		}
		return b, nil
	}
	val, err := icrc3.UnmarshalValue(raw)
	if err != nil {
		return icrc3.Block{}, fmt.Errorf("baseline: block %d: %w", idx, err)
	}
	var h icrc3.Hash
	copy(h[:], hash)
	b, err := icrc3.ParseBlock(idx, val, h)
	if err != nil {
		return b, fmt.Errorf("baseline: block %d: %w", idx, err)
	}
	return b, nil
}
