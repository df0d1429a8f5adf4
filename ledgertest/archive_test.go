package ledgertest

import (
	"bytes"
	"testing"

	"github.com/aviate-labs/agent-go/candid/idl"

	"github.com/reconciled/reconciled/icrc3"
)

type page struct {
	logLength uint64
	blocks    map[uint64]icrc3.Value
	order     []uint64
	archived  []tArchived
}

func getBlocksPage(t *testing.T, h *fakeHost, c Canister, args ...getBlocksArg) page {
	t.Helper()
	out, rej := c.Query(h.queryCtx(), "icrc3_get_blocks", mustEncode(t, args))
	if rej != nil {
		t.Fatalf("icrc3_get_blocks: %+v", rej)
	}
	var res tResult
	decodeOne(t, out, &res)
	p := page{logLength: res.LogLength.BigInt().Uint64(), blocks: map[uint64]icrc3.Value{}, archived: res.Archived}
	for _, b := range res.Blocks {
		id := b.ID.BigInt().Uint64()
		p.blocks[id] = b.Block.toValue()
		p.order = append(p.order, id)
	}
	return p
}

func arg(start, length uint64) getBlocksArg { return getBlocksArg{nat(start), nat(length)} }

func TestGetBlocksLimitsAndArchives(t *testing.T) {
	h := newFakeHost()
	l, _, _ := newTestLedger(t, h, LedgerConfig{ArchiveThreshold: 400, ArchiveBatch: 300, ArchiveCapacity: 500})
	if err := l.GenerateHistory(2000, 11, 0); err != nil {
		t.Fatal(err)
	}
	n := l.Len()
	infos := l.Archives()
	if len(infos) < 2 {
		t.Fatalf("want several archives, got %+v", infos)
	}
	// Archives tile [0, localStart) contiguously, each within capacity.
	next := uint64(0)
	for _, ai := range infos {
		if ai.Start != next || ai.End-ai.Start+1 > 500 {
			t.Fatalf("archive ranges %+v", infos)
		}
		next = ai.End + 1
	}
	local := next
	if local != l.localStart || n-local >= 400 {
		t.Fatalf("local start %d, archived up to %d, len %d", l.localStart, local, n)
	}

	// 100 local blocks per call, summed over args; the second arg is clipped
	// to what remains before anything else.
	p := getBlocksPage(t, h, l, arg(local, 70), arg(local+70, 70), arg(local+140, 70))
	if len(p.blocks) != 100 || p.logLength != n || p.order[99] != local+99 {
		t.Fatalf("got %d blocks (last %d), log_length %d", len(p.blocks), p.order[len(p.order)-1], p.logLength)
	}
	// An archived range is grouped per archive, with a callback to it.
	p = getBlocksPage(t, h, l, arg(0, 10), arg(495, 10), arg(local-5, 10))
	if len(p.blocks) != 5 {
		t.Fatalf("want the 5 local blocks, got %d", len(p.blocks))
	}
	if len(p.archived) != 3 {
		t.Fatalf("archived groups %+v", p.archived)
	}
	covered := map[uint64]bool{}
	for _, g := range p.archived {
		arch := h.canister(g.Callback.Method.Principal)
		if arch == nil || g.Callback.Method.Method != "icrc3_get_blocks" {
			t.Fatalf("callback to an unknown canister %v", g.Callback.Method)
		}
		ap := getBlocksPage(t, h, arch, g.Args...)
		for id, v := range ap.blocks {
			want, _ := l.Block(id)
			if v.Hash() != want.Hash() {
				t.Fatalf("archive block %d differs", id)
			}
			covered[id] = true
		}
	}
	for _, id := range []uint64{0, 9, 495, 504, local - 5, local - 1} {
		if !covered[id] {
			t.Fatalf("block %d not reachable through the callbacks", id)
		}
	}

	// Archive rules: prefix of at most 100, log_length = its own count, trap below offset.
	second := h.canister(infos[1].ID)
	ap := getBlocksPage(t, h, second, arg(infos[1].Start, 80), arg(infos[1].Start+80, 80))
	if len(ap.blocks) != 100 || ap.logLength != infos[1].End-infos[1].Start+1 || len(ap.archived) != 0 {
		t.Fatalf("archive page: %d blocks, log_length %d", len(ap.blocks), ap.logLength)
	}
	for i, id := range ap.order {
		if id != infos[1].Start+uint64(i) {
			t.Fatal("archive reply is not a prefix")
		}
	}
	if _, rej := second.Query(h.queryCtx(), "icrc3_get_blocks", mustEncode(t, []getBlocksArg{arg(infos[1].Start-1, 2)})); rej == nil || rej.Code != RejectCanisterError {
		t.Fatalf("below the offset: want reject 5, got %+v", rej)
	}
	out, rej := second.Query(h.queryCtx(), "icrc3_get_tip_certificate", mustEncode(t))
	if rej != nil {
		t.Fatal(rej)
	}
	var dc *dataCertificate
	decodeOne(t, out, &dc)
	if dc != nil {
		t.Fatal("an archive returned a tip certificate")
	}

	// icrc3_get_archives filters by principal order.
	out, _ = l.Query(h.queryCtx(), "icrc3_get_archives", mustEncode(t, getArchivesArgs{From: &infos[0].ID}))
	var gas []getArchivesEntry
	decodeOne(t, out, &gas)
	for _, g := range gas {
		if bytes.Compare(g.CanisterID.Raw, infos[0].ID.Raw) <= 0 {
			t.Fatal("from filter returned a principal <= from")
		}
	}
	if len(gas) != len(infos)-1 {
		t.Fatalf("get_archives from the first: %d of %d", len(gas), len(infos))
	}
}

