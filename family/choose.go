package family

import (
	"context"
	"sync"
	"time"

	"github.com/reconciled/reconciled/icagent"
	"github.com/reconciled/reconciled/icphistory"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
)

// History is a ledger's history read by whichever family the ledger turns
// out to be: the ICP ledger (it answers query_encoded_blocks) or an ICRC-3
// ledger. The choice is made by the ledger's endpoints, never by its id,
// and is kept only on positive evidence: ICP once query_encoded_blocks
// answered with a reply that decodes, ICRC once a certified ICRC-3 tip
// verified (a tree with a last_block_index, which no ICP ledger's
// certified_data, a raw block hash, can be). A reject (a ledger stopped
// for an upgrade, one node's word that the method is missing) decides
// for the read at hand only, as ICRC, and the ledger is asked again at
// most once per reprobeEvery; a failed probe decides nothing. A node that
// lies about the endpoint cannot make a history wrong: an ICRC ledger read
// as ICP has a certified_data no protobuf block hashes to, and an ICP
// ledger read as ICRC-3 serves no ICRC-3 history (E_UNSUPPORTED).
type History struct {
	c *icrc3history.Client

	mu  sync.Mutex
	icp *icphistory.History // the ICP ledger, once known
	// icrc: an ICRC ledger, once known.
	icrc bool
	// notICPAt is when a probe last saw query_encoded_blocks rejected.
	notICPAt time.Time
	probing  icagent.Shared[bool]
}

// reprobeEvery bounds how often a ledger whose family is not settled is
// asked again whether it is the ICP ledger: a healthy ICRC ledger that
// certifies no tip pays one verified query per interval, not per read,
// and an ICP ledger that was stopped is read as such within it.
const reprobeEvery = time.Minute

// historySource is what this package reads of either family.
type historySource interface {
	Tip(ctx context.Context) (icrc3.Tip, error)
	Blocks(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error
	BlocksDesc(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error
	BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error
	Detect(ctx context.Context) (icrc3.Features, error)
	Forget()
}

// Choose reads the ledger c names by its family.
func Choose(c *icrc3history.Client) *History { return &History{c: c} }

// Client is the transport both families use (for its statistics).
func (f *History) Client() *icrc3history.Client { return f.c }

func (f *History) source(ctx context.Context) (historySource, error) {
	f.mu.Lock()
	switch {
	case f.icp != nil:
		defer f.mu.Unlock()
		return f.icp, nil
	case f.icrc, !f.notICPAt.IsZero() && f.c.Conn.Now().Sub(f.notICPAt) < reprobeEvery:
		f.mu.Unlock()
		return f.c, nil
	}
	f.mu.Unlock()
	// The probe runs with no lock held; concurrent first reads share it.
	_, err := f.probing.Do(ctx, func(ctx context.Context) (bool, error) {
		h, err := icphistory.Probe(ctx, f.c.Conn, f.c.Concurrency())
		if err != nil {
			return false, err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case h != nil && f.icp == nil:
			f.icp = h
		case h == nil:
			f.notICPAt = f.c.Conn.Now()
		}
		return h != nil, nil
	})
	if err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			err = icagent.Classify(err, f.c.Ledger(), "query_encoded_blocks")
		}
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.icp != nil {
		return f.icp, nil
	}
	return f.c, nil
}

// IsICPLedger reports the family chosen so far (false before the choice).
func (f *History) IsICPLedger() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.icp != nil
}

func (f *History) Tip(ctx context.Context) (icrc3.Tip, error) {
	s, err := f.source(ctx)
	if err != nil {
		return icrc3.Tip{}, err
	}
	t, err := s.Tip(ctx)
	if err == nil && s == historySource(f.c) && !t.Empty && (t.Format == icrc3.TipFormatLEB128 || t.Format == icrc3.TipFormatLegacy) {
		// A certified ICRC-3 tip: the ledger is an ICRC ledger for good.
		f.mu.Lock()
		f.icrc = true
		f.mu.Unlock()
	}
	return t, err
}

func (f *History) Blocks(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	s, err := f.source(ctx)
	if err != nil {
		return err
	}
	return s.Blocks(ctx, start, end, fn)
}

func (f *History) BlocksDesc(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	s, err := f.source(ctx)
	if err != nil {
		return err
	}
	return s.BlocksDesc(ctx, start, end, fn)
}

// BlocksDescAbove passes the engine's aimed walk on to either family, so
// a ledger read through Family keeps the concurrent walk the engine takes
// from a bare client.
func (f *History) BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error {
	s, err := f.source(ctx)
	if err != nil {
		return err
	}
	return s.BlocksDescAbove(ctx, start, end, floor, fn)
}

func (f *History) Detect(ctx context.Context) (icrc3.Features, error) {
	s, err := f.source(ctx)
	if err != nil {
		return icrc3.Features{}, err
	}
	return s.Detect(ctx)
}

func (f *History) NetworkKey() string { return f.c.NetworkKey() }

// Mode: the ICP family verifies by certificate and chain only.
func (f *History) Mode() icrc3.VerifyMode { return f.c.Mode() }

func (f *History) Forget() {
	f.mu.Lock()
	s := historySource(f.c)
	if f.icp != nil {
		s = f.icp
	}
	f.mu.Unlock()
	s.Forget()
}
