package ledgertest

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc3"
)

// ICPLedger is a ledger in the style of the ICP ledger: it executes
// icrc1_transfer, icrc2_approve and icrc2_transfer_from with the ledger
// rules of Ledger, but records every block as the ICP ledger does (a
// protobuf Block chained by SHA-256 of its bytes, accounts as
// AccountIdentifiers, the fee always recorded, legacy memo 0), certifies
// the raw 32-byte hash of its last block, and serves history only through
// query_encoded_blocks, archives and its archives' get_encoded_blocks: no
// ICRC-3 endpoint.
//
// Deduplication is the ICP ledger's, on the recorded transaction (see
// icp_dedup.go), before the inner ledger's own.
type ICPLedger struct {
	h     host
	id    principal.Principal
	inner *Ledger
	// threshold/batch: archive the oldest batch once threshold blocks are
	// held; 0: never. capacity bounds one archive's blocks.
	threshold, batch, capacity uint64

	certified atomic.Pointer[[]byte]

	// upd serialises the calls, so that a call's duplicate check and its
	// execution see the same chain.
	upd         sync.Mutex
	mu          sync.RWMutex
	raws        [][]byte
	hashes      [][32]byte
	archives    []*ICPArchive
	archivedEnd uint64               // blocks [0, archivedEnd) are in archives
	seen        map[[32]byte]icpSeen // TxHash of stamped blocks
}

// ICPArchive is an archive canister of an ICPLedger.
type ICPArchive struct {
	l     *ICPLedger
	id    principal.Principal
	start uint64
	n     atomic.Uint64 // blocks held: [start, start+n)
}

// NewICPLedger creates and installs an ICP-style ledger. cfg configures the
// inner ledger's rules (fee, minting account, window, initial balances);
// its archive settings apply to the ICP blocks. Block style, tip format and
// endpoint switches do not apply.
func (s *Server) NewICPLedger(cfg LedgerConfig) (*ICPLedger, error) {
	l := &ICPLedger{h: s, seen: map[[32]byte]icpSeen{}, threshold: cfg.ArchiveThreshold, batch: cfg.ArchiveBatch, capacity: cfg.ArchiveCapacity}
	if l.threshold > 0 && l.batch == 0 {
		l.batch = max(l.threshold/2, 1)
	}
	inner := cfg
	inner.ArchiveThreshold, inner.ArchiveBatch, inner.ArchiveCapacity = 0, 0, 0
	inner.BlockStyle, inner.TipFormat = StyleDFINITY, TipLEB128
	inner.DisableICRC3, inner.DisableLegacy = false, false
	in, err := newLedger(s, inner)
	if err != nil {
		return nil, err
	}
	l.inner, l.id = in, in.ID()
	var none []byte
	l.certified.Store(&none)
	if err := l.sync(); err != nil {
		return nil, err
	}
	s.Install(l)
	return l, nil
}

// ID is the ledger's canister id.
func (l *ICPLedger) ID() principal.Principal { return l.id }

// CertifiedData is the raw hash of the last block (nil before the first).
func (l *ICPLedger) CertifiedData() []byte { return *l.certified.Load() }

// Inner is the ledger that executes the calls: balances, executions, mint.
func (l *ICPLedger) Inner() *Ledger { return l.inner }

// MintingAccount is the ledger's minting account.
func (l *ICPLedger) MintingAccount() icrc3.Account { return l.inner.MintingAccount() }

// Len is the chain length.
func (l *ICPLedger) Len() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return uint64(len(l.raws))
}

// RawBlock returns block i's protobuf bytes.
func (l *ICPLedger) RawBlock(i uint64) ([]byte, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if i >= uint64(len(l.raws)) {
		return nil, false
	}
	return l.raws[i], true
}

// Archives lists the archives and the blocks each holds.
func (l *ICPLedger) Archives() []ArchiveInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]ArchiveInfo, 0, len(l.archives))
	for _, a := range l.archives {
		if n := a.n.Load(); n > 0 {
			out = append(out, ArchiveInfo{ID: a.id, Start: a.start, End: a.start + n - 1})
		}
	}
	return out
}