func TestLegacyGetBlocks(t *testing.T) {
	h := newFakeHost()
	l, _, _ := newTestLedger(t, h, LedgerConfig{ArchiveThreshold: 3000, ArchiveBatch: 1000})
	if err := l.GenerateHistory(5000, 12, 0); err != nil {
		t.Fatal(err)
	}
	n := l.Len()
	local := l.localStart
	if local == 0 || n-local < 2000 {
		t.Fatalf("setup: local start %d of %d", local, n)
	}
	out, rej := l.Query(h.queryCtx(), "get_blocks", mustEncode(t, arg(0, n)))
	if rej != nil {
		t.Fatal(rej)
	}
	var res struct {
		FirstIndex  idl.Nat             `ic:"first_index"`
		ChainLength uint64              `ic:"chain_length"`
		Certificate *[]byte             `ic:"certificate,omitempty"`
		Blocks      []tLegacyValue      `ic:"blocks"`
		Archived    []tLegacyArchivedRg `ic:"archived_blocks"`
	}
	decodeOne(t, out, &res)
	if res.ChainLength != n || res.FirstIndex.BigInt().Uint64() != local || len(res.Blocks) != 2000 {
		t.Fatalf("first %s chain %d blocks %d", res.FirstIndex, res.ChainLength, len(res.Blocks))
	}
	if res.Certificate == nil || !bytes.Equal(*res.Certificate, append([]byte("cert:"), l.CertifiedData()...)) {
		t.Fatal("legacy get_blocks must carry the data certificate")
	}
	for i, b := range res.Blocks {
		want, _ := l.Block(local + uint64(i))
		if b.toValue().Hash() != want.Hash() {
			t.Fatalf("legacy block %d differs", local+uint64(i))
		}
	}
	// Archived ranges are uncapped: the whole archived prefix in one range.
	if len(res.Archived) != 1 || res.Archived[0].Start.BigInt().Uint64() != 0 || res.Archived[0].Length.BigInt().Uint64() != local {
		t.Fatalf("archived %+v", res.Archived)
	}
	cb := res.Archived[0].Callback.Method
	arch := h.canister(cb.Principal)
	if cb.Method != "get_blocks" || arch == nil {
		t.Fatalf("callback %+v", cb)
	}
	out, rej = arch.Query(h.queryCtx(), "get_blocks", mustEncode(t, arg(0, local)))
	if rej != nil {
		t.Fatal(rej)
	}
	var br struct {
		Blocks []tLegacyValue `ic:"blocks"`
	}
	decodeOne(t, out, &br)
	if uint64(len(br.Blocks)) != min(local, 2000) {
		t.Fatalf("archive legacy page %d", len(br.Blocks))
	}
	if c := l.Counters(); c.BlocksServed != 2000+uint64(len(br.Blocks)) || c.Calls["get_blocks"] != 1 || c.Calls["archive.get_blocks"] != 1 {
		t.Fatalf("counters %+v", c)
	}
}

