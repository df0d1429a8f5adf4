package reconciled

import (
	"fmt"
	"strconv"
	"time"
)

// Status is a verdict's status: the four of the tool layer's reconcile hook,
// plus invalid for requests that cannot be read.
type Status string

const (
	StatusFound      Status = "found"
	StatusAbsent     Status = "absent"
	StatusNotYet     Status = "not_yet"
	StatusUnreadable Status = "unreadable"
	StatusInvalid    Status = "invalid"
)

// Final reports whether a verdict of this status ends the intent.
func (s Status) Final() bool {
	return s == StatusFound || s == StatusAbsent || s == StatusInvalid
}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusFound, StatusAbsent, StatusNotYet, StatusUnreadable, StatusInvalid:
		return true
	}
	return false
}

// U64 is a uint64 that travels as a decimal string in JSON: every integer
// that can exceed 2^53 does (docs/protocol.md#nats-subjects-and-messages).
type U64 uint64

func (u U64) MarshalText() ([]byte, error) { return strconv.AppendUint(nil, uint64(u), 10), nil }

func (u *U64) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("reconcile: %q is not a decimal uint64", b)
	}
	*u = U64(v)
	return nil
}

// Verdict is the message published on reconcile.verdicts.<intent_id> and
// stored in the verdict history. Its JSON form is the contract of docs/protocol.md#verdict.
type Verdict struct {
	IntentID string `json:"intent_id"`
	// IntentHash is the body this verdict was decided for (IntentHash): a
	// tool layer acts only on verdicts whose hash is its own body's.
	IntentHash string     `json:"intent_hash"`
	Seq        uint64     `json:"seq"`
	Status     Status     `json:"status"`
	Final      bool       `json:"final"`
	Block      *BlockRef  `json:"block"`
	NearMisses []NearMiss `json:"near_misses"`
	Window     *Window    `json:"window"`
	Evidence   *Evidence  `json:"evidence"`
	Reason     *Reason    `json:"reason"`
	DecidedAt  time.Time  `json:"decided_at"`
}

// BlockRef names the matched block.
type BlockRef struct {
	Index U64    `json:"index"`
	TS    U64    `json:"ts"`
	Hash  string `json:"hash"`
	Kind  string `json:"kind"`
	// Match is how the block matched: MatchExact (arg_hex gave the sent
	// bytes, compared as the ledger deduplicates) or MatchNormalized.
	Match string `json:"match"`
}

// BlockRef.Match values.
const (
	MatchExact      = "exact"
	MatchNormalized = "normalized"
)

// NearMiss is a block with the intent's stamp and caller-side account that
// differs in the named fields. It is reported, never matched.
type NearMiss struct {
	Index   U64      `json:"index"`
	Differs []string `json:"differs"`
	// Block is what the block recorded, so that support staff can see what
	// did move without fetching the block. Omitted by earlier versions.
	Block *NearMissBlock `json:"block,omitempty"`
}

// NearMissBlock is a near miss's recorded values: accounts in ICRC-1 text,
// amounts in the ledger's raw units, the memo in hex.
type NearMissBlock struct {
	Kind    string `json:"kind"`
	TS      U64    `json:"ts"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Spender string `json:"spender,omitempty"`
	Amount  string `json:"amount,omitempty"`
	Fee     string `json:"fee,omitempty"`
	// Memo is nil when the block has no memo.
	Memo *string `json:"memo,omitempty"`
}

// Window is the ledger-time window that can hold the original and, once
// located, the block index range covering it.
type Window struct {
	FromTS     U64  `json:"from_ts"`
	ToTS       U64  `json:"to_ts"`
	FirstBlock *U64 `json:"first_block"`
	LastBlock  *U64 `json:"last_block"`
	// NarrowedBy says why ToTS is earlier than stamp+TW+D ("ingress_expiry").
	NarrowedBy string `json:"narrowed_by,omitempty"`
}

// Evidence says what the verdict rests on.
type Evidence struct {
	// Verified is "certificate+chain" (certified tip and hash chain), or
	// "queries" for ledgers the operator configured without a tip certificate.
	Verified      string `json:"verified"`
	TipIndex      *U64   `json:"tip_index"`
	TipHash       string `json:"tip_hash,omitempty"`
	CertifiedTime *U64   `json:"certified_time"`
	// BlocksRead counts blocks read and verified for this decision.
	BlocksRead uint64 `json:"blocks_read"`
	// IndexSource is IndexByChainPosition when the certificate covers only
	// the last block's hash (the ICP ledger): block indices are then the
	// ledger's own count, proven by each block's position below the
	// certified block, not by the certificate.
	IndexSource string `json:"index_source,omitempty"`
	// HistoryChanged: this decision's certified tip contradicted the
	// verified chain, which was discarded and rebuilt from that tip.
	HistoryChanged *HistoryChange `json:"history_changed,omitempty"`
}

// IndexByChainPosition: see Evidence.IndexSource.
const IndexByChainPosition = "chain_position"

// Reason explains unreadable and invalid verdicts.
type Reason struct {
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// HistoryChange is a certified tip that contradicts the verified chain: the
// ledger under this id now has another history (a reinstall, a reset test
// replica). The cached chain was discarded and is rebuilt from the tip.
type HistoryChange struct {
	// Reason: "hash" (the tip, or a block under it, differs from the
	// verified block at its index), "later_time" (a lower tip certified
	// after the verified block above it was written) or "lower_tip" (a
	// lower tip that cannot be shown to be a prefix of the verified chain).
	Reason          string `json:"reason"`
	OldTipIndex     U64    `json:"old_tip_index"`
	OldTipHash      string `json:"old_tip_hash"`
	NewTipIndex     U64    `json:"new_tip_index"`
	NewTipHash      string `json:"new_tip_hash"`
	CertifiedAt     U64    `json:"certified_time"`
	BlocksDiscarded U64    `json:"blocks_discarded"`
}

// SameDecision compares what two verdicts decide, not when or how they
// were computed, so a verdict re-published from a store that re-encoded it
// is still recognised.
func SameDecision(a, b Verdict) bool {
	if a.Status != b.Status || a.Final != b.Final || (a.Block == nil) != (b.Block == nil) {
		return false
	}
	// A verdict of another body is never the same decision; one stored
	// before verdicts carried intent_hash has none to compare.
	if a.IntentHash != "" && b.IntentHash != "" && a.IntentHash != b.IntentHash {
		return false
	}
	return a.Block == nil || *a.Block == *b.Block
}