// Mint mints through the inner ledger and records the block.
func (l *ICPLedger) Mint(to icrc3.Account, amount icrc3.Nat) (uint64, error) {
	i, err := l.inner.Mint(to, amount)
	if err != nil {
		return 0, err
	}
	return i, l.sync()
}

// Sync records as ICP blocks every block the inner ledger wrote since the
// last call. Reading the history syncs too; Sync is for what a test reads
// from Go (Len, RawBlock, Archives) after calling the inner ledger.
func (l *ICPLedger) Sync() error { return l.sync() }

func (l *ICPLedger) sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := uint64(len(l.raws)); i < l.inner.Len(); i++ {
		v, _ := l.inner.Block(i)
		b, err := icrc3.ParseBlock(i, v, v.Hash())
		if err != nil {
			return fmt.Errorf("ledgertest: icp block %d: %w", i, err)
		}
		blk, err := icpBlockOf(&b)
		if err != nil {
			return fmt.Errorf("ledgertest: icp block %d: %w", i, err)
		}
		if i > 0 {
			p := l.hashes[i-1]
			blk.ParentHash = &p
		}
		raw, err := icp.Encode(blk)
		if err != nil {
			return fmt.Errorf("ledgertest: icp block %d: %w", i, err)
		}
		l.raws, l.hashes = append(l.raws, raw), append(l.hashes, icp.BlockHash(raw))
		if blk.Tx.CreatedAtTime != nil {
			l.seen[icp.TxHash(&blk.Tx)] = icpSeen{index: i, ts: blk.Timestamp}
		}
	}
	if n := len(l.hashes); n > 0 {
		h := l.hashes[n-1][:]
		l.certified.Store(&h)
	}
	l.maybeArchiveLocked()
	return nil
}

func (l *ICPLedger) maybeArchiveLocked() {
	if l.threshold == 0 {
		return
	}
	for uint64(len(l.raws))-l.archivedEnd >= l.threshold {
		n := l.batch
		var a *ICPArchive
		if k := len(l.archives); k > 0 && (l.capacity == 0 || l.archives[k-1].n.Load() < l.capacity) {
			a = l.archives[k-1]
		} else {
			a = &ICPArchive{l: l, id: l.h.NewCanisterID(), start: l.archivedEnd}
			l.archives = append(l.archives, a)
			l.h.Install(a)
		}
		if l.capacity > 0 {
			n = min(n, l.capacity-a.n.Load())
		}
		a.n.Add(n)
		l.archivedEnd += n
	}
}

func u64Of(n *icrc3.Nat) uint64 {
	if n == nil {
		return 0
	}
	if v, ok := n.Uint64(); ok {
		return v
	}
	return math.MaxUint64
}

func idOf(a *icrc3.Account) (*icp.AccountID, error) {
	if a == nil {
		return nil, nil
	}
	id, err := icp.NewAccountID(a.Owner.Raw, a.Subaccount)
	return &id, err
}

// icpBlockOf is the ICP ledger's record of what the inner ledger wrote.
func icpBlockOf(b *icrc3.Block) (*icp.Block, error) {
	from, err := idOf(b.From)
	if err != nil {
		return nil, err
	}
	to, err := idOf(b.To)
	if err != nil {
		return nil, err
	}
	spender, err := idOf(b.Spender)
	if err != nil {
		return nil, err
	}
	tx := icp.Transaction{From: from, To: to, Spender: spender, Amount: u64Of(b.Amount),
		ICRC1Memo: b.Memo, HasICRC1Memo: b.HasMemo, CreatedAtTime: b.CreatedAt}
	switch b.Kind {
	case icrc3.BlockMint:
		tx.Op, tx.From, tx.Spender = icp.OpMint, nil, nil
	case icrc3.BlockBurn:
		tx.Op, tx.To = icp.OpBurn, nil
	case icrc3.BlockApprove:
		tx.Op, tx.To = icp.OpApprove, nil
		fee := u64Of(b.EffectiveFee())
		tx.Fee = &fee
		if b.ExpectedAllowance != nil {
			e := u64Of(b.ExpectedAllowance)
			tx.ExpectedAllowance = &e
		}
		tx.ExpiresAt = b.ExpiresAt
	case icrc3.BlockTransfer, icrc3.BlockTransferFrom:
		tx.Op = icp.OpTransfer
		fee := u64Of(b.EffectiveFee())
		tx.Fee = &fee
	default:
		return nil, fmt.Errorf("block kind %q has no ICP form", b.Kind)
	}
	return &icp.Block{Timestamp: b.TS, Tx: tx}, nil
}

