package ledgertest

import "sync"

// The replica keeps the Candid encoding of each block it serves, per
// endpoint family (the legacy Value type has a Nat64 arm the ICRC-3 one
// lacks), and writes pages from those bytes. A block never changes once
// appended, so a cached encoding is the one a fresh Value tree would give;
// building that tree and encoding it again for every page cost the replica
// about as much CPU per block as a client's decoding and hashing, which a
// benchmark running both on one machine charges to the client. Blocks
// touched by a data fault are encoded afresh and never cached.

// encCacheBudget bounds the cached bytes per family; past it the family's
// cache starts over, so a full sync of a big ledger churns it instead of
// holding every block twice.
const encCacheBudget = 128 << 20

type encCache struct {
	budget int // 0: encCacheBudget
	mu     sync.Mutex
	fam    [2]map[uint64][]byte // [legacy]: block index -> encoded Value
	bytes  [2]int
}

func famOf(legacy bool) int {
	if legacy {
		return 1
	}
	return 0
}

// encodedBlocks appends the blocks [lo, hi) that a canister with data
// faults f serves, each with its encoding as a Value of the family. The
// caller holds l.mu for reading.
func (l *Ledger) encodedBlocks(out []indexedBlock, lo, hi uint64, f Faults, legacy bool) []indexedBlock {
	fam := famOf(legacy)
	first := len(out)
	l.enc.mu.Lock()
	m := l.enc.fam[fam]
	for i := lo; i < hi; i++ {
		if f.OmitBlock != 0 && f.OmitBlock-1 == i {
			continue
		}
		var b []byte
		if f.AlterBlock == 0 || f.AlterBlock-1 != i {
			b = m[i]
		}
		out = append(out, indexedBlock{id: i, enc: b})
	}
	l.enc.mu.Unlock()

	// Encode the misses into one buffer; each block's slice is capped so
	// that nothing appended to one can overwrite the next.
	e := encoder{legacy: legacy}
	var ends []int
	var fresh []int // positions in out of the misses to cache
	for k := first; k < len(out); k++ {
		if out[k].enc != nil {
			continue
		}
		v, _ := l.served(out[k].id, f)
		e.value(&v)
		ends = append(ends, len(e.b))
		fresh = append(fresh, k)
	}
	if len(fresh) == 0 {
		return out
	}
	start := 0
	for j, k := range fresh {
		out[k].enc = e.b[start:ends[j]:ends[j]]
		start = ends[j]
	}
	l.enc.mu.Lock()
	defer l.enc.mu.Unlock()
	budget := l.enc.budget
	if budget == 0 {
		budget = encCacheBudget
	}
	if l.enc.fam[fam] == nil || l.enc.bytes[fam]+len(e.b) > budget {
		l.enc.fam[fam], l.enc.bytes[fam] = make(map[uint64][]byte, len(fresh)), 0
	}
	m = l.enc.fam[fam]
	for _, k := range fresh {
		if i := out[k].id; f.AlterBlock == 0 || f.AlterBlock-1 != i {
			m[i] = out[k].enc
			l.enc.bytes[fam] += len(out[k].enc)
		}
	}
	return out
}

// probed applies LieProbes to a reply of the single block b.
func (l *Ledger) probed(b indexedBlock, f Faults, legacy bool) indexedBlock {
	if !f.LieProbes {
		return b
	}
	v, _ := l.served(b.id, f)
	v = lieProbe(f, v)
	return indexedBlock{id: b.id, enc: encodeValue(&v, legacy)}
}
