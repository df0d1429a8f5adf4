package historytest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/reconcile"
)

// Ledger is the replica side of a fixture: the ledger the History under
// test reads, which the suite inspects and changes.
type Ledger interface {
	// Len is the number of blocks the ledger holds (archived ones too).
	Len() uint64
	// Minting is the ledger's minting account.
	Minting() icrc3.Account
	// Edges are the indexes at which the source of the blocks changes
	// (an archive's start or end, the ledger's first unarchived block),
	// in any order; none when nothing is archived.
	Edges() []uint64
	// Reset gives the ledger another history under the same canister id
	// (a reinstall), of a length other than Len.
	Reset() error
}

// Fixture is one History under test and the ledger it reads. The ledger
// holds at least a few pages of blocks, and should archive some of them so
// that the walks cross archive boundaries.
type Fixture struct {
	History reconcile.History
	Ledger  Ledger
}

// Check is one clause of the contract: Run returns what the History did
// wrong, nil when it kept the clause.
type Check struct {
	Name string
	Run  func(ctx context.Context, f Fixture) error
}

// Checks are the suite's clauses, in the order Run runs them.
var Checks = []Check{
	{"TipCertifiedAndConsistent", checkTip},
	{"BlocksAscending", checkBlocks},
	{"BlocksDescending", checkBlocksDesc},
	{"RangesAcrossEdges", checkEdges},
	{"EmptyRanges", checkEmpty},
	{"BeyondTipIsError", checkBeyondTip},
	{"CallbackErrorStopsWalk", checkCallbackError},
	{"CancelStopsWalk", checkCancel},
	{"Detect", checkDetect},
	{"IdentityStable", checkIdentity},
	{"ForgetAfterReset", checkForget},
	{"AimedWalkAgrees", checkAimed},
}

