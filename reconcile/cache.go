package reconcile

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
)

// windowStartCache is a BlockCache that finds a window's first block
// alone, for a chain that knows where the window ends.
type windowStartCache interface {
	// WindowStart returns the first stored index in [lo, hi] with ts >=
	// from (never a block without a timestamp); ok is false when none is.
	WindowStart(ctx context.Context, ledger string, lo, hi, from uint64) (first uint64, ok bool, err error)
}

// BlockCache keeps verified blocks per chain (the ledger argument is a
// HistoryKey: network, canister and verify mode) so that intents of one ledger
// share one verified chain, and a restart does not re-read it. The store
// implements it on SQLite; MemCache in memory.
type BlockCache interface {
	// PutVerified stores blocks that were verified against a certified tip.
	// Only the recorded range (SaveRange) holds facts: a block held inside
	// it with another hash or ts than one of blocks is reconciled.ErrBlockConflict and
	// nothing is stored; one held outside it (put by a refresh that was cut
	// before it recorded the range) gives way to the block verified now.
	PutVerified(ctx context.Context, ledger string, blocks []icrc3.Block) error
	// ByStamp returns stored blocks in [lo, hi] whose tx.ts (the caller's
	// created_at_time) equals stamp: the only blocks that can match, or
	// nearly match, an intent with that stamp.
	ByStamp(ctx context.Context, ledger string, stamp, lo, hi uint64) ([]icrc3.Block, error)
	// WindowBlocks returns the first stored index in [lo, hi] with ts >= from
	// and the last with ts <= to; ok is false when no stored block of [lo, hi]
	// has its ts in [from, to]. A block without a timestamp (ts 0, a block of
	// an unknown kind) is in no window, even one from 0.
	WindowBlocks(ctx context.Context, ledger string, lo, hi, from, to uint64) (first, last uint64, ok bool, err error)
	// LoadRange and SaveRange persist the verified range.
	LoadRange(ctx context.Context, ledger string) (icrc3.VerifiedRange, bool, error)
	SaveRange(ctx context.Context, ledger string, r icrc3.VerifiedRange) error
	// BlockAt returns the hash and ts of a stored block; ok is false when
	// index is not stored.
	BlockAt(ctx context.Context, ledger string, index uint64) (hash icrc3.Hash, ts uint64, ok bool, err error)
	// Discard forgets every block and the range of one chain, whose
	// ledger's history changed as ch says.
	Discard(ctx context.Context, ledger string, ch reconciled.HistoryChange) error
}

// MemCache is a BlockCache in memory, for tests, benchmarks and the demo.
// It keeps only what matching needs: blocks that carry a created_at_time
// (without their Value) and every block's timestamp. It stores what the
// store stores: a block inside the recorded range is immutable, one outside
// it gives way to another verified block at its index (see PutVerified).
type MemCache struct {
	mu      sync.Mutex
	ledgers map[string]*memLedger
}

type memLedger struct {
	byStamp map[uint64][]icrc3.Block
	stamp   map[uint64]uint64 // index → created_at_time, of the blocks in byStamp
	ts      map[uint64]uint64 // index → ts, for WindowBlocks
	hash    map[uint64]icrc3.Hash
	rng     icrc3.VerifiedRange
	hasRng  bool
}

// NewMemCache returns an empty cache.
func NewMemCache() *MemCache { return &MemCache{ledgers: map[string]*memLedger{}} }

func (m *MemCache) ledger(id string) *memLedger {
	l := m.ledgers[id]
	if l == nil {
		l = &memLedger{byStamp: map[uint64][]icrc3.Block{}, stamp: map[uint64]uint64{}, ts: map[uint64]uint64{}, hash: map[uint64]icrc3.Hash{}}
		m.ledgers[id] = l
	}
	return l
}

// fact reports whether a block held at index is verified history: it lies
// inside the recorded range, or no range was recorded (nothing says it is
// not). A block outside the range is one that a refresh put above the
// range and did not get to record (it was cut): if the ledger's history
// changed since, another history's block.
func (l *memLedger) fact(index uint64) bool {
	return !l.hasRng || !l.rng.Empty() && index >= l.rng.Lo && index <= l.rng.Hi
}

