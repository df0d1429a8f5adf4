package ledgertest

import "strings"

// The Candid interfaces the test ledger and its archives serve, published
// as the public metadata section candid:service (read_state path
// /canister/<id>/metadata/candid:service), where DFINITY's tools look for a
// canister's interface. They describe exactly the methods Query and Update
// answer, with the types the replies are encoded with.

const didTypes = `type Subaccount = blob;
type Account = record { owner : principal; subaccount : opt Subaccount };
type Tokens = nat;
type Timestamp = nat64;
type MetadataValue = variant { Nat : nat; Int : int; Text : text; Blob : blob };
type StandardRecord = record { name : text; url : text };

type TransferArg = record {
  from_subaccount : opt Subaccount;
  to : Account;
  amount : Tokens;
  fee : opt Tokens;
  memo : opt blob;
  created_at_time : opt Timestamp;
};
type TransferError = variant {
  BadFee : record { expected_fee : Tokens };
  BadBurn : record { min_burn_amount : Tokens };
  InsufficientFunds : record { balance : Tokens };
  TooOld;
  CreatedInFuture : record { ledger_time : Timestamp };
  Duplicate : record { duplicate_of : nat };
  TemporarilyUnavailable;
  GenericError : record { error_code : nat; message : text };
};
type TransferResult = variant { Ok : nat; Err : TransferError };

type ApproveArgs = record {
  from_subaccount : opt Subaccount;
  spender : Account;
  amount : nat;
  expected_allowance : opt nat;
  expires_at : opt Timestamp;
  fee : opt nat;
  memo : opt blob;
  created_at_time : opt Timestamp;
};
type ApproveError = variant {
  BadFee : record { expected_fee : nat };
  InsufficientFunds : record { balance : nat };
  AllowanceChanged : record { current_allowance : nat };
  Expired : record { ledger_time : Timestamp };
  TooOld;
  CreatedInFuture : record { ledger_time : Timestamp };
  Duplicate : record { duplicate_of : nat };
  TemporarilyUnavailable;
  GenericError : record { error_code : nat; message : text };
};
type ApproveResult = variant { Ok : nat; Err : ApproveError };
type AllowanceArgs = record { account : Account; spender : Account };
type Allowance = record { allowance : nat; expires_at : opt Timestamp };
type TransferFromArgs = record {
  spender_subaccount : opt Subaccount;
  from : Account;
  to : Account;
  amount : nat;
  fee : opt nat;
  memo : opt blob;
  created_at_time : opt Timestamp;
};
type TransferFromError = variant {
  BadFee : record { expected_fee : nat };
  BadBurn : record { min_burn_amount : nat };
  InsufficientFunds : record { balance : nat };
  InsufficientAllowance : record { allowance : nat };
  TooOld;
  CreatedInFuture : record { ledger_time : Timestamp };
  Duplicate : record { duplicate_of : nat };
  TemporarilyUnavailable;
  GenericError : record { error_code : nat; message : text };
};
type TransferFromResult = variant { Ok : nat; Err : TransferFromError };

type ICRC3Value = variant {
  Blob : blob;
  Text : text;
  Nat : nat;
  Int : int;
  Array : vec ICRC3Value;
  Map : vec record { text; ICRC3Value };
};
type GetBlocksArgs = vec record { start : nat; length : nat };
type GetBlocksResult = record {
  log_length : nat;
  blocks : vec record { id : nat; block : ICRC3Value };
  archived_blocks : vec record {
    args : GetBlocksArgs;
    callback : func (GetBlocksArgs) -> (GetBlocksResult) query;
  };
};
type ICRC3DataCertificate = record { certificate : blob; hash_tree : blob };
type GetArchivesArgs = record { from : opt principal };
type ICRC3ArchiveInfo = record { canister_id : principal; start : nat; end : nat };
type SupportedBlockType = record { block_type : text; url : text };

type Value = variant {
  Blob : blob;
  Text : text;
  Nat : nat;
  Nat64 : nat64;
  Int : int;
  Array : vec Value;
  Map : vec record { text; Value };
};
type LegacyGetBlocksArgs = record { start : nat; length : nat };
type BlockRange = record { blocks : vec Value };
type GetBlocksResponse = record {
  first_index : nat;
  chain_length : nat64;
  certificate : opt blob;
  blocks : vec Value;
  archived_blocks : vec record {
    start : nat;
    length : nat;
    callback : func (LegacyGetBlocksArgs) -> (BlockRange) query;
  };
};
type DataCertificate = record { certificate : opt blob; hash_tree : blob };
type ArchiveInfo = record { canister_id : principal; block_range_start : nat; block_range_end : nat };
`