// Run runs every check, each as a subtest on a fixture of its own.
func Run(t *testing.T, newFixture func(t *testing.T) Fixture) {
	t.Helper()
	for _, c := range Checks {
		t.Run(c.Name, func(t *testing.T) {
			f := newFixture(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := c.Run(ctx, f); err != nil {
				t.Error(err)
			}
		})
	}
}

type walkFn func(ctx context.Context, start, end uint64, fn func([]icrc3.Block) error) error

// collect runs walk over [start, end) and returns its pages.
func collect(ctx context.Context, walk walkFn, start, end uint64) ([][]icrc3.Block, error) {
	var pages [][]icrc3.Block
	err := walk(ctx, start, end, func(p []icrc3.Block) error {
		pages = append(pages, append([]icrc3.Block(nil), p...))
		return nil
	})
	return pages, err
}

// contiguous checks that one page holds consecutive indexes in ascending
// order and returns its first index and one past its last.
func contiguous(p []icrc3.Block) (lo, hi uint64, err error) {
	if len(p) == 0 {
		return 0, 0, errors.New("an empty page")
	}
	for i := 1; i < len(p); i++ {
		if p[i].Index != p[i-1].Index+1 {
			return 0, 0, fmt.Errorf("page [%d..]: block %d follows block %d", p[0].Index, p[i].Index, p[i-1].Index)
		}
	}
	return p[0].Index, p[len(p)-1].Index + 1, nil
}

// ascending reads [start, end) with Blocks and checks that its pages are
// contiguous, in ascending order, and cover exactly the range; it returns
// the blocks.
func ascending(ctx context.Context, h reconcile.History, start, end uint64) ([]icrc3.Block, error) {
	pages, err := collect(ctx, h.Blocks, start, end)
	if err != nil {
		return nil, fmt.Errorf("Blocks(%d, %d): %w", start, end, err)
	}
	var out []icrc3.Block
	next := start
	for _, p := range pages {
		lo, hi, err := contiguous(p)
		if err != nil {
			return nil, fmt.Errorf("Blocks(%d, %d): %w", start, end, err)
		}
		if lo != next {
			return nil, fmt.Errorf("Blocks(%d, %d): page [%d, %d) where block %d was due", start, end, lo, hi, next)
		}
		next = hi
		out = append(out, p...)
	}
	if next != end {
		return nil, fmt.Errorf("Blocks(%d, %d): pages end at %d", start, end, next)
	}
	return out, nil
}

// descending is ascending for BlocksDesc (or another top-down walk): pages
// ascending within, from the top of the range down. It returns the blocks
// in ascending order.
func descending(ctx context.Context, walk walkFn, start, end uint64) ([]icrc3.Block, error) {
	pages, err := collect(ctx, walk, start, end)
	if err != nil {
		return nil, fmt.Errorf("BlocksDesc(%d, %d): %w", start, end, err)
	}
	top := end
	for _, p := range pages {
		lo, hi, err := contiguous(p)
		if err != nil {
			return nil, fmt.Errorf("BlocksDesc(%d, %d): %w", start, end, err)
		}
		if hi != top {
			return nil, fmt.Errorf("BlocksDesc(%d, %d): page [%d, %d) where one ending at %d was due", start, end, lo, hi, top)
		}
		top = lo
	}
	if top != start {
		return nil, fmt.Errorf("BlocksDesc(%d, %d): pages end at %d", start, end, top)
	}
	var out []icrc3.Block
	for i := len(pages) - 1; i >= 0; i-- {
		out = append(out, pages[i]...)
	}
	return out, nil
}

// chained checks that blocks, ascending and ending at the tip, hash-chain
// to the certified tip.
func chained(tip icrc3.Tip, blocks []icrc3.Block) error {
	if len(blocks) == 0 || blocks[len(blocks)-1].Index != tip.Index {
		return fmt.Errorf("the blocks do not end at the tip %d", tip.Index)
	}
	v := icrc3.NewVerifier(tip.Anchor())
	if err := v.PushPage(blocks); err != nil {
		return fmt.Errorf("the blocks do not chain to the certified tip %d: %w", tip.Index, err)
	}
	return nil
}

// certifiedTip reads the tip and checks it against the ledger's length.
func certifiedTip(ctx context.Context, f Fixture) (icrc3.Tip, error) {
	tip, err := f.History.Tip(ctx)
	if err != nil {
		return tip, fmt.Errorf("Tip: %w", err)
	}
	if n := f.Ledger.Len(); tip.Len() != n {
		return tip, fmt.Errorf("Tip proves %d blocks (empty %v), the ledger holds %d", tip.Len(), tip.Empty, n)
	}
	return tip, nil
}

func checkTip(ctx context.Context, f Fixture) error {
	tip, err := certifiedTip(ctx, f)
	if err != nil {
		return err
	}
	if tip.Empty {
		return errors.New("the fixture's ledger has no blocks")
	}
	if tip.Time == 0 {
		return errors.New("Tip: no certified time")
	}
	blocks, err := descending(ctx, f.History.BlocksDesc, 0, tip.Len())
	if err != nil {
		return err
	}
	return chained(tip, blocks)
}

func checkBlocks(ctx context.Context, f Fixture) error {
	tip, err := certifiedTip(ctx, f)
	if err != nil {
		return err
	}
	blocks, err := ascending(ctx, f.History, 0, tip.Len())
	if err != nil {
		return err
	}
	return chained(tip, blocks)
}

func checkBlocksDesc(ctx context.Context, f Fixture) error {
	tip, err := certifiedTip(ctx, f)
	if err != nil {
		return err
	}
	// A range under the tip: the pages still end at its end, and chain
	// to the blocks above read separately.
	n := tip.Len()
	mid := n / 2
	low, err := descending(ctx, f.History.BlocksDesc, 0, mid)
	if err != nil {
		return err
	}
	high, err := descending(ctx, f.History.BlocksDesc, mid, n)
	if err != nil {
		return err
	}
	return chained(tip, append(low, high...))
}

// ranges are the ranges around each edge: starting, ending and crossing it.
func ranges(f Fixture, n uint64) [][2]uint64 {
	var rs [][2]uint64
	for _, e := range f.Ledger.Edges() {
		if e == 0 || e >= n {
			continue
		}
		rs = append(rs, [2]uint64{e - 1, e + 1}, [2]uint64{e, min(e+3, n)}, [2]uint64{e - 1, e}, [2]uint64{e - 1, n})
	}
	return rs
}

func checkEdges(ctx context.Context, f Fixture) error {
	tip, err := certifiedTip(ctx, f)
	if err != nil {
		return err
	}
	n := tip.Len()
	all, err := ascending(ctx, f.History, 0, n)
	if err != nil {
		return err
	}
	if err := chained(tip, all); err != nil {
		return err
	}
	rs := ranges(f, n)
	if len(rs) == 0 {
		return errors.New("the fixture's ledger archives nothing: no edge to cross")
	}
	for _, r := range rs {
		up, err := ascending(ctx, f.History, r[0], r[1])
		if err != nil {
			return err
		}
		down, err := descending(ctx, f.History.BlocksDesc, r[0], r[1])
		if err != nil {
			return err
		}
		for i := range up {
			want := all[r[0]+uint64(i)].Hash
			if up[i].Hash != want || down[i].Hash != want {
				return fmt.Errorf("range [%d, %d): block %d differs from the chain's", r[0], r[1], up[i].Index)
			}
		}
	}
	return nil
}

func checkEmpty(ctx context.Context, f Fixture) error {
	tip, err := certifiedTip(ctx, f)
	if err != nil {
		return err
	}
	for _, at := range []uint64{0, tip.Len() / 2, tip.Len()} {
		for name, walk := range map[string]walkFn{"Blocks": f.History.Blocks, "BlocksDesc": f.History.BlocksDesc} {
			pages, err := collect(ctx, walk, at, at)
			if err != nil {
				return fmt.Errorf("%s(%d, %d): %w", name, at, at, err)
			}
			for _, p := range pages {
				if len(p) > 0 {
					return fmt.Errorf("%s(%d, %d): a page of %d blocks from an empty range", name, at, at, len(p))
				}
			}
		}
	}
	return nil
}

func checkBeyondTip(ctx context.Context, f Fixture) error {
	tip, err := certifiedTip(ctx, f)
	if err != nil {
		return err
	}
	n := tip.Len()
	for _, r := range [][2]uint64{{0, n + 1}, {n, n + 3}, {n - 1, n + 10}} {
		for name, walk := range map[string]walkFn{"Blocks": f.History.Blocks, "BlocksDesc": f.History.BlocksDesc} {
			if _, err := collect(ctx, walk, r[0], r[1]); err == nil {
				return fmt.Errorf("%s(%d, %d) past the tip %d: no error", name, r[0], r[1], tip.Index)
			}
		}
	}
	return nil
}

var errHalt = errors.New("historytest: halt")

// callbackStops checks that a walk ends with fn's error after its first
// page, delivering no page after it.
func callbackStops(ctx context.Context, name string, walk walkFn, n uint64) error {
	calls := 0
	err := walk(ctx, 0, n, func([]icrc3.Block) error { calls++; return errHalt })
	if !errors.Is(err, errHalt) {
		return fmt.Errorf("%s: the callback's error came back as %v", name, err)
	}
	if calls != 1 {
		return fmt.Errorf("%s: %d pages delivered after the callback failed", name, calls-1)
	}
	return nil
}

func checkCallbackError(ctx context.Context, f Fixture) error {
	tip, err := certifiedTip(ctx, f)
	if err != nil {
		return err
	}
	if err := callbackStops(ctx, "Blocks", f.History.Blocks, tip.Len()); err != nil {
		return err
	}
	return callbackStops(ctx, "BlocksDesc", f.History.BlocksDesc, tip.Len())
}

func checkCancel(ctx context.Context, f Fixture) error {
	tip, err := certifiedTip(ctx, f)
	if err != nil {
		return err
	}
	for name, walk := range map[string]walkFn{"Blocks": f.History.Blocks, "BlocksDesc": f.History.BlocksDesc} {
		// Cancelled before the walk: nothing delivered, an error.
		done, cancel := context.WithCancel(ctx)
		cancel()
		calls := 0
		err := walk(done, 0, tip.Len(), func([]icrc3.Block) error { calls++; return nil })
		if err == nil || calls != 0 {
			return fmt.Errorf("%s under a cancelled context: %d pages, error %v", name, calls, err)
		}
		// Cancelled during a walk of several pages: it ends with the
		// context's error (a walk of one page may have ended already).
		pages, err := collect(ctx, walk, 0, tip.Len())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		mid, cancel := context.WithCancel(ctx)
		err = walk(mid, 0, tip.Len(), func([]icrc3.Block) error { cancel(); return nil })
		cancel()
		if len(pages) > 1 && !errors.Is(err, context.Canceled) || len(pages) == 1 && err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s cancelled during a walk of %d pages: error %v, want context.Canceled", name, len(pages), err)
		}
	}
	return nil
}

