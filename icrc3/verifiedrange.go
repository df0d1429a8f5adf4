package icrc3

// VerifiedRange lives here, with the blocks and the hash-chain verification
// it records, so that the engine (which grows it) and the store (which keeps
// it) share it without the store compiling the engine.

// VerifiedRange is the contiguous run of blocks [Lo, Hi] of one ledger that
// has been verified against a certified tip. Blocks are immutable, so what
// was verified once stays verified; a later tip only costs the blocks above
// Hi, and an older window only the blocks below Lo.
//
// Lo == Hi+1 is an anchored but empty range: the certified tip (Hi, HiHash)
// is known and no block has been read yet.
type VerifiedRange struct {
	Lo, Hi uint64
	HiHash Hash
	// Below is the authentic hash of block Lo-1 (the phash of block Lo, or
	// the tip hash when the range is empty); nil when Lo == 0.
	Below *Hash
	// LoTS and HiTS are the lowest and the highest ledger timestamp the
	// range's blocks carry: blocks of unknown kinds carry none, and a range
	// of only such blocks has LoTS all ones, so that it covers no window.
	// Meaningless when empty.
	LoTS, HiTS uint64
	// TipTime is the certified time of the newest tip that vouched for Hi.
	TipTime uint64
}

// Empty reports whether no block of the range has been read.
func (r VerifiedRange) Empty() bool { return r.Lo == r.Hi+1 }