const (
	didICRC1 = `  icrc1_name : () -> (text) query;
  icrc1_symbol : () -> (text) query;
  icrc1_decimals : () -> (nat8) query;
  icrc1_fee : () -> (Tokens) query;
  icrc1_metadata : () -> (vec record { text; MetadataValue }) query;
  icrc1_total_supply : () -> (Tokens) query;
  icrc1_minting_account : () -> (opt Account) query;
  icrc1_balance_of : (Account) -> (Tokens) query;
  icrc1_transfer : (TransferArg) -> (TransferResult);
  icrc1_supported_standards : () -> (vec StandardRecord) query;
  icrc2_approve : (ApproveArgs) -> (ApproveResult);
  icrc2_allowance : (AllowanceArgs) -> (Allowance) query;
  icrc2_transfer_from : (TransferFromArgs) -> (TransferFromResult);
`
	didICRC3Ledger = `  icrc3_get_archives : (GetArchivesArgs) -> (vec ICRC3ArchiveInfo) query;
  icrc3_get_blocks : (GetBlocksArgs) -> (GetBlocksResult) query;
  icrc3_get_tip_certificate : () -> (opt ICRC3DataCertificate) query;
  icrc3_supported_block_types : () -> (vec SupportedBlockType) query;
`
	didLegacyLedger = `  get_blocks : (LegacyGetBlocksArgs) -> (GetBlocksResponse) query;
  get_data_certificate : () -> (DataCertificate) query;
  archives : () -> (vec ArchiveInfo) query;
`
	didLegacyArchive = `  get_blocks : (LegacyGetBlocksArgs) -> (BlockRange) query;
`
)

// candidService is the service text of a ledger (archive false) or of one
// of its archives under cfg.
func candidService(cfg LedgerConfig, archive bool) []byte {
	var b strings.Builder
	b.WriteString(didTypes)
	b.WriteString("\nservice : {\n")
	if !archive {
		b.WriteString(didICRC1)
	}
	if !cfg.DisableICRC3 {
		// Archives answer the ICRC-3 queries too, as the DFINITY archive
		// does: no tip certificate, no archives of their own.
		b.WriteString(didICRC3Ledger)
	}
	if !cfg.DisableLegacy {
		if archive {
			b.WriteString(didLegacyArchive)
		} else {
			b.WriteString(didLegacyLedger)
		}
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// didTexts holds every variant of the interface, by
// [DisableICRC3][DisableLegacy][archive], so certificates never rebuild it.
var didTexts = func() (t [2][2][2][]byte) {
	for i, icrc3Off := range []bool{false, true} {
		for j, legacyOff := range []bool{false, true} {
			for k, archive := range []bool{false, true} {
				t[i][j][k] = candidService(LedgerConfig{DisableICRC3: icrc3Off, DisableLegacy: legacyOff}, archive)
			}
		}
	}
	return t
}()

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func didFor(cfg LedgerConfig, archive bool) []byte {
	return didTexts[b2i(cfg.DisableICRC3)][b2i(cfg.DisableLegacy)][b2i(archive)]
}

// publicMetadata is implemented by canisters with public custom sections;
// the replica certifies them under /canister/<id>/metadata/<name>.
type publicMetadata interface {
	PublicMetadata() map[string][]byte
}

// PublicMetadata is the ledger's public metadata: its Candid interface.
func (l *Ledger) PublicMetadata() map[string][]byte {
	return map[string][]byte{"candid:service": didFor(l.cfg, false)}
}

// PublicMetadata is the archive's public metadata: its Candid interface.
func (a *Archive) PublicMetadata() map[string][]byte {
	return map[string][]byte{"candid:service": didFor(a.l.cfg, true)}
}