// drop forgets the block held at index.
func (l *memLedger) drop(index uint64) {
	if st, ok := l.stamp[index]; ok {
		l.byStamp[st] = slices.DeleteFunc(l.byStamp[st], func(b icrc3.Block) bool { return b.Index == index })
		if len(l.byStamp[st]) == 0 {
			delete(l.byStamp, st)
		}
		delete(l.stamp, index)
	}
	delete(l.ts, index)
	delete(l.hash, index)
}

// PutVerified stores blocks verified against a certified tip. A block
// already held inside the recorded range, or repeated in blocks, with
// another hash or timestamp is reconciled.ErrBlockConflict, and then nothing is
// stored; one held outside the range is replaced.
func (m *MemCache) PutVerified(_ context.Context, ledger string, blocks []icrc3.Block) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.ledger(ledger)
	seen := make(map[uint64]int, len(blocks))
	for i := range blocks {
		b := &blocks[i]
		if j, dup := seen[b.Index]; dup && (blocks[j].Hash != b.Hash || blocks[j].TS != b.TS) {
			return fmt.Errorf("reconcile: cache %s: block %d twice, hashes %s and %s: %w", ledger, b.Index, blocks[j].Hash, b.Hash, reconciled.ErrBlockConflict)
		}
		seen[b.Index] = i
		if h, held := l.hash[b.Index]; held && l.fact(b.Index) && (h != b.Hash || l.ts[b.Index] != b.TS) {
			return fmt.Errorf("reconcile: cache %s: block %d held with hash %s, now %s: %w", ledger, b.Index, h, b.Hash, reconciled.ErrBlockConflict)
		}
	}
	for i := range blocks {
		b := blocks[i]
		if _, held := l.hash[b.Index]; held {
			if l.fact(b.Index) || l.hash[b.Index] == b.Hash && l.ts[b.Index] == b.TS {
				continue
			}
			l.drop(b.Index)
		}
		l.ts[b.Index], l.hash[b.Index] = b.TS, b.Hash
		if b.CreatedAt != nil {
			b.Raw = nil
			l.byStamp[*b.CreatedAt] = append(l.byStamp[*b.CreatedAt], b)
			l.stamp[b.Index] = *b.CreatedAt
		}
	}
	return nil
}

func (m *MemCache) ByStamp(_ context.Context, ledger string, stamp, lo, hi uint64) ([]icrc3.Block, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []icrc3.Block
	for _, b := range m.ledger(ledger).byStamp[stamp] {
		if b.Index >= lo && b.Index <= hi {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}

// WindowStart is WindowBlocks's first index, of a window without an end.
func (m *MemCache) WindowStart(ctx context.Context, ledger string, lo, hi, from uint64) (uint64, bool, error) {
	first, _, ok, err := m.WindowBlocks(ctx, ledger, lo, hi, from, ^uint64(0))
	return first, ok, err
}

func (m *MemCache) WindowBlocks(_ context.Context, ledger string, lo, hi, from, to uint64) (uint64, uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.ledger(ledger)
	if hi < lo {
		return 0, 0, false, nil
	}
	// Timestamps never decrease along a verified chain: binary search.
	from = max(from, 1)
	tsAt := func(i uint64) (uint64, bool) { t, ok := l.ts[i]; return t, ok }
	n := int(hi - lo + 1)
	first := sort.Search(n, func(k int) bool { t, ok := tsAt(lo + uint64(k)); return !ok || t >= from })
	last := sort.Search(n, func(k int) bool { t, ok := tsAt(lo + uint64(k)); return !ok || t > to }) - 1
	if first >= n || last < first {
		return 0, 0, false, nil
	}
	if _, ok := tsAt(lo + uint64(first)); !ok {
		return 0, 0, false, nil
	}
	return lo + uint64(first), lo + uint64(last), true, nil
}

func (m *MemCache) LoadRange(_ context.Context, ledger string) (icrc3.VerifiedRange, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.ledger(ledger)
	return l.rng, l.hasRng, nil
}

func (m *MemCache) SaveRange(_ context.Context, ledger string, r icrc3.VerifiedRange) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.ledger(ledger)
	l.rng, l.hasRng = r, true
	return nil
}

func (m *MemCache) BlockAt(_ context.Context, ledger string, index uint64) (icrc3.Hash, uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.ledger(ledger)
	h, ok := l.hash[index]
	return h, l.ts[index], ok, nil
}

func (m *MemCache) Discard(_ context.Context, ledger string, _ reconciled.HistoryChange) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ledgers, ledger)
	return nil
}
