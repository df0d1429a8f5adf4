package ledgertest

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
)

// Page limits of the DFINITY ledger and archive (ICRC3.md §5).
const (
	maxBlocksPerResponse  = 100  // icrc3_get_blocks, summed over args
	maxLegacyBlocksPerReq = 2000 // legacy get_blocks; archives also cap each range at this
)

func trapReject(msg string) *Reject {
	return &Reject{Code: RejectCanisterError, Message: "Canister trapped: " + msg, ErrorCode: "IC0503"}
}

func noMethod(method string) *Reject {
	return &Reject{Code: RejectDestinationInvalid, Message: fmt.Sprintf("Canister has no query or update method %q", method), ErrorCode: "IC0536"}
}

// guard turns a panic in a handler into a trap: a canister bug must show up
// as a reject, never take the replica down.
func guard(rej **Reject) {
	if p := recover(); p != nil {
		*rej = trapReject(fmt.Sprintf("panicked: %v\n%s", p, debug.Stack()))
	}
}

func decodeArg(arg []byte, out any) *Reject {
	if err := candid.Unmarshal(arg, []any{out}); err != nil {
		return trapReject(fmt.Sprintf("failed to decode call arguments: %v", err))
	}
	return nil
}

func reply(vals ...any) ([]byte, *Reject) {
	b, err := candid.Marshal(vals)
	if err != nil {
		return nil, trapReject(fmt.Sprintf("failed to encode reply: %v", err))
	}
	return b, nil
}

// Update runs icrc1_transfer, icrc2_approve and icrc2_transfer_from; any
// query method may also be called as an update, as on the IC.
func (l *Ledger) Update(ctx CallContext, method string, arg []byte) (out []byte, rej *Reject) {
	defer guard(&rej)
	l.count("", method)
	switch method {
	case "icrc1_transfer":
		var a icrc1.TransferArg
		if r := decodeArg(arg, &a); r != nil {
			return nil, r
		}
		idx, lerr, t := l.call(method, ctx.Caller, a, ctx.Time, func() (*txReq, *TrapError) { return l.transferReq(ctx.Caller, &a) })
		if t != nil {
			return nil, trapReject(t.Message)
		}
		if lerr != nil {
			return reply(icrc1.TransferResult{Err: lerr.transferError()})
		}
		n := idl.NewNat(idx)
		return reply(icrc1.TransferResult{Ok: &n})
	case "icrc2_approve":
		var a icrc1.ApproveArgs
		if r := decodeArg(arg, &a); r != nil {
			return nil, r
		}
		idx, lerr, t := l.call(method, ctx.Caller, a, ctx.Time, func() (*txReq, *TrapError) { return l.approveReq(ctx.Caller, &a) })
		if t != nil {
			return nil, trapReject(t.Message)
		}
		if lerr != nil {
			return reply(icrc1.ApproveResult{Err: lerr.approveError()})
		}
		n := idl.NewNat(idx)
		return reply(icrc1.ApproveResult{Ok: &n})
	case "icrc2_transfer_from":
		var a icrc1.TransferFromArgs
		if r := decodeArg(arg, &a); r != nil {
			return nil, r
		}
		idx, lerr, t := l.call(method, ctx.Caller, a, ctx.Time, func() (*txReq, *TrapError) { return l.transferFromReq(ctx.Caller, &a) })
		if t != nil {
			return nil, trapReject(t.Message)
		}
		if lerr != nil {
			return reply(icrc1.TransferFromResult{Err: lerr.transferFromError()})
		}
		n := idl.NewNat(idx)
		return reply(icrc1.TransferFromResult{Ok: &n})
	}
	return l.query(ctx, method, arg)
}

// Query runs a query method.
func (l *Ledger) Query(ctx CallContext, method string, arg []byte) (out []byte, rej *Reject) {
	defer guard(&rej)
	l.count("", method)
	switch method {
	case "icrc1_transfer", "icrc2_approve", "icrc2_transfer_from":
		// A query cannot commit; answering as if it could would mislead.
		return nil, &Reject{Code: RejectCanisterError, Message: method + " is an update method", ErrorCode: "IC0503"}
	}
	return l.query(ctx, method, arg)
}

