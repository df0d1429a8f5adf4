package reconcile

import (
	"context"
	"fmt"
	"time"
)

// CacheTrimmer is a BlockCache that can drop a chain's oldest blocks and
// raise its verified range's bottom past them (store.Store.TrimBlocks):
// what it keeps must still be a verified range with all of its blocks,
// Below the hash of the block under the new Lo.
type CacheTrimmer interface {
	TrimBlocks(ctx context.Context, ledger string, keepTS uint64, maxRuns int) (int, error)
}

// TrimCache bounds the block cache of every ledger this engine has
// decided: blocks with timestamps below keepTS are dropped, where keepTS
// is the range's newest timestamp minus below, or oldest(canister) when
// that is older (the start of the oldest open window; ok false: none
// open). It returns the blocks dropped; a cache that cannot trim drops
// none.
//
// Each batch runs holding the ledger's chain, as a decision does (so no
// page of a walk is waiting to be written), and leaves the chain to load
// its range from the cache again: a range in memory whose bottom the
// cache raised would claim blocks the cache no longer holds. A window
// below the new bottom is then not covered, and its blocks are read from
// the ledger and verified against Below, never assumed.
func (e *Engine) TrimCache(ctx context.Context, below time.Duration, oldest func(canister string) (uint64, bool), maxRuns int) (int, error) {
	tr, ok := e.cache.(CacheTrimmer)
	if !ok || below < 0 {
		return 0, nil
	}
	e.mu.Lock()
	chains := make(map[string]*chain, len(e.chains))
	for canister, c := range e.chains {
		chains[canister] = c
	}
	e.mu.Unlock()
	total := 0
	for canister, c := range chains {
		for {
			if err := ctx.Err(); err != nil {
				return total, err
			}
			n, err := c.trim(ctx, tr, canister, uint64(below), oldest, maxRuns)
			total += n
			if err != nil {
				return total, err
			}
			if n == 0 {
				break
			}
		}
	}
	return total, nil
}

// trim runs one TrimBlocks batch on the chain, holding it.
func (c *chain) trim(ctx context.Context, tr CacheTrimmer, canister string, below uint64, oldest func(string) (uint64, bool), maxRuns int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.load(ctx); err != nil {
		return 0, err
	}
	if !c.has || c.r.Empty() || c.r.HiTS == 0 || c.r.HiTS <= below {
		return 0, nil
	}
	keep := c.r.HiTS - below
	if oldest != nil {
		if from, ok := oldest(canister); ok && from < keep {
			keep = from
		}
	}
	if c.r.LoTS >= keep {
		return 0, nil // nothing older is cached
	}
	n, err := tr.TrimBlocks(ctx, c.ledger, keep, maxRuns)
	// Whatever the outcome, the next decision reads the range the cache
	// holds.
	c.loaded, c.has = false, false
	if err != nil {
		return n, fmt.Errorf("reconcile: trim block cache of %s: %w", c.ledger, err)
	}
	return n, nil
}
