package store

import (
	"fmt"

	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc3"
)

// An ICP ledger block is cached as the Value its history gives it, which
// carries the block's protobuf bytes: those, not the Value's ICRC-3 hash,
// are what the verified hash covers, so a cached ICP block is rebuilt and
// checked from them. Which rule a cached block is rebuilt by is its
// history's recorded family (histories.family, 0015), never a guess from
// the Value's bytes: an ICRC-3 block's Value may hold anything, the ICP
// Value's key included.

// family is a cached history's ledger family: every block of one history
// is of one family.
type family string

const (
	// familyICRC3 blocks are hashed as their ICRC-3 Value.
	familyICRC3 family = "icrc3"
	// familyICP blocks are the ICP ledger's, hashed as the protobuf bytes
	// their Value carries under icp.ValueKey.
	familyICP family = "icp"
)

// familyCodeSQL reads histories.family as an index of familyCodes (0 for
// none): the TEXT column scanned as a string cost allocations on every
// ByStamp row.
const familyCodeSQL = `CASE family WHEN 'icrc3' THEN 1 WHEN 'icp' THEN 2 ELSE 0 END`

var familyCodes = [...]family{"", familyICRC3, familyICP}

// familyOfCode is the family familyCodeSQL read, "" for none.
func familyOfCode(c int64) family {
	if c < 0 || c >= int64(len(familyCodes)) {
		return ""
	}
	return familyCodes[c]
}

// familyOf is the family of a batch of verified blocks as their history
// gave them: of the families, only the ICP ledger's sets Native (its
// protobuf bytes, icp.ToICRC3). A batch mixing the two is refused: one
// history's blocks are of one family.
func familyOf(blocks []icrc3.Block) (family, error) {
	f := familyICRC3
	for i := range blocks {
		g := familyICRC3
		if blocks[i].Native != nil {
			g = familyICP
		}
		if i > 0 && g != f {
			return "", fmt.Errorf("blocks %d and %d are of two ledger families", blocks[0].Index, blocks[i].Index)
		}
		f = g
	}
	return f, nil
}

// icpBlockOf rebuilds the ICP block a cached Value carries and checks it
// against the block's verified hash and timestamp. A Value carrying no
// protobuf bytes is an error: its history is the ICP ledger's.
func icpBlockOf(index, ts uint64, enc []byte, h icrc3.Hash) (icrc3.Block, error) {
	v, err := icrc3.UnmarshalValue(enc)
	if err != nil {
		return icrc3.Block{}, fmt.Errorf("block %d: %w", index, err)
	}
	raw, ok := icp.RawFromValue(v)
	if !ok {
		return icrc3.Block{}, fmt.Errorf("block %d: the Value of an ICP ledger block carries no %s bytes", index, icp.ValueKey)
	}
	b, _, err := icp.ToICRC3(index, raw)
	if err != nil {
		return icrc3.Block{}, err
	}
	if b.Hash != h {
		return icrc3.Block{}, fmt.Errorf("block %d: stored protobuf bytes hash to %s, verified hash is %s", index, b.Hash, h)
	}
	if b.TS != ts {
		return icrc3.Block{}, fmt.Errorf("block %d: stored protobuf block has ts %d, row has %d", index, b.TS, ts)
	}
	return b, nil
}
