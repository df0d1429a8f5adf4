package ledgertest

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/reconciled/reconciled/icrc3"
)

// The tip tree is built and hashed here rather than with agent-go's hashtree
// package, so tests that verify it with agent-go cross-check two
// implementations instead of one against itself.

// TipFormat selects how the certified tip is laid out.
type TipFormat int

const (
	// TipLEB128: fork(labeled("last_block_hash", leaf), labeled("last_block_index", leaf(uleb128))).
	TipLEB128 TipFormat = iota
	// TipLegacy: fork(labeled("last_block_index", leaf(u64 big-endian)), labeled("tip_hash", leaf)).
	TipLegacy
)

// tipTree is a two-leaf tree (or the empty tree when the chain is empty).
type tipTree struct {
	empty  bool
	labels [2]string // in byte order
	leaves [2][]byte
}

func newTipTree(format TipFormat, length uint64, tip icrc3.Hash) tipTree {
	if length == 0 {
		return tipTree{empty: true}
	}
	last := length - 1
	if format == TipLegacy {
		var be [8]byte
		binary.BigEndian.PutUint64(be[:], last)
		return tipTree{labels: [2]string{"last_block_index", "tip_hash"}, leaves: [2][]byte{be[:], tip[:]}}
	}
	return tipTree{
		labels: [2]string{"last_block_hash", "last_block_index"},
		leaves: [2][]byte{tip[:], icrc3.AppendUvarint(nil, last)},
	}
}

func domainHash(sep string, parts ...[]byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{byte(len(sep))})
	h.Write([]byte(sep))
	for _, p := range parts {
		h.Write(p)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// rootHash is the digest the ledger passes to certified_data_set.
func (t tipTree) rootHash() [32]byte {
	if t.empty {
		return domainHash("ic-hashtree-empty")
	}
	var sub [2][32]byte
	for i := range sub {
		leaf := domainHash("ic-hashtree-leaf", t.leaves[i])
		sub[i] = domainHash("ic-hashtree-labeled", []byte(t.labels[i]), leaf[:])
	}
	return domainHash("ic-hashtree-fork", sub[0][:], sub[1][:])
}

// cbor encodes the tree in the IC's HashTree CBOR form: [0] empty,
// [1,l,r] fork, [2,label,t] labeled, [3,data] leaf.
func (t tipTree) cbor() []byte {
	if t.empty {
		return []byte{0x81, 0x00}
	}
	b := []byte{0x83, 0x01}
	for i := range t.labels {
		b = append(b, 0x83, 0x02)
		b = cborBytes(b, []byte(t.labels[i]))
		b = append(b, 0x82, 0x03)
		b = cborBytes(b, t.leaves[i])
	}
	return b
}

// cborBytes appends a CBOR byte string (major type 2).
func cborBytes(b, s []byte) []byte {
	n := len(s)
	switch {
	case n < 24:
		b = append(b, 0x40|byte(n))
	case n < 256:
		b = append(b, 0x58, byte(n))
	default:
		b = append(b, 0x59, byte(n>>8), byte(n))
	}
	return append(b, s...)
}