type metadataValue struct {
	Nat  *idl.Nat `ic:"Nat,variant"`
	Int  *idl.Int `ic:"Int,variant"`
	Text *string  `ic:"Text,variant"`
	Blob *[]byte  `ic:"Blob,variant"`
}

type metadataEntry struct {
	Key   string        `ic:"0,tuple"`
	Value metadataValue `ic:"1,tuple"`
}

type standard struct {
	Name string `ic:"name"`
	URL  string `ic:"url"`
}

type blockType struct {
	BlockType string `ic:"block_type"`
	URL       string `ic:"url"`
}

type getBlocksArg struct {
	Start  idl.Nat `ic:"start"`
	Length idl.Nat `ic:"length"`
}

type getArchivesArgs struct {
	From *principal.Principal `ic:"from,omitempty"`
}

type getArchivesEntry struct {
	CanisterID principal.Principal `ic:"canister_id"`
	Start      idl.Nat             `ic:"start"`
	End        idl.Nat             `ic:"end"`
}

type legacyArchiveEntry struct {
	CanisterID principal.Principal `ic:"canister_id"`
	Start      idl.Nat             `ic:"block_range_start"`
	End        idl.Nat             `ic:"block_range_end"`
}

type dataCertificate struct {
	Certificate []byte `ic:"certificate"`
	HashTree    []byte `ic:"hash_tree"`
}

type legacyDataCertificate struct {
	Certificate *[]byte `ic:"certificate,omitempty"`
	HashTree    []byte  `ic:"hash_tree"`
}

const icrcURL = "https://github.com/dfinity/ICRC-1/tree/main/standards/"

// u64Clip converts a Candid nat to uint64, saturating: a start or length
// beyond 2^64 can only ever address nothing.
func u64Clip(n idl.Nat) uint64 {
	b := n.BigInt()
	if b == nil || b.Sign() <= 0 {
		return 0
	}
	if !b.IsUint64() {
		return ^uint64(0)
	}
	return b.Uint64()
}