// Update runs the ICRC-1/2 calls on the inner ledger and records the
// blocks they wrote.
func (l *ICPLedger) Update(ctx CallContext, method string, arg []byte) (out []byte, rej *Reject) {
	defer guard(&rej)
	switch method {
	case "icrc1_transfer", "icrc2_approve", "icrc2_transfer_from":
		l.upd.Lock()
		defer l.upd.Unlock()
		if tx, ok := l.icpTxOf(ctx.Caller, method, arg); ok {
			if idx, dup := l.duplicateOf(tx, ctx.Time); dup {
				return duplicateReply(method, idx)
			}
		}
		out, rej = l.inner.Update(ctx, method, arg)
		if err := l.sync(); err != nil {
			return nil, trapReject(err.Error())
		}
		return out, rej
	}
	return l.Query(ctx, method, arg)
}

// icpArgs is GetBlocksArgs of the ICP ledger: nat64 start and length.
type icpArgs struct {
	Start  uint64 `ic:"start"`
	Length uint64 `ic:"length"`
}

type icpArchiveEntry struct {
	CanisterID principal.Principal `ic:"canister_id"`
}

type icpArchives struct {
	Archives []icpArchiveEntry `ic:"archives"`
}

// Query serves the ICP ledger's history endpoints and passes the ICRC-1/2
// queries to the inner ledger; the ICRC-3 and legacy ICRC history
// endpoints do not exist here.
func (l *ICPLedger) Query(ctx CallContext, method string, arg []byte) (out []byte, rej *Reject) {
	defer guard(&rej)
	l.inner.count("", method)
	switch method {
	case "query_encoded_blocks", "archives":
		// Calls made on the inner ledger from Go are recorded when the
		// history is next read.
		if err := l.sync(); err != nil {
			return nil, trapReject(err.Error())
		}
	}
	switch method {
	case "query_encoded_blocks":
		var a icpArgs
		if r := decodeArg(arg, &a); r != nil {
			return nil, r
		}
		return l.queryEncodedBlocks(ctx, a), nil
	case "archives":
		l.mu.RLock()
		es := make([]icpArchiveEntry, 0, len(l.archives))
		for _, a := range l.archives {
			es = append(es, icpArchiveEntry{CanisterID: a.id})
		}
		l.mu.RUnlock()
		return reply(icpArchives{Archives: es})
	case "icrc3_get_blocks", "icrc3_get_tip_certificate", "icrc3_get_archives", "icrc3_supported_block_types",
		"get_blocks", "get_data_certificate", "get_transactions":
		return nil, noMethod(method)
	}
	return l.inner.Query(ctx, method, arg)
}

// faulted applies a lying node's OmitBlock / AlterBlock to blocks
// numbered from first.
func (l *ICPLedger) faulted(f Faults, first uint64, blocks [][]byte) [][]byte {
	if f.OmitBlock == 0 && f.AlterBlock == 0 {
		return blocks
	}
	out := make([][]byte, 0, len(blocks))
	for i, b := range blocks {
		idx := first + uint64(i)
		switch {
		case f.OmitBlock == idx+1:
			continue
		case f.AlterBlock == idx+1:
			blk, err := icp.Decode(b)
			if err == nil {
				blk.Tx.Amount++
				if re, err := icp.Encode(blk); err == nil {
					b = re
				}
			}
		}
		out = append(out, b)
	}
	return out
}

