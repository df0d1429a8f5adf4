package icrc3

// BlockKind is what a block records, from `btype` when present, else from
// `tx.op` (DFINITY ledgers write no btype). A transfer_from on a DFINITY
// ledger is op "xfer" with a spender: its kind is KindTransferFrom.
type BlockKind string

const (
	BlockTransfer     BlockKind = "1xfer"
	BlockTransferFrom BlockKind = "2xfer"
	BlockMint         BlockKind = "1mint"
	BlockBurn         BlockKind = "1burn"
	BlockApprove      BlockKind = "2approve"
	// BlockUnknown: any other btype or op. Such blocks are hashed and chained
	// but never match an intent.
	BlockUnknown BlockKind = ""
)

// Block is one decoded, hashed ICRC-3 block. Fields marked "as recorded" keep
// the exact form the ledger wrote; comparisons with normalisation belong to
// the matcher.
type Block struct {
	Index uint64
	Hash  Hash   // representation-independent hash of Value
	PHash *Hash  // nil when the block has no phash (block 0)
	TS    uint64 // ledger time the block was appended (ns)

	Kind  BlockKind // normalised kind; BlockUnknown for other types
	BType string    // `btype` as written ("" when absent)
	Op    string    // `tx.op` as written ("" when absent)

	From, To, Spender *Account // as recorded; nil when absent
	Amount            *Nat     // tx.amt
	Fee               *Nat     // tx.fee: present only when the caller set it
	BlockFee          *Nat     // top-level fee: present when the ledger charged its own fee
	Memo              []byte   // tx.memo; meaningful only when HasMemo
	HasMemo           bool     // memo absent differs from memo empty
	CreatedAt         *uint64  // tx.ts: the caller's created_at_time, when set
	ExpectedAllowance *Nat
	ExpiresAt         *uint64

	// Raw is the whole block: its Value in the block-cache encoding
	// (MarshalValue). Decoders and ParseBlock always fill it: the block
	// cache stores it and support staff are shown it. The page decoders
	// never build the Value tree; Value does, on demand.
	Raw []byte

	// Native is the block in its ledger family's own encoding when that is
	// not Value: the ICP ledger's protobuf bytes, which hash to Hash and
	// name accounts only as AccountIdentifiers. nil for ICRC-3 blocks.
	Native []byte
}

// Value decodes the block's Value from Raw.
func (b *Block) Value() (Value, error) { return UnmarshalValue(b.Raw) }

// EffectiveFee is the fee the block charged: tx.fee when the caller set one,
// else the block-level fee, else nil (mint, burn, or a fee-less ledger).
func (b *Block) EffectiveFee() *Nat {
	if b.Fee != nil {
		return b.Fee
	}
	return b.BlockFee
}