func (l *Ledger) query(ctx CallContext, method string, arg []byte) ([]byte, *Reject) {
	switch method {
	case "icrc3_get_blocks", "icrc3_get_archives", "icrc3_get_tip_certificate", "icrc3_supported_block_types":
		if l.cfg.DisableICRC3 {
			return nil, noMethod(method)
		}
	case "get_blocks", "get_data_certificate", "archives":
		if l.cfg.DisableLegacy {
			return nil, noMethod(method)
		}
	}
	switch method {
	case "icrc1_name":
		return reply(l.cfg.Name)
	case "icrc1_symbol":
		return reply(l.cfg.Symbol)
	case "icrc1_decimals":
		return reply(l.cfg.Decimals)
	case "icrc1_fee":
		return reply(icrc1.IDLNat(l.fee))
	case "icrc1_metadata":
		name, sym := l.cfg.Name, l.cfg.Symbol
		dec := idl.NewNat(uint(l.cfg.Decimals))
		fee := icrc1.IDLNat(l.fee)
		maxMemo := idl.NewNat(uint(l.cfg.MaxMemoLength))
		return reply([]metadataEntry{
			{"icrc1:decimals", metadataValue{Nat: &dec}},
			{"icrc1:name", metadataValue{Text: &name}},
			{"icrc1:symbol", metadataValue{Text: &sym}},
			{"icrc1:fee", metadataValue{Nat: &fee}},
			{"icrc1:max_memo_length", metadataValue{Nat: &maxMemo}},
		})
	case "icrc1_total_supply":
		l.mu.RLock()
		s := l.supply
		l.mu.RUnlock()
		return reply(icrc1.IDLNat(s))
	case "icrc1_minting_account":
		m := l.minting.ToCandid()
		if lie := l.h.Faults(l.id).LieMintingAccount; lie != "" && !ctx.Replicated {
			if lie == "none" {
				return reply((*icrc3.CandidAccount)(nil))
			}
			a, err := icrc3.ParseAccount(lie)
			if err != nil {
				return nil, trapReject("lie_minting_account: " + err.Error())
			}
			m = a.ToCandid()
		}
		return reply(&m)
	case "icrc1_balance_of":
		var a icrc3.CandidAccount
		if r := decodeArg(arg, &a); r != nil {
			return nil, r
		}
		acc, err := a.Account()
		if err != nil {
			return nil, trapReject(err.Error())
		}
		return reply(icrc1.IDLNat(l.BalanceOf(acc)))
	case "icrc2_allowance":
		var a icrc1.AllowanceArgs
		if r := decodeArg(arg, &a); r != nil {
			return nil, r
		}
		return l.allowanceQuery(ctx, &a)
	case "icrc1_supported_standards":
		ss := []standard{{"ICRC-1", icrcURL + "ICRC-1"}, {"ICRC-2", icrcURL + "ICRC-2"}}
		if !l.cfg.DisableICRC3 {
			ss = append(ss, standard{"ICRC-3", icrcURL + "ICRC-3"})
		}
		return reply(ss)
	case "icrc3_supported_block_types":
		bts := []blockType{}
		types := []string{"1burn", "1mint", "1xfer", "2approve", "2xfer"}
		if lie := l.h.Faults(l.id).LieBlockTypes; lie != "" && !ctx.Replicated {
			types = nil
			if lie != "none" {
				types = strings.Split(lie, ",")
			}
		}
		for _, bt := range types {
			std := "ICRC-1"
			if bt[0] == '2' {
				std = "ICRC-2"
			}
			bts = append(bts, blockType{bt, icrcURL + std})
		}
		return reply(bts)
	case "icrc3_get_archives":
		var a getArchivesArgs
		if r := decodeArg(arg, &a); r != nil {
			return nil, r
		}
		out := []getArchivesEntry{}
		for _, ai := range l.listedArchives(ctx) {
			// The filter is by principal order, not block order (ICRC3.md §5).
			if a.From != nil && bytes.Compare(ai.ID.Raw, a.From.Raw) <= 0 {
				continue
			}
			out = append(out, getArchivesEntry{ai.ID, idl.NewNat(ai.Start), idl.NewNat(ai.End)})
		}
		return reply(out)
	case "archives":
		out := []legacyArchiveEntry{}
		for _, ai := range l.listedArchives(ctx) {
			out = append(out, legacyArchiveEntry{ai.ID, idl.NewNat(ai.Start), idl.NewNat(ai.End)})
		}
		return reply(out)
	case "icrc3_get_tip_certificate":
		if ctx.Replicated || ctx.DataCertificate == nil || l.cfg.Uncertified {
			return reply((*dataCertificate)(nil))
		}
		tree, data, at := l.tipAt()
		return reply(&dataCertificate{Certificate: certificate(ctx, data, at), HashTree: tree})
	case "get_data_certificate":
		tree, data, at := l.tipAt()
		dc := legacyDataCertificate{HashTree: tree}
		if !ctx.Replicated && ctx.DataCertificate != nil && !l.cfg.Uncertified {
			c := certificate(ctx, data, at)
			dc.Certificate = &c
		}
		return reply(dc)
	case "icrc3_get_blocks":
		var args []getBlocksArg
		if r := decodeArg(arg, &args); r != nil {
			return nil, r
		}
		return l.getBlocks(args), nil
	case "get_blocks":
		var a getBlocksArg
		if r := decodeArg(arg, &a); r != nil {
			return nil, r
		}
		return l.legacyGetBlocks(ctx, a), nil
	}
	return nil, noMethod(method)
}