func (l *ICPLedger) queryEncodedBlocks(ctx CallContext, a icpArgs) []byte {
	f := l.h.Faults(l.id)
	l.mu.RLock()
	// A lagging replica answers from a state that has not yet seen the
	// newest LagBlocks blocks: a shorter chain, its last hash certified
	// at a time before the first block it lacks.
	lag := f.LagBlocks
	if ctx.Replicated {
		lag = 0
	}
	n := uint64(len(l.raws)) - min(lag, uint64(len(l.raws)))
	cd := *l.certified.Load()
	if n < uint64(len(l.raws)) {
		cd = []byte{}
		if n > 0 {
			cd = l.hashes[n-1][:]
		}
	}
	start, end := a.Start, a.Start+min(a.Length, maxLegacyBlocksPerReq)
	if end < start || end > n {
		end = n
	}
	local := max(start, l.archivedEnd)
	var blocks [][]byte
	if local < end {
		blocks = append(blocks, l.raws[local:end]...)
	}
	var archived []icpArchivedRange
	for _, ar := range l.archives {
		lo, hi := max(start, ar.start), min(end, ar.start+ar.n.Load())
		if lo < hi {
			archived = append(archived, icpArchivedRange{id: ar.id, start: lo, length: hi - lo})
		}
	}
	l.mu.RUnlock()
	var cert []byte
	if ctx.DataCertificate != nil {
		// A canister's certified data starts as the empty blob.
		cert = certificate(ctx, append([]byte{}, cd...), l.inner.timeBound(n))
	}
	blocks = l.faulted(f, local, blocks)
	l.inner.blocksSent.Add(uint64(len(blocks)))
	return encodeQueryEncodedBlocks(cert, blocks, n, min(local, n), archived)
}

// ID is the archive's canister id.
func (a *ICPArchive) ID() principal.Principal { return a.id }

// CertifiedData: archives certify nothing the client reads.
func (a *ICPArchive) CertifiedData() []byte { return nil }

// Update: queries may be called as updates.
func (a *ICPArchive) Update(ctx CallContext, method string, arg []byte) ([]byte, *Reject) {
	return a.Query(ctx, method, arg)
}

// Query serves get_encoded_blocks: at most 2000 blocks from start, Err
// BadFirstBlockIndex for a start outside the archive.
func (a *ICPArchive) Query(ctx CallContext, method string, arg []byte) (out []byte, rej *Reject) {
	defer guard(&rej)
	a.l.inner.count("archive.", method)
	if method != "get_encoded_blocks" {
		return nil, noMethod(method)
	}
	var ga icpArgs
	if r := decodeArg(arg, &ga); r != nil {
		return nil, r
	}
	if err := a.l.sync(); err != nil {
		return nil, trapReject(err.Error())
	}
	n := a.n.Load()
	if ga.Start < a.start || ga.Start >= a.start+n {
		return encodeGetEncodedBlocksErr(ga.Start, a.start), nil
	}
	end := min(a.start+n, ga.Start+min(ga.Length, maxLegacyBlocksPerReq))
	a.l.mu.RLock()
	blocks := append([][]byte{}, a.l.raws[ga.Start:end]...)
	a.l.mu.RUnlock()
	blocks = a.l.faulted(a.l.h.Faults(a.id), ga.Start, blocks)
	a.l.inner.blocksSent.Add(uint64(len(blocks)))
	return encodeGetEncodedBlocksOk(blocks), nil
}

// icpArchivedRange is one archived range of a query_encoded_blocks reply.
type icpArchivedRange struct {
	id            principal.Principal
	start, length uint64
}

// Candid of the ICP ledger's block replies, hand-encoded because agent-go
// cannot encode func types. Type table (fields in hash order):
//
//	0 record { certificate: 1; blocks: 2; chain_length: nat64; first_block_index: nat64; archived_blocks: 4 }
//	1 opt 3; 2 vec 3; 3 vec nat8; 4 vec 5
//	5 record { callback: 6; start: nat64; length: nat64 }
//	6 func (7) -> (8) query; 7 record { start: nat64; length: nat64 }
//	8 variant { Ok: 2; Err: 9 }; 9 variant { BadFirstBlockIndex: 10; Other: 11 }
//	10 record { requested_index: nat64; first_valid_index: nat64 }
//	11 record { error_code: nat64; error_message: text }
const (
	cNat64 = 0x78
	cNat8  = 0x7b
	cText  = 0x71
	cOpt   = 0x6e
	cVec   = 0x6d
	cRec   = 0x6c
	cVar   = 0x6b
	cFunc  = 0x6a
)

