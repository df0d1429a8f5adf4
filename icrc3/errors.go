package icrc3

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aviate-labs/agent-go/principal"
)

// ErrorKind classifies why verified history could not be read. Every kind
// means "unreadable": none of them is evidence that a block is absent.
type ErrorKind int

const (
	KindTransport          ErrorKind = iota + 1 // HTTP status, connection, timeout
	KindReject                                  // the replica or canister rejected the query
	KindDecode                                  // a reply was not the expected CBOR/Candid
	KindCertificate                             // BLS, delegation, canister range or certified_data mismatch
	KindStale                                   // certificate /time older than the allowed age
	KindChain                                   // hash chain broken or a block missing at Index
	KindArchiveUnreachable                      // an archive canister could not be read
	KindLagging                                 // a replica answered from a state older than one already seen
	KindUnsupported                             // the ledger serves no block endpoint
	KindUncertified                             // the ledger offers no tip certificate
	KindUnknownCanister                         // no such canister on the network (a mistyped ledger id)
	KindMintingUncertain                        // the minting account a verdict depends on is not certified
)

var kindCodes = map[ErrorKind]string{
	KindTransport:          "E_TRANSPORT",
	KindReject:             "E_REJECT",
	KindDecode:             "E_DECODE",
	KindCertificate:        "E_CERTIFICATE",
	KindStale:              "E_STALE_CERTIFICATE",
	KindChain:              "E_CHAIN",
	KindArchiveUnreachable: "E_ARCHIVE_UNREACHABLE",
	KindLagging:            "E_LAGGING",
	KindUnsupported:        "E_UNSUPPORTED",
	KindUncertified:        "E_UNCERTIFIED",
	KindUnknownCanister:    "E_UNKNOWN_CANISTER",
	KindMintingUncertain:   "E_MINTING_UNCERTAIN",
}

// Code is the stable reason code published in verdicts.
func (k ErrorKind) Code() string {
	if c, ok := kindCodes[k]; ok {
		return c
	}
	return "E_UNKNOWN"
}

func (k ErrorKind) String() string { return k.Code() }

// Error is the one error type of the history client. Kind decides the
// verdict's reason code; the other fields say where it happened.
type Error struct {
	Kind ErrorKind
	// Code is the reject code for KindReject ("4"); ICErrorCode is the
	// replica's textual error_code that came with it ("IC0503").
	Code        string
	ICErrorCode string
	Index       *uint64 // the block concerned, when one is
	Canister    principal.Principal
	Method      string
	Msg         string // what failed, in words
	Err         error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("icrc3: ")
	b.WriteString(e.Kind.Code())
	if e.Method != "" || len(e.Canister.Raw) > 0 {
		b.WriteString(" ")
		if len(e.Canister.Raw) > 0 {
			b.WriteString(e.Canister.Encode())
		}
		if e.Method != "" {
			b.WriteString(".")
			b.WriteString(e.Method)
		}
	}
	if e.Index != nil {
		fmt.Fprintf(&b, " block %d", *e.Index)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " (reject %s", e.Code)
		if e.ICErrorCode != "" {
			b.WriteString(" " + e.ICErrorCode)
		}
		b.WriteString(")")
	}
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ReasonCode returns the stable reason code (E_CHAIN, E_TRANSPORT, …).
func (e *Error) ReasonCode() string { return e.Kind.Code() }

// ReasonCode returns the reason code of err when it wraps an *Error, else "".
func ReasonCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind.Code()
	}
	return ""
}

// IsKind reports whether err wraps an *Error of kind k.
func IsKind(err error, k ErrorKind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == k
}

func idx(i uint64) *uint64 { return &i }

// ChainError is a hash-chain break: block Index does not hash to what its
// successor (or the certified tip) says it must.
type ChainError struct {
	Index uint64
	Want  Hash // the expected hash (successor's phash, or the anchor's hash)
	Got   Hash // the block's actual hash
	// Msg replaces the default description for breaks that are not a hash
	// mismatch (block 0 with a phash, a missing phash).
	Msg string
}

func (e *ChainError) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("chain break at block %d: %s", e.Index, e.Msg)
	}
	return fmt.Sprintf("chain break at block %d: hash %s, expected %s", e.Index, e.Got, e.Want)
}