func (l *Ledger) allowanceQuery(ctx CallContext, a *icrc1.AllowanceArgs) ([]byte, *Reject) {
	from, err := a.Account.Account()
	if err != nil {
		return nil, trapReject(err.Error())
	}
	sp, err := a.Spender.Account()
	if err != nil {
		return nil, trapReject(err.Error())
	}
	l.mu.RLock()
	fn, ok1 := l.accts.normID(from)
	sn, ok2 := l.accts.normID(sp)
	var cur allowance
	if ok1 && ok2 {
		cur = l.currentAllowance([2]uint32{fn, sn}, ctx.Time)
	}
	l.mu.RUnlock()
	out := icrc1.Allowance{Allowance: icrc1.IDLNat(cur.amount)}
	if cur.expiresAt != 0 {
		e := cur.expiresAt
		out.ExpiresAt = &e
	}
	return reply(out)
}

// visibleLen is the chain length this query sees: a lagging replica has
// not yet seen the newest LagBlocks blocks. l.mu is held.
func (l *Ledger) visibleLen() uint64 {
	n := uint64(len(l.chain))
	lag := l.h.Faults(l.id).LagBlocks
	if lag >= n {
		return 0
	}
	return n - lag
}

// tipAt returns the CBOR tip tree and the certified data of the visible
// chain, and the latest time the state answering can have: before the
// first block it has not seen (no bound when it sees every block).
func (l *Ledger) tipAt() ([]byte, []byte, uint64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := l.visibleLen()
	t := l.tipTreeAt(n)
	r := t.rootHash()
	return t.cbor(), r[:], l.stateTimeBound(n)
}

// timeBound is stateTimeBound for a caller that does not hold l.mu.
func (l *Ledger) timeBound(n uint64) uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.stateTimeBound(n)
}

// stateTimeBound is the latest time of a state holding the first n blocks.
// l.mu is held.
func (l *Ledger) stateTimeBound(n uint64) uint64 {
	if n >= uint64(len(l.chain)) {
		return ^uint64(0)
	}
	if ts := l.chain[n].ts; ts > 0 {
		return ts - 1
	}
	return 0
}

// certificate is ic0.data_certificate() for the state that answers: the
// current one, or an older one for a lagging replica.
func certificate(ctx CallContext, data []byte, notAfter uint64) []byte {
	if notAfter != ^uint64(0) && ctx.DataCertificateAt != nil {
		return ctx.DataCertificateAt(data, notAfter)
	}
	return ctx.DataCertificate(data)
}

// listedArchives is the archive list a query is told: the truth, or under
// LieArchives every archive claiming the whole chain.
func (l *Ledger) listedArchives(ctx CallContext) []ArchiveInfo {
	as := l.Archives()
	if !l.h.Faults(l.id).LieArchives || ctx.Replicated {
		return as
	}
	n := l.Len()
	for i := range as {
		as[i].Start, as[i].End = 0, n-1
	}
	return as
}

// lieProbe applies LieProbes to a reply of exactly one block.
func lieProbe(f Faults, v icrc3.Value) icrc3.Value {
	if !f.LieProbes {
		return v
	}
	fs := append([]icrc3.Field(nil), v.Map...)
	for i := range fs {
		if fs[i].Key == "ts" {
			fs[i].Value = icrc3.NatValue(icrc3.NatFromUint64(1))
		}
	}
	return icrc3.MapValue(fs...)
}

// served materialises block i for a reply, applying the data faults of the
// canister that serves it. ok is false when the block is omitted.
func (l *Ledger) served(i uint64, f Faults) (icrc3.Value, bool) {
	if f.OmitBlock != 0 && f.OmitBlock-1 == i {
		return icrc3.Value{}, false
	}
	v := l.blockValueLocked(i)
	if f.AlterBlock != 0 && f.AlterBlock-1 == i {
		v = alterBlock(v)
	}
	return v, true
}