type candidField struct {
	name string
	typ  byte
}

func (t *tableBuilder) sorted(op byte, fs ...candidField) {
	sort.Slice(fs, func(i, j int) bool { return idlHash(fs[i].name) < idlHash(fs[j].name) })
	t.raw(op)
	t.u(uint64(len(fs)))
	for _, f := range fs {
		t.u(uint64(idlHash(f.name)))
		t.raw(f.typ)
	}
}

var icpTable = func() []byte {
	var t tableBuilder
	t.u(12)
	t.sorted(cRec, candidField{"certificate", 1}, candidField{"blocks", 2}, candidField{"chain_length", cNat64},
		candidField{"first_block_index", cNat64}, candidField{"archived_blocks", 4})
	t.raw(cOpt, 3)
	t.raw(cVec, 3)
	t.raw(cVec, cNat8)
	t.raw(cVec, 5)
	t.sorted(cRec, candidField{"callback", 6}, candidField{"start", cNat64}, candidField{"length", cNat64})
	t.raw(cFunc, 1, 7, 1, 8, 1, 1)
	t.sorted(cRec, candidField{"start", cNat64}, candidField{"length", cNat64})
	t.sorted(cVar, candidField{"Ok", 2}, candidField{"Err", 9})
	t.sorted(cVar, candidField{"BadFirstBlockIndex", 10}, candidField{"Other", 11})
	t.sorted(cRec, candidField{"requested_index", cNat64}, candidField{"first_valid_index", cNat64})
	t.sorted(cRec, candidField{"error_code", cNat64}, candidField{"error_message", cText})
	return t.b
}()

func icpHeader(typ byte) []byte {
	return append(append([]byte("DIDL"), icpTable...), 1, typ)
}

// fieldOrder returns names in Candid's wire order.
func fieldOrder(names ...string) []string {
	sort.Slice(names, func(i, j int) bool { return idlHash(names[i]) < idlHash(names[j]) })
	return names
}

func (e *encoder) blobs(bs [][]byte) {
	e.u(uint64(len(bs)))
	for _, b := range bs {
		e.bytes(b)
	}
}

func encodeQueryEncodedBlocks(cert []byte, blocks [][]byte, chainLen, first uint64, archived []icpArchivedRange) []byte {
	e := encoder{b: icpHeader(0)}
	for _, name := range fieldOrder("certificate", "blocks", "chain_length", "first_block_index", "archived_blocks") {
		switch name {
		case "certificate":
			if cert == nil {
				e.b = append(e.b, 0)
			} else {
				e.b = append(e.b, 1)
				e.bytes(cert)
			}
		case "blocks":
			e.blobs(blocks)
		case "chain_length":
			e.nat64(chainLen)
		case "first_block_index":
			e.nat64(first)
		case "archived_blocks":
			e.u(uint64(len(archived)))
			for _, a := range archived {
				for _, f := range fieldOrder("callback", "start", "length") {
					switch f {
					case "callback":
						e.funcRef(a.id, "get_encoded_blocks")
					case "start":
						e.nat64(a.start)
					case "length":
						e.nat64(a.length)
					}
				}
			}
		}
	}
	return e.b
}

func armIndex(arm string, arms ...string) uint64 {
	for i, a := range fieldOrder(arms...) {
		if a == arm {
			return uint64(i)
		}
	}
	panic("no arm " + arm)
}

func encodeGetEncodedBlocksOk(blocks [][]byte) []byte {
	e := encoder{b: icpHeader(8)}
	e.u(armIndex("Ok", "Ok", "Err"))
	e.blobs(blocks)
	return e.b
}

func encodeGetEncodedBlocksErr(requested, firstValid uint64) []byte {
	e := encoder{b: icpHeader(8)}
	e.u(armIndex("Err", "Ok", "Err"))
	e.u(armIndex("BadFirstBlockIndex", "BadFirstBlockIndex", "Other"))
	for _, f := range fieldOrder("requested_index", "first_valid_index") {
		if f == "requested_index" {
			e.nat64(requested)
		} else {
			e.nat64(firstValid)
		}
	}
	return e.b
}
