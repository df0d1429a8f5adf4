package store

import (
	"bytes"
	"fmt"

	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc3"
)

// An ICP ledger block is cached as the Value its history gives it, which
// carries the block's protobuf bytes: those, not the Value's ICRC-3 hash,
// are what the verified hash covers, so a cached ICP block is rebuilt and
// checked from them.

// isICPValue is false for the encoded Value of an ICRC-3 block: the key's
// bytes appear in every encoded ICP block's Value, and without them the hot
// path needs no Value tree.
func isICPValue(enc []byte) bool { return bytes.Contains(enc, []byte(icp.ValueKey)) }

// icpBlockOf rebuilds the ICP block a cached Value carries; ok is false for
// a Value of an ICRC-3 block.
func icpBlockOf(index, ts uint64, enc []byte, h icrc3.Hash) (b icrc3.Block, ok bool, err error) {
	if !isICPValue(enc) {
		return icrc3.Block{}, false, nil
	}
	v, err := icrc3.UnmarshalValue(enc)
	if err != nil {
		return icrc3.Block{}, false, nil // ParseRawBlock reports it
	}
	raw, ok := icp.RawFromValue(v)
	if !ok {
		return icrc3.Block{}, false, nil
	}
	b, _, err = icp.ToICRC3(index, raw)
	if err != nil {
		return icrc3.Block{}, true, err
	}
	if b.Hash != h {
		return icrc3.Block{}, true, fmt.Errorf("block %d: stored protobuf bytes hash to %s, verified hash is %s", index, b.Hash, h)
	}
	if b.TS != ts {
		return icrc3.Block{}, true, fmt.Errorf("block %d: stored protobuf block has ts %d, row has %d", index, b.TS, ts)
	}
	return b, true, nil
}
