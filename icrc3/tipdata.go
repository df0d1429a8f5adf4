package icrc3

// Tip formats: how the ledger's certified tree names its tip.
const (
	// TipFormatLEB128: last_block_index (ULEB128) + last_block_hash.
	TipFormatLEB128 = "leb128"
	// TipFormatLegacy: tip_hash + 8-byte big-endian last_block_index, as
	// older DFINITY ICRC ledgers certified it.
	TipFormatLegacy = "legacy"
	// TipFormatQueries: no certificate; the tip was read with signed queries
	// only (a ledger configured `verify: queries`).
	TipFormatQueries = "queries"
	// TipFormatICP: the certificate certifies the raw hash of the last
	// block (the ICP ledger); the tip index is the reply's chain length,
	// proven only by the chain below the certified block.
	TipFormatICP = "icp"
)

// Tip is the ledger's certified chain tip.
type Tip struct {
	Index uint64 // last_block_index; meaningless when Empty
	Hash  Hash   // last_block_hash
	// Time is the certificate's /time (ns): certified ledger time. In
	// queries mode it is the last block's timestamp, capped by the
	// subnet's certified /time less the lag a replica answering queries
	// may have: a time the blocks read cover (0 when it proves none).
	Time   uint64
	Format string
	Empty  bool // the ledger has no blocks
}

// Anchor returns the tip as a chain anchor.
func (t Tip) Anchor() Anchor { return Anchor{Index: t.Index, Hash: t.Hash} }

// Len is the chain length the tip proves.
func (t Tip) Len() uint64 {
	if t.Empty {
		return 0
	}
	return t.Index + 1
}