func TestOverlap(t *testing.T) {
	h := newFakeHost()
	l, _, _ := newTestLedger(t, h, LedgerConfig{ArchiveThreshold: 100, ArchiveBatch: 50, Overlap: true})
	if err := l.GenerateHistory(200, 13, 0); err != nil {
		t.Fatal(err)
	}
	infos := l.Archives()
	archEnd := infos[len(infos)-1].End
	if l.localStart > archEnd {
		t.Fatalf("no overlap: ledger serves from %d, archives end at %d", l.localStart, archEnd)
	}
	p := getBlocksPage(t, h, l, arg(l.localStart, 10))
	if len(p.blocks) != 10 || len(p.archived) != 0 {
		t.Fatal("the ledger must still serve the overlapping blocks locally")
	}
	ap := getBlocksPage(t, h, h.canister(infos[len(infos)-1].ID), arg(l.localStart, 10))
	for id, v := range ap.blocks {
		if v.Hash() != p.blocks[id].Hash() {
			t.Fatalf("overlapping block %d differs between ledger and archive", id)
		}
	}
	if len(ap.blocks) != 10 {
		t.Fatalf("archive serves %d of the overlapping blocks", len(ap.blocks))
	}
}

func TestDataFaults(t *testing.T) {
	h := newFakeHost()
	l, _, _ := newTestLedger(t, h, LedgerConfig{ArchiveThreshold: 40, ArchiveBatch: 20})
	if err := l.GenerateHistory(60, 14, 0); err != nil {
		t.Fatal(err)
	}
	n := l.Len()
	arch := h.canister(l.Archives()[0].ID)
	honest, _ := l.Block(n - 3)

	h.setFaults(l.ID(), Faults{OmitBlock: n - 3 + 1})
	p := getBlocksPage(t, h, l, arg(n-5, 5))
	if _, ok := p.blocks[n-3]; ok || len(p.blocks) != 4 {
		t.Fatalf("omitted block served: %v", p.order)
	}
	h.setFaults(l.ID(), Faults{AlterBlock: n - 3 + 1})
	p = getBlocksPage(t, h, l, arg(n-5, 5))
	if v := p.blocks[n-3]; v.Hash() == honest.Hash() || natOf(t, v, "tx", "amt") != natOf(t, honest, "tx", "amt")+1 {
		t.Fatal("altered block must differ in its amount")
	}
	if l.CertifiedData() == nil || !bytes.Equal(l.CertifiedData(), l.certifiedAt(n)) {
		t.Fatal("the certified tip must stay honest")
	}
	// Archive faults apply to the archive's replies.
	h.setFaults(arch.ID(), Faults{OmitBlock: 1})
	if ap := getBlocksPage(t, h, arch, arg(0, 3)); len(ap.blocks) != 2 {
		t.Fatal("archive omit fault not applied")
	}
	h.setFaults(arch.ID(), Faults{})

	// Lag: shorter log_length and an older certified tip.
	h.setFaults(l.ID(), Faults{LagBlocks: 4})
	p = getBlocksPage(t, h, l, arg(0, n))
	if p.logLength != n-4 {
		t.Fatalf("lagging log_length %d", p.logLength)
	}
	if _, ok := p.blocks[n-1]; ok {
		t.Fatal("lagging replica served a block it has not seen")
	}
	if _, rej := l.Query(h.queryCtx(), "icrc3_get_tip_certificate", mustEncode(t)); rej != nil {
		t.Fatal(rej)
	}
	h.mu.Lock()
	got := h.lastCert
	h.mu.Unlock()
	if !bytes.Equal(got, l.certifiedAt(n-4)) || bytes.Equal(got, l.CertifiedData()) {
		t.Fatal("lagging replica must certify the older tip")
	}
}
