package ledgertest

import (
	"fmt"

	"github.com/aviate-labs/agent-go/principal"
)

// Archive is an archive canister of a Ledger. Blocks are immutable once
// appended, so an archive reads them from the ledger's chain instead of
// copying them; what it serves is decided by its range alone.
type Archive struct {
	id         principal.Principal
	l          *Ledger
	start, end uint64 // [start, end): set under l.mu
}

// ID returns the archive's canister id.
func (a *Archive) ID() principal.Principal { return a.id }

// CertifiedData: archives certify nothing.
func (a *Archive) CertifiedData() []byte { return nil }

// maybeArchive moves the oldest blocks to archives when the unarchived
// count reaches the threshold. With Overlap the blocks archived by a round
// stay served by the ledger until the next round, as when the ledger has
// updated its archive index but not yet dropped its copies. l.mu is held.
func (l *Ledger) maybeArchive() {
	if l.cfg.ArchiveThreshold == 0 {
		return
	}
	n := uint64(len(l.chain))
	if n-l.archivedEnd < l.cfg.ArchiveThreshold {
		return
	}
	prevEnd := l.archivedEnd
	batch := min(l.cfg.ArchiveBatch, n-l.archivedEnd)
	for batch > 0 {
		var a *Archive
		if k := len(l.archives); k > 0 && (l.cfg.ArchiveCapacity == 0 || l.archives[k-1].end-l.archives[k-1].start < l.cfg.ArchiveCapacity) {
			a = l.archives[k-1]
		} else {
			a = &Archive{id: l.h.NewCanisterID(), l: l, start: l.archivedEnd, end: l.archivedEnd}
			l.archives = append(l.archives, a)
			l.h.Install(a)
		}
		take := batch
		if l.cfg.ArchiveCapacity > 0 {
			take = min(take, l.cfg.ArchiveCapacity-(a.end-a.start))
		}
		a.end += take
		l.archivedEnd += take
		batch -= take
	}
	if l.cfg.Overlap {
		l.localStart = prevEnd
	} else {
		l.localStart = l.archivedEnd
	}
}

// Update: archives have no update methods of interest; queries may be called
// as updates, as on the IC.
func (a *Archive) Update(ctx CallContext, method string, arg []byte) (out []byte, rej *Reject) {
	ctx.Replicated = true
	return a.Query(ctx, method, arg)
}

// Query serves the archive's blocks with the DFINITY archive's rules.
func (a *Archive) Query(ctx CallContext, method string, arg []byte) (out []byte, rej *Reject) {
	defer guard(&rej)
	a.l.count("archive.", method)
	switch method {
	case "icrc3_get_blocks":
		if a.l.cfg.DisableICRC3 {
			return nil, noMethod(method)
		}
		var args []getBlocksArg
		if r := decodeArg(arg, &args); r != nil {
			return nil, r
		}
		return a.getBlocks(args)
	case "get_blocks":
		if a.l.cfg.DisableLegacy {
			return nil, noMethod(method)
		}
		var ga getBlocksArg
		if r := decodeArg(arg, &ga); r != nil {
			return nil, r
		}
		blocks, rej := a.blocks([]getBlocksArg{ga}, maxLegacyBlocksPerReq, true)
		if rej != nil {
			return nil, rej
		}
		return encodeBlockRange(blocks), nil
	case "icrc3_get_tip_certificate":
		return reply((*dataCertificate)(nil))
	case "icrc3_get_archives":
		return reply([]getArchivesEntry{})
	case "icrc3_supported_block_types":
		return a.l.query(ctx, method, arg)
	}
	return nil, noMethod(method)
}

// getBlocks answers icrc3_get_blocks: a prefix of at most 100 blocks summed
// over args, log_length = the archive's own block count, no archived ranges.
func (a *Archive) getBlocks(args []getBlocksArg) ([]byte, *Reject) {
	blocks, rej := a.blocks(args, maxBlocksPerResponse, false)
	if rej != nil {
		return nil, rej
	}
	a.l.mu.RLock()
	count := a.end - a.start
	a.l.mu.RUnlock()
	return encodeGetBlocksResult(count, blocks, nil), nil
}

// blocks collects up to limit blocks over args, each range also capped at
// 2000, trapping when a range starts below the archive's offset.
func (a *Archive) blocks(args []getBlocksArg, limit uint64, legacy bool) ([]indexedBlock, *Reject) {
	f := a.l.h.Faults(a.id)
	a.l.mu.RLock()
	defer a.l.mu.RUnlock()
	var out []indexedBlock
	remaining := limit
	for _, ga := range args {
		start, length := u64Clip(ga.Start), u64Clip(ga.Length)
		if start < a.start {
			return nil, trapReject(fmt.Sprintf("requested index %d is less than the minimal index %d this archive serves", start, a.start))
		}
		length = min(length, maxLegacyBlocksPerReq, remaining)
		end := min(satAdd(start, length), a.end)
		if start < end {
			out = a.l.encodedBlocks(out, start, end, f, legacy)
			remaining -= end - start
		}
		if remaining == 0 {
			break
		}
	}
	if len(args) == 1 && u64Clip(args[0].Length) == 1 && len(out) == 1 {
		out[0] = a.l.probed(out[0], f, legacy)
	}
	a.l.blocksSent.Add(uint64(len(out)))
	return out, nil
}