func checkDetect(ctx context.Context, f Fixture) error {
	ft, err := f.History.Detect(ctx)
	if err != nil {
		return fmt.Errorf("Detect: %w", err)
	}
	if ft.PageSize == 0 {
		return errors.New("Detect: no page size")
	}
	want := f.Ledger.Minting()
	if ft.MintingAccount == nil || !ft.MintingAccount.Equal(want) {
		return fmt.Errorf("Detect: minting account %v, the ledger's is %v", ft.MintingAccount, want)
	}
	if !ft.MintingCertified {
		return errors.New("Detect: the minting account is not certified")
	}
	return nil
}

func checkIdentity(ctx context.Context, f Fixture) error {
	key, mode := f.History.NetworkKey(), f.History.Mode()
	if key == "" {
		return errors.New("NetworkKey: empty")
	}
	if _, err := f.History.Tip(ctx); err != nil {
		return fmt.Errorf("Tip: %w", err)
	}
	f.History.Forget()
	if k, m := f.History.NetworkKey(), f.History.Mode(); k != key || m != mode {
		return fmt.Errorf("NetworkKey/Mode changed from %q/%v to %q/%v across reads and Forget", key, mode, k, m)
	}
	return nil
}

func checkForget(ctx context.Context, f Fixture) error {
	old, err := certifiedTip(ctx, f)
	if err != nil {
		return err
	}
	if _, err := ascending(ctx, f.History, 0, old.Len()); err != nil {
		return err
	}
	if err := f.Ledger.Reset(); err != nil {
		return fmt.Errorf("reset the ledger: %w", err)
	}
	f.History.Forget()
	tip, err := certifiedTip(ctx, f)
	if err != nil {
		return fmt.Errorf("after Forget: %w", err)
	}
	if tip.Hash == old.Hash {
		return errors.New("after Forget: the tip of the old history")
	}
	up, err := ascending(ctx, f.History, 0, tip.Len())
	if err != nil {
		return fmt.Errorf("after Forget: %w", err)
	}
	if err := chained(tip, up); err != nil {
		return fmt.Errorf("after Forget: %w", err)
	}
	down, err := descending(ctx, f.History.BlocksDesc, 0, tip.Len())
	if err != nil {
		return fmt.Errorf("after Forget: %w", err)
	}
	if err := chained(tip, down); err != nil {
		return fmt.Errorf("after Forget: %w", err)
	}
	return nil
}

