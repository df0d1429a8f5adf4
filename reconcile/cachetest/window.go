package cachetest

import "github.com/reconciled/reconciled/icrc3"

// WindowOf is BlockCache.WindowBlocks over blocks, in index order: the
// first block with ts >= from and the last with ts <= to, ok when some
// block has its ts in [from, to]. A block without a timestamp (ts 0) is in
// no window.
func WindowOf(blocks []icrc3.Block, from, to uint64) (first, last uint64, ok bool) {
	from = max(from, 1)
	var hasFirst bool
	for _, b := range blocks {
		if b.TS == 0 {
			continue
		}
		if b.TS >= from && !hasFirst {
			first, hasFirst = b.Index, true
		}
		if b.TS <= to {
			last = b.Index
		}
		ok = ok || b.TS >= from && b.TS <= to
	}
	if !ok {
		return 0, 0, false
	}
	return first, last, true
}
