package icphistory

import (
	"context"
	"sync"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
)

// Family is a ledger's history read by whichever family the ledger turns
// out to be: the ICP ledger (it answers query_encoded_blocks) or an ICRC-3
// ledger. The choice is made on first use, by the ledger's endpoints, never
// by its id, and kept once a signed reply made it. A node that lies about
// the endpoint cannot make a history wrong: an ICRC ledger read as ICP has
// a certified_data no protobuf block hashes to, and an ICP ledger read as
// ICRC-3 serves no ICRC-3 history (E_UNSUPPORTED).
type Family struct {
	c *icrc3history.Client

	mu  sync.Mutex
	icp *History // nil until chosen, or when the ledger is not the ICP ledger
	set bool
}

// historySource is what both families serve (reconcile.History).
type historySource interface {
	Tip(ctx context.Context) (icrc3.Tip, error)
	Blocks(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error
	BlocksDesc(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error
	BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error
	Detect(ctx context.Context) (icrc3.Features, error)
	Forget()
}

// Choose reads the ledger c names by its family.
func Choose(c *icrc3history.Client) *Family { return &Family{c: c} }

// Client is the transport both families use (for its statistics).
func (f *Family) Client() *icrc3history.Client { return f.c }

func (f *Family) source(ctx context.Context) (historySource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.set {
		ok, raw, err := probeICP(ctx, f.c.Conn)
		if err != nil {
			return nil, err
		}
		if ok {
			f.icp = New(f.c.Conn, f.c.Concurrency())
			// The probe's reply is the tip's query, verified: the first
			// tip need not ask again.
			f.icp.probed, f.icp.tipProbe, f.icp.tipProbeAt = true, raw, f.c.Conn.Now()
		}
		f.set = true
	}
	if f.icp != nil {
		return f.icp, nil
	}
	return f.c, nil
}

// IsICPLedger reports the family chosen so far (false before the choice).
func (f *Family) IsICPLedger() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.icp != nil
}

func (f *Family) Tip(ctx context.Context) (icrc3.Tip, error) {
	s, err := f.source(ctx)
	if err != nil {
		return icrc3.Tip{}, err
	}
	return s.Tip(ctx)
}

func (f *Family) Blocks(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	s, err := f.source(ctx)
	if err != nil {
		return err
	}
	return s.Blocks(ctx, start, end, fn)
}

func (f *Family) BlocksDesc(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	s, err := f.source(ctx)
	if err != nil {
		return err
	}
	return s.BlocksDesc(ctx, start, end, fn)
}

// BlocksDescAbove passes the engine's aimed walk on to either family, so
// a ledger read through Family keeps the concurrent walk the engine takes
// from a bare client.
func (f *Family) BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error {
	s, err := f.source(ctx)
	if err != nil {
		return err
	}
	return s.BlocksDescAbove(ctx, start, end, floor, fn)
}

func (f *Family) Detect(ctx context.Context) (icrc3.Features, error) {
	s, err := f.source(ctx)
	if err != nil {
		return icrc3.Features{}, err
	}
	return s.Detect(ctx)
}

func (f *Family) NetworkKey() string { return f.c.NetworkKey() }

// Mode: the ICP family verifies by certificate and chain only.
func (f *Family) Mode() icrc3.VerifyMode { return f.c.Mode() }

func (f *Family) Forget() {
	f.mu.Lock()
	s := historySource(f.c)
	if f.icp != nil {
		s = f.icp
	}
	f.mu.Unlock()
	s.Forget()
}