func checkAimed(ctx context.Context, f Fixture) error {
	a := f.History
	tip, err := certifiedTip(ctx, f)
	if err != nil {
		return err
	}
	n := tip.Len()
	plain, err := descending(ctx, f.History.BlocksDesc, 0, n)
	if err != nil {
		return err
	}
	// A floor at the start: the whole range, as the plain walk gives it.
	zero := func() uint64 { return 0 }
	all, err := descending(ctx, func(ctx context.Context, s, e uint64, fn func([]icrc3.Block) error) error {
		return a.BlocksDescAbove(ctx, s, e, zero, fn)
	}, 0, n)
	if err != nil {
		return fmt.Errorf("BlocksDescAbove, floor 0: %w", err)
	}
	for i := range plain {
		if plain[i].Hash != all[i].Hash {
			return fmt.Errorf("BlocksDescAbove, floor 0: block %d differs from BlocksDesc's", plain[i].Index)
		}
	}
	// A raised floor: at least [floor, n), every block the plain walk's,
	// pages still contiguous from the top down.
	floor := n / 2
	top := n
	err = a.BlocksDescAbove(ctx, 0, n, func() uint64 { return floor }, func(p []icrc3.Block) error {
		lo, hi, err := contiguous(p)
		if err != nil {
			return err
		}
		if hi != top {
			return fmt.Errorf("page [%d, %d) where one ending at %d was due", lo, hi, top)
		}
		top = lo
		for _, b := range p {
			if b.Hash != plain[b.Index].Hash {
				return fmt.Errorf("block %d differs from BlocksDesc's", b.Index)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("BlocksDescAbove, floor %d: %w", floor, err)
	}
	if top > floor {
		return fmt.Errorf("BlocksDescAbove, floor %d: the walk stopped at %d", floor, top)
	}
	return nil
}
