package ledgertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
)

// replyCase is one block query the golden replies are taken from.
type replyCase struct {
	name   string
	on     Canister
	method string
	arg    []byte
}

// blockReplyCases are block queries of every kind (ledger and archive,
// both endpoint families, pages, prefixes, single blocks and ranges that
// cross archive bounds) on a ledger with archives.
func blockReplyCases(t *testing.T, h *fakeHost, l *Ledger) []replyCase {
	t.Helper()
	n := l.Len()
	cs := []replyCase{
		{"ledger legacy tail", l, "get_blocks", mustEncode(t, arg(n-700, 2000))},
		{"ledger legacy all", l, "get_blocks", mustEncode(t, arg(0, n))},
		{"ledger legacy one", l, "get_blocks", mustEncode(t, arg(n-3, 1))},
		{"ledger icrc3 tail", l, "icrc3_get_blocks", mustEncode(t, []getBlocksArg{arg(n-150, 150)})},
		{"ledger icrc3 several", l, "icrc3_get_blocks", mustEncode(t, []getBlocksArg{arg(10, 30), arg(n-40, 20), arg(n-5, 100)})},
		{"ledger icrc3 one", l, "icrc3_get_blocks", mustEncode(t, []getBlocksArg{arg(n-2, 1)})},
	}
	for k, ai := range l.Archives() {
		a := h.canister(ai.ID)
		cs = append(cs,
			replyCase{fmt.Sprintf("archive %d legacy", k), a, "get_blocks", mustEncode(t, arg(ai.Start, 2000))},
			replyCase{fmt.Sprintf("archive %d legacy one", k), a, "get_blocks", mustEncode(t, arg(ai.Start+1, 1))},
			replyCase{fmt.Sprintf("archive %d icrc3", k), a, "icrc3_get_blocks", mustEncode(t, []getBlocksArg{arg(ai.Start, 60), arg(ai.End-10, 90)})},
			replyCase{fmt.Sprintf("archive %d icrc3 one", k), a, "icrc3_get_blocks", mustEncode(t, []getBlocksArg{arg(ai.End, 1)})},
		)
	}
	return cs
}

// replyDigest queries every case twice, requires both replies to be equal,
// and hashes them all (with the case names) in order.
func replyDigest(t *testing.T, h *fakeHost, cs []replyCase) string {
	t.Helper()
	d := sha256.New()
	for _, c := range cs {
		first, rej := c.on.Query(h.queryCtx(), c.method, c.arg)
		if rej != nil {
			t.Fatalf("%s: %+v", c.name, rej)
		}
		again, rej := c.on.Query(h.queryCtx(), c.method, c.arg)
		if rej != nil {
			t.Fatalf("%s again: %+v", c.name, rej)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("%s: the second reply (%d bytes) differs from the first (%d bytes)", c.name, len(again), len(first))
		}
		fmt.Fprintf(d, "%s\x00%d\x00", c.name, len(first))
		d.Write(first)
	}
	return hex.EncodeToString(d.Sum(nil))
}

// TestBlockRepliesByteIdentical pins the block replies' bytes: the digests
// were taken from the replica when every reply was encoded from a freshly
// built Value tree, so serving blocks from cached encodings must reproduce
// them exactly, with and without data faults. The history is generated
// from a fixed seed on a fixed clock; a change to the generator changes the
// digests too, and they may then be retaken only with the encoders
// unchanged.
func TestBlockRepliesByteIdentical(t *testing.T) {
	for _, tc := range []struct {
		name   string
		style  BlockStyle
		budget int
		faults func(l *Ledger) Faults
		want   string
	}{
		{"dfinity", StyleDFINITY, 0, nil, "68a8720c9c0a8565f4c2d237e6aeb36e5ecc8d2e00f56cbe1fbdc0a9862cbfce"},
		{"spec", StyleSpec, 0, nil, "96e303322530fd25217c26b95ff2ba4bec3444a434ca84ab001cac4c481dccee"},
		{"faults", StyleDFINITY, 0, func(l *Ledger) Faults {
			return Faults{AlterBlock: l.Len() - 1, OmitBlock: 5, LieProbes: true}
		}, "3d0bfad57cfc577db5c0039cf2ab2e65b13c00e270bb6594f083d56efd465a40"},
		// A cache smaller than a page starts over on nearly every reply.
		{"churn", StyleDFINITY, 4096, nil, "68a8720c9c0a8565f4c2d237e6aeb36e5ecc8d2e00f56cbe1fbdc0a9862cbfce"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost()
			l, _, _ := newTestLedger(t, h, LedgerConfig{BlockStyle: tc.style, ArchiveThreshold: 400, ArchiveBatch: 300, ArchiveCapacity: 1000})
			l.enc.budget = tc.budget
			if err := l.GenerateHistory(3000, 7, 0); err != nil {
				t.Fatal(err)
			}
			cs := blockReplyCases(t, h, l)
			if tc.faults != nil {
				// Warm the cache first, so that faults must bypass it.
				replyDigest(t, h, cs)
				f := tc.faults(l)
				h.setFaults(l.ID(), f)
				for _, ai := range l.Archives() {
					h.setFaults(ai.ID, Faults{AlterBlock: ai.End + 1, OmitBlock: ai.Start + 2, LieProbes: true})
				}
			}
			if got := replyDigest(t, h, cs); got != tc.want {
				t.Errorf("block replies digest %s, want %s", got, tc.want)
			}
		})
	}
}

// TestCachedEncodingsAreFresh: once a page has been served from fresh
// encodings, serving it again from the cache gives every block's encoding
// as its Value tree gives it now, under its own index, on both families.
func TestCachedEncodingsAreFresh(t *testing.T) {
	h := newFakeHost()
	l, _, _ := newTestLedger(t, h, LedgerConfig{ArchiveThreshold: 400, ArchiveBatch: 300, ArchiveCapacity: 1000})
	if err := l.GenerateHistory(2500, 3, 0); err != nil {
		t.Fatal(err)
	}
	n := l.Len()
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, legacy := range []bool{false, true} {
		l.encodedBlocks(nil, n/3, n, Faults{}, legacy)
		if got := uint64(len(l.enc.fam[famOf(legacy)])); got != n-n/3 {
			t.Fatalf("legacy %v: %d blocks cached, want %d", legacy, got, n-n/3)
		}
		page := l.encodedBlocks(nil, 0, n, Faults{}, legacy) // a third fresh, the rest cached
		for k, b := range page {
			v := l.blockValueLocked(uint64(k))
			if want := encodeValue(&v, legacy); b.id != uint64(k) || !bytes.Equal(b.enc, want) {
				t.Fatalf("legacy %v: block %d served as %d %x, fresh %x", legacy, k, b.id, b.enc, want)
			}
		}
	}
}
