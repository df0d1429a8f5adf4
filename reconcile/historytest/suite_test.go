package historytest_test

import (
	"context"
	"testing"
	"time"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/reconcile"
	"github.com/reconciled/reconciled/reconcile/historytest"
)

type walkFn = func(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error

// broken is a History with one thing wrong: each field, when set, replaces
// the method of the History it wraps. It hides the aimed walk unless
// descAbove is set.
type broken struct {
	reconcile.History
	tip        func(ctx context.Context) (icrc3.Tip, error)
	blocks     walkFn
	blocksDesc walkFn
	detect     func(ctx context.Context) (icrc3.Features, error)
	networkKey func() string
	forget     func()
}

func (b *broken) Tip(ctx context.Context) (icrc3.Tip, error) {
	if b.tip != nil {
		return b.tip(ctx)
	}
	return b.History.Tip(ctx)
}

func (b *broken) Blocks(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	if b.blocks != nil {
		return b.blocks(ctx, start, end, fn)
	}
	return b.History.Blocks(ctx, start, end, fn)
}

func (b *broken) BlocksDesc(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	if b.blocksDesc != nil {
		return b.blocksDesc(ctx, start, end, fn)
	}
	return b.History.BlocksDesc(ctx, start, end, fn)
}

func (b *broken) Detect(ctx context.Context) (icrc3.Features, error) {
	if b.detect != nil {
		return b.detect(ctx)
	}
	return b.History.Detect(ctx)
}

func (b *broken) NetworkKey() string {
	if b.networkKey != nil {
		return b.networkKey()
	}
	return b.History.NetworkKey()
}

func (b *broken) Forget() {
	if b.forget != nil {
		b.forget()
		return
	}
	b.History.Forget()
}

// brokenAimed adds an aimed walk to broken.
type brokenAimed struct {
	*broken
	descAbove func(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error
}

func (b *brokenAimed) BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error {
	return b.descAbove(ctx, start, end, floor, fn)
}

// pagesOf runs walk over [start, end) with the inner History and hands the
// pages to deliver, which decides what fn sees.
func pagesOf(ctx context.Context, walk walkFn, start, end uint64) ([][]icrc3.Block, error) {
	var pages [][]icrc3.Block
	err := walk(ctx, start, end, func(p []icrc3.Block) error {
		pages = append(pages, append([]icrc3.Block(nil), p...))
		return nil
	})
	return pages, err
}

// breakages break each check's clause in one way.
var breakages = map[string]func(h reconcile.History) reconcile.History{
	"TipCertifiedAndConsistent": func(h reconcile.History) reconcile.History {
		return &broken{History: h, tip: func(ctx context.Context) (icrc3.Tip, error) {
			t, err := h.Tip(ctx)
			t.Hash[0] ^= 1 // a tip no block hashes to
			return t, err
		}}
	},
	"BlocksAscending": func(h reconcile.History) reconcile.History {
		return &broken{History: h, blocks: func(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
			return h.Blocks(ctx, start, end, func(p []icrc3.Block) error { return fn(p[:len(p)-1]) })
		}}
	},
	"BlocksDescending": func(h reconcile.History) reconcile.History {
		return &broken{History: h, blocksDesc: func(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
			pages, err := pagesOf(ctx, h.BlocksDesc, start, end)
			if err != nil {
				return err
			}
			for i := len(pages) - 1; i >= 0; i-- { // bottom up
				if err := fn(pages[i]); err != nil {
					return err
				}
			}
			return nil
		}}
	},
	"RangesAcrossEdges": func(h reconcile.History) reconcile.History {
		// A range not starting at 0 gets a block of another chain.
		return &broken{History: h, blocks: func(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
			return h.Blocks(ctx, start, end, func(p []icrc3.Block) error {
				if start > 0 {
					p[0].Hash[0] ^= 1
				}
				return fn(p)
			})
		}}
	},
	"EmptyRanges": func(h reconcile.History) reconcile.History {
		return &broken{History: h, blocks: func(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
			if start == end && start > 0 {
				start-- // the block below an empty range
			}
			return h.Blocks(ctx, start, end, fn)
		}}
	},
	"BeyondTipIsError": func(h reconcile.History) reconcile.History {
		return &broken{History: h, blocks: func(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
			t, err := h.Tip(ctx)
			if err != nil {
				return err
			}
			// A short page instead of an error.
			return h.Blocks(ctx, min(start, t.Len()), min(end, t.Len()), fn)
		}}
	},
	"CallbackErrorStopsWalk": func(h reconcile.History) reconcile.History {
		return &broken{History: h, blocksDesc: func(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
			return h.BlocksDesc(ctx, start, end, func(p []icrc3.Block) error { _ = fn(p); return nil })
		}}
	},
	"CancelStopsWalk": func(h reconcile.History) reconcile.History {
		return &broken{History: h, blocks: func(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
			return h.Blocks(context.WithoutCancel(ctx), start, end, fn)
		}}
	},
	"Detect": func(h reconcile.History) reconcile.History {
		return &broken{History: h, detect: func(ctx context.Context) (icrc3.Features, error) {
			f, err := h.Detect(ctx)
			f.MintingAccount = nil
			return f, err
		}}
	},
	"IdentityStable": func(h reconcile.History) reconcile.History {
		forgot := false
		return &broken{History: h, forget: func() { forgot = true; h.Forget() }, networkKey: func() string {
			if forgot {
				return h.NetworkKey() + "'"
			}
			return h.NetworkKey()
		}}
	},
	"ForgetAfterReset": func(h reconcile.History) reconcile.History {
		// A tip kept across Forget: a source that does not forget.
		var kept *icrc3.Tip
		return &broken{History: h, forget: func() {}, tip: func(ctx context.Context) (icrc3.Tip, error) {
			if kept != nil {
				return *kept, nil
			}
			t, err := h.Tip(ctx)
			if err == nil {
				kept = &t
			}
			return t, err
		}}
	},
	"AimedWalkAgrees": func(h reconcile.History) reconcile.History {
		a := h
		// The walk ends one block above the floor.
		return &brokenAimed{broken: &broken{History: h}, descAbove: func(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error {
			return a.BlocksDescAbove(ctx, max(start, floor()+1), end, floor, fn)
		}}
	},
}

// TestEveryCheckCanFail runs each check against a History broken in the
// way its clause forbids and asserts the check reports it; the same check
// passes on the History unbroken.
func TestEveryCheckCanFail(t *testing.T) {
	for _, c := range historytest.Checks {
		brk, ok := breakages[c.Name]
		if !ok {
			t.Errorf("check %s: no breakage shows it can fail", c.Name)
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			f := newICRC(t, archiving)
			if err := c.Run(ctx, f); err != nil {
				t.Fatalf("unbroken: %v", err)
			}
			f = newICRC(t, archiving)
			f.History = brk(f.History)
			err := c.Run(ctx, f)
			if err == nil {
				t.Fatal("the broken History passed")
			}
			t.Logf("reported: %v", err)
		})
	}
	if len(breakages) != len(historytest.Checks) {
		t.Errorf("%d breakages for %d checks", len(breakages), len(historytest.Checks))
	}
}