// alterBlock changes one field the way a lying node would: the amount when
// there is one, else the timestamp. The result is a fresh Value.
func alterBlock(v icrc3.Value) icrc3.Value {
	fs := append([]icrc3.Field(nil), v.Map...)
	for i := range fs {
		if fs[i].Key != "tx" {
			continue
		}
		tx := append([]icrc3.Field(nil), fs[i].Value.Map...)
		for j := range tx {
			if tx[j].Key == "amt" {
				tx[j].Value = icrc3.NatValue(natAdd(tx[j].Value.Nat, icrc3.NatFromUint64(1)))
				fs[i].Value = icrc3.MapValue(tx...)
				return icrc3.MapValue(fs...)
			}
		}
	}
	for i := range fs {
		if fs[i].Key == "ts" {
			fs[i].Value = icrc3.NatValue(natAdd(fs[i].Value.Nat, icrc3.NatFromUint64(1)))
		}
	}
	return icrc3.MapValue(fs...)
}

// getBlocks answers icrc3_get_blocks with the DFINITY ledger's paging: each
// arg is clipped to the blocks still allowed before its archived part is
// computed, and at most 100 local blocks are returned in total.
func (l *Ledger) getBlocks(args []getBlocksArg) []byte {
	f := l.h.Faults(l.id)
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := l.visibleLen()
	local := min(l.localStart, n)
	remaining := uint64(maxBlocksPerResponse)
	var blocks []indexedBlock
	groups := make([]archivedGroup, len(l.archives))
	for _, a := range args {
		if remaining == 0 {
			break
		}
		start, length := u64Clip(a.Start), min(u64Clip(a.Length), remaining)
		end := min(satAdd(start, length), n)
		if start >= end {
			continue
		}
		if start < local {
			archEnd := min(end, local)
			for k, ar := range l.archives {
				s, e := max(start, ar.start), min(archEnd, ar.end)
				if s < e {
					groups[k].archive = ar.id
					groups[k].ranges = append(groups[k].ranges, blockRange{s, e - s})
				}
			}
		}
		if lo := max(start, local); lo < end {
			blocks = l.encodedBlocks(blocks, lo, end, f, false)
			remaining -= end - lo
		}
	}
	if len(args) == 1 && u64Clip(args[0].Length) == 1 && len(blocks) == 1 {
		blocks[0] = l.probed(blocks[0], f, false)
	}
	var archived []archivedGroup
	for _, g := range groups {
		if len(g.ranges) > 0 {
			archived = append(archived, g)
		}
	}
	l.blocksSent.Add(uint64(len(blocks)))
	return encodeGetBlocksResult(n, blocks, archived)
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}

// legacyGetBlocks answers get_blocks: up to 2000 local blocks, and every
// archived range intersecting the request, uncapped.
func (l *Ledger) legacyGetBlocks(ctx CallContext, a getBlocksArg) []byte {
	f := l.h.Faults(l.id)
	l.mu.RLock()
	n := l.visibleLen()
	local := min(l.localStart, n)
	start, length := u64Clip(a.Start), u64Clip(a.Length)
	reqEnd := min(satAdd(start, length), n)
	var archived []legacyArchived
	if start < local {
		archEnd := min(reqEnd, local)
		for _, ar := range l.archives {
			s, e := max(start, ar.start), min(archEnd, ar.end)
			if s < e {
				archived = append(archived, legacyArchived{ar.id, blockRange{s, e - s}})
			}
		}
	}
	first := max(start, local)
	end := min(reqEnd, satAdd(first, maxLegacyBlocksPerReq))
	var blocks []indexedBlock
	if first < end {
		blocks = l.encodedBlocks(nil, first, end, f, true)
	}
	if length == 1 && len(blocks) == 1 {
		blocks[0] = l.probed(blocks[0], f, true)
	}
	data := l.certifiedAt(n)
	at := l.stateTimeBound(n)
	l.mu.RUnlock()
	var cert []byte
	if !ctx.Replicated && ctx.DataCertificate != nil {
		cert = certificate(ctx, data, at)
	}
	l.blocksSent.Add(uint64(len(blocks)))
	return encodeLegacyResponse(first, n, cert, blocks, archived)
}
