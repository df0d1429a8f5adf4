package ledgertest

import (
	"time"

	"github.com/aviate-labs/agent-go/principal"
)

// Reject codes of the IC interface specification.
const (
	RejectSysFatal           = 1
	RejectSysTransient       = 2
	RejectDestinationInvalid = 3
	RejectCanisterReject     = 4
	RejectCanisterError      = 5
)

// Reject is a canister or replica rejection. ErrorCode is the replica's
// textual code (e.g. "IC0503"); agent-go hashes it, so it is always sent.
type Reject struct {
	Code      uint64
	Message   string
	ErrorCode string
}

// CallContext is what the replica tells a canister about one message.
type CallContext struct {
	Caller principal.Principal
	// Time is the replica's (virtual) time in ns since the epoch; it is the
	// time blocks, dedup and the certificate's /time use.
	Time uint64
	// Replicated is true for update calls. ic0.data_certificate() is only
	// available in queries, as on the IC.
	Replicated bool
	// DataCertificate returns what ic0.data_certificate() would: a certificate
	// covering /canister/<id>/certified_data = data and /time. The canister
	// passes the certified data of the state it answers from (its current
	// CertifiedData, or an older one when it plays a lagging replica). Nil in
	// update calls. Building one costs a BLS signature, so it is made on demand.
	DataCertificate func(data []byte) []byte
	// DataCertificateAt is DataCertificate for an older state: its /time is
	// at most t. A lagging replica answers from a state whose time precedes
	// the blocks it has not seen; certifying old data with the current time
	// would be a state the IC can never produce.
	DataCertificateAt func(data []byte, t uint64) []byte
}

// Canister is a program the replica hosts under a canister id. The replica
// owns transport, envelopes, signatures and certificates; the canister owns
// its state and Candid.
type Canister interface {
	ID() principal.Principal
	// Query runs a non-replicated call; it must not change state.
	Query(ctx CallContext, method string, arg []byte) ([]byte, *Reject)
	// Update runs a replicated call; state changes are committed when it returns.
	Update(ctx CallContext, method string, arg []byte) ([]byte, *Reject)
	// CertifiedData is what the canister last passed to
	// ic0.certified_data_set (nil when it never did). It must be safe to call
	// concurrently with Query and Update.
	CertifiedData() []byte
}

// Faults are switches that make a canister (or the replica in front of it)
// misbehave in the ways a client must survive. The zero value is an honest,
// healthy canister. Faults are set per canister id with Server.SetFaults, from
// Go or over the admin endpoint.
type Faults struct {
	// Latency is added before every reply concerning the canister.
	Latency time.Duration `json:"latency,omitempty"`
	// LoseReplies: update calls execute and commit, then the client gets an
	// HTTP 503 instead of the reply (the block exists; the caller cannot know).
	LoseReplies bool `json:"lose_replies,omitempty"`
	// DropCalls: update calls are answered 202 and then lost before
	// induction: never executed, and request_status never shows them.
	// Once the certified /time passes a call's ingress expiry it can never
	// execute; until then a client cannot tell it from one in progress.
	DropCalls bool `json:"drop_calls,omitempty"`
	// QueryReject: queries are rejected with this code (1..5) instead of running.
	QueryReject uint64 `json:"query_reject,omitempty"`
	// RejectMethod: one node rejects this method without running it: its
	// queries with a signed reject, its calls with a 200
	// non_replicated_rejection, which no certificate backs. RejectAs says
	// why: "missing" (the default: no such method, IC0536) or "stopped"
	// (the canister is stopped, IC0508).
	RejectMethod string `json:"reject_method,omitempty"`
	RejectAs     string `json:"reject_as,omitempty"`
	// HTTPStatus: every request concerning the canister gets this status (e.g. 500).
	HTTPStatus int `json:"http_status,omitempty"`
	// Garbage: query replies are valid HTTP with a body that is not the
	// expected CBOR: "truncated" cuts it, "cbor" sends random bytes,
	// "candid" sends a well-signed reply whose Candid arg is garbage.
	Garbage string `json:"garbage,omitempty"`
	// Unreachable: connections for this canister are closed without a reply
	// (an archive on a subnet that is down).
	Unreachable bool `json:"unreachable,omitempty"`
	// OmitBlock / AlterBlock: a lying node drops, or changes one field of, the
	// block with this index from every query reply that would hold it, and
	// signs the result; the certified tip stays honest. Use a pointer-free
	// encoding: the index plus one (0 = off).
	OmitBlock  uint64 `json:"omit_block,omitempty"`
	AlterBlock uint64 `json:"alter_block,omitempty"`
	// LagBlocks: queries are answered by a replica that has not yet seen the
	// newest LagBlocks blocks: a shorter log_length and an older certified tip.
	LagBlocks uint64 `json:"lag_blocks,omitempty"`
	// WrongKey: certificates (read_state, data certificates) are signed by a
	// key other than the root/subnet key the client trusts.
	WrongKey bool `json:"wrong_key,omitempty"`
	// PruneCanisters: read_state certificates prune the whole /canister
	// subtree instead of revealing the paths asked for, so they prove
	// neither presence nor absence of a canister.
	PruneCanisters bool `json:"prune_canisters,omitempty"`
	// AnswerOutOfRange: a lying node answers requests for this id, which
	// lies outside the subnet's canister range, instead of the boundary
	// node's 400: its read_state certificate is genuinely signed and proves
	// the id absent from a subnet that was never responsible for it.
	AnswerOutOfRange bool `json:"answer_out_of_range,omitempty"`
	// ForeignCertificate: data certificates certify another canister's id.
	ForeignCertificate bool `json:"foreign_certificate,omitempty"`
	// StaleTime: certificates carry a /time this far in the past.
	StaleTime time.Duration `json:"stale_time,omitempty"`
	// TimeBackwards: the certified /time runs this far behind the ledger clock
	// while blocks keep the real time ("time going backwards").
	TimeBackwards time.Duration `json:"time_backwards,omitempty"`
	// The single-node lies: a node answers queries with these values
	// (replicated calls, certified by the subnet, stay honest).
	// LieMintingAccount: icrc1_minting_account names this account (ICRC-1
	// text), or none when "none".
	LieMintingAccount string `json:"lie_minting_account,omitempty"`
	// LieBlockTypes: icrc3_supported_block_types lists these types
	// (comma-separated; "none" for an empty list).
	LieBlockTypes string `json:"lie_block_types,omitempty"`
	// LieArchives: archive lists claim that every archive holds the whole
	// chain.
	LieArchives bool `json:"lie_archives,omitempty"`
	// LieProbes: a reply of exactly one block carries it with its ts set to
	// 1 (far below every window), as a node misleading a search would.
	LieProbes bool `json:"lie_probes,omitempty"`
}
