package icrc3

// VerifyMode says what makes history trustworthy for a ledger.
type VerifyMode string

const (
	// VerifyChain: a certified tip plus the hash chain (the default).
	VerifyChain VerifyMode = "chain"
	// VerifyQueries: node-signed queries only, for ledgers that certify no
	// tip and that the operator accepted as such.
	VerifyQueries VerifyMode = "queries"
)

// Endpoint is a block endpoint family.
type Endpoint string

const (
	EndpointAuto   Endpoint = ""                 // the larger page of those served
	EndpointICRC3  Endpoint = "icrc3_get_blocks" // 100 blocks per page on DFINITY ledgers
	EndpointLegacy Endpoint = "get_blocks"       // 2000 blocks per page
)

// Page sizes of the DFINITY ledger and archives.
const (
	PageICRC3  = 100
	PageLegacy = 2000
)

// Features are what a ledger serves, as detected by probing it. Probes
// cost verified queries, so only those that change what the client reads
// are made: icrc3_get_blocks when legacy get_blocks is absent (or ICRC-3 is
// forced), get_data_certificate when icrc3_get_tip_certificate is absent. A
// false flag for an unprobed endpoint means "not needed", not "absent".
type Features struct {
	ICRC3Blocks  bool // icrc3_get_blocks
	LegacyBlocks bool // get_blocks
	ICRC3Tip     bool // icrc3_get_tip_certificate
	LegacyTip    bool // get_data_certificate
	// BlockTypes from icrc3_supported_block_types (nil when not served).
	BlockTypes []string
	// MintingAccount from icrc1_minting_account (nil when none or not served).
	MintingAccount *Account
	// MintingCertified: MintingAccount is the reply of a replicated call
	// whose certificate was verified (or a certified reject says the
	// ledger does not serve the method). When false it is one node's word,
	// and Detect asks the subnet again on every call.
	MintingCertified bool
	// Endpoint is the block endpoint family the client reads, and PageSize
	// its page.
	Endpoint Endpoint
	PageSize uint64
}
