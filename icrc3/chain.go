package icrc3

import "fmt"

// Anchor is a block whose hash is known to be authentic: the certified tip,
// or a block verified earlier. Everything below it is verified by walking
// phash links down from it.
type Anchor struct {
	Index uint64
	Hash  Hash
}

// Verifier checks blocks in descending index order against an anchor: the
// anchor block must hash to the anchor's hash, and every block below must
// hash to the phash of the block above it. It trusts Block.Hash, which the
// decoders compute from the block's Value while decoding.
//
// A Verifier is not safe for concurrent use.
type Verifier struct {
	next    uint64 // index of the next block expected
	want    Hash   // hash block `next` must have
	floor   *Anchor
	done    bool
	checked uint64
	low     Anchor // the lowest block verified
}

// NewVerifier starts a verification at tip that runs down to block 0.
func NewVerifier(tip Anchor) *Verifier {
	return &Verifier{next: tip.Index, want: tip.Hash}
}

// NewIncrementalVerifier verifies only the blocks a newer tip added above a
// previously verified anchor: tip down to verified.Index+1, whose phash
// must equal verified.Hash. When the tip is the verified block itself, the
// hashes must agree and there is nothing to read. A tip below the verified
// anchor means the certificate came from a replica behind what was already
// seen: an E_LAGGING error.
func NewIncrementalVerifier(tip, verified Anchor) (*Verifier, error) {
	switch {
	case tip.Index < verified.Index:
		return nil, &Error{Kind: KindLagging, Index: idx(tip.Index),
			Msg: fmt.Sprintf("certified tip %d is below the verified block %d", tip.Index, verified.Index)}
	case tip.Index == verified.Index:
		if tip.Hash != verified.Hash {
			return nil, chainErr(&ChainError{Index: tip.Index, Want: verified.Hash, Got: tip.Hash,
				Msg: fmt.Sprintf("certified tip hash %s differs from the verified hash %s", tip.Hash, verified.Hash)})
		}
		return &Verifier{next: tip.Index, want: tip.Hash, floor: &verified, done: true}, nil
	}
	return &Verifier{next: tip.Index, want: tip.Hash, floor: &verified}, nil
}

// Done reports whether the walk reached block 0 or the verified anchor.
func (v *Verifier) Done() bool { return v.done }

// Next is the index of the next block the verifier expects. Meaningless
// once Done.
func (v *Verifier) Next() uint64 { return v.next }

// Lowest is the lowest verified index so far and its hash, as an anchor for
// a later walk further down; ok is false before the first block.
func (v *Verifier) Lowest() (a Anchor, ok bool) {
	if v.checked == 0 {
		if v.done && v.floor != nil {
			return *v.floor, true
		}
		return Anchor{}, false
	}
	return v.low, true
}

// Checked is the number of blocks verified.
func (v *Verifier) Checked() uint64 { return v.checked }

// Push verifies the next block (index Next()).
func (v *Verifier) Push(b *Block) error {
	if v.done {
		return chainErr(&ChainError{Index: b.Index, Msg: "block past the end of the verified walk"})
	}
	if b.Index != v.next {
		return chainErr(&ChainError{Index: v.next, Msg: fmt.Sprintf("got block %d where block %d was due", b.Index, v.next)})
	}
	if b.Hash != v.want {
		return chainErr(&ChainError{Index: b.Index, Want: v.want, Got: b.Hash})
	}
	v.checked++
	v.low = Anchor{Index: b.Index, Hash: b.Hash}
	if b.Index == 0 {
		if b.PHash != nil {
			return chainErr(&ChainError{Index: 0, Got: *b.PHash, Msg: "block 0 has a phash"})
		}
		v.done = true
		return nil
	}
	if b.PHash == nil {
		return chainErr(&ChainError{Index: b.Index, Msg: "block has no phash"})
	}
	if v.floor != nil && b.Index == v.floor.Index+1 {
		if *b.PHash != v.floor.Hash {
			return chainErr(&ChainError{Index: v.floor.Index, Want: v.floor.Hash, Got: *b.PHash,
				Msg: fmt.Sprintf("phash of block %d is %s, the verified block %d has hash %s",
					b.Index, *b.PHash, v.floor.Index, v.floor.Hash)})
		}
		v.done = true
		return nil
	}
	v.next = b.Index - 1
	v.want = *b.PHash
	return nil
}

// PushPage verifies an ascending, contiguous page whose last block is
// Next(): the shape BlocksDesc delivers. Blocks below the walk's end
// (under the verified anchor) are ignored.
func (v *Verifier) PushPage(page []Block) error {
	for i := len(page) - 1; i >= 0; i-- {
		if v.done {
			return nil
		}
		if err := v.Push(&page[i]); err != nil {
			return err
		}
	}
	return nil
}

// VerifyRange verifies an ascending contiguous slice of blocks that ends at
// the anchor. On success blocks[0].PHash (nil for block 0) is the authentic
// hash of the block below the slice.
func VerifyRange(anchor Anchor, blocks []Block) error {
	if len(blocks) == 0 {
		return nil
	}
	if last := blocks[len(blocks)-1].Index; last != anchor.Index {
		return chainErr(&ChainError{Index: anchor.Index, Msg: fmt.Sprintf("range ends at block %d, not at the anchor", last)})
	}
	for i := 1; i < len(blocks); i++ {
		if blocks[i].Index != blocks[i-1].Index+1 {
			return chainErr(&ChainError{Index: blocks[i-1].Index + 1, Msg: fmt.Sprintf("range skips from block %d to %d", blocks[i-1].Index, blocks[i].Index)})
		}
	}
	v := NewVerifier(anchor)
	return v.PushPage(blocks)
}

func chainErr(c *ChainError) *Error {
	return &Error{Kind: KindChain, Index: idx(c.Index), Err: c}
}
