package icrc3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/fxamacker/cbor/v2"
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

// rejectRE matches agent-go's unexported reject error, "(code) message:
// error_code". HTTP failures share the shape with a three-digit code.
var rejectRE = regexp.MustCompile(`^\((\d+)\) (?s:(.*)): ([A-Za-z0-9_]*)$`)

// classify turns an error from agent-go into an *Error. agent-go exposes
// no error types, so the message shape is all there is to go on.
func classify(err error, canister principal.Principal, method string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	mk := func(k ErrorKind, code string) *Error {
		return &Error{Kind: k, Code: code, Canister: canister, Method: method, Err: err}
	}
	ch := func(code, icCode string) *Error {
		e := mk(KindReject, code)
		e.ICErrorCode = icCode
		return e
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return mk(KindTransport, "")
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return mk(KindTransport, "")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		// Bare, these come from the CBOR decoder on a cut reply body.
		return mk(KindDecode, "")
	}
	var se *cbor.SyntaxError
	var te *cbor.UnmarshalTypeError
	var sme *cbor.SemanticError
	if errors.As(err, &se) || errors.As(err, &te) || errors.As(err, &sme) {
		return mk(KindDecode, "")
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "(400) ") && strings.Contains(msg, "canister_not_found") {
		// A boundary node or replica that routes the id nowhere.
		return mk(KindUnknownCanister, "")
	}
	if m := rejectRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		if n >= 100 { // an HTTP status: "(503) 503 Service Unavailable: body"
			return mk(KindTransport, "")
		}
		return withUnknownCanister(ch(m[1], m[3]))
	}
	if strings.HasPrefix(msg, "(") {
		// An HTTP error whose body does not end in a word.
		if i := strings.IndexByte(msg, ')'); i > 1 {
			if n, err := strconv.ParseUint(msg[1:i], 10, 64); err == nil && n >= 100 {
				return mk(KindTransport, "")
			}
		}
	}
	switch {
	case strings.Contains(msg, "certificate outdated"):
		// agent-go's VerifyTime on the read_state certificate of a
		// signed query.
		return mk(KindStale, "")
	case strings.Contains(msg, "signature"), strings.Contains(msg, "certificate"),
		strings.Contains(msg, "lookup error"), strings.Contains(msg, "not in range"),
		strings.Contains(msg, "delegation"):
		// Query-signature verification: the node's signature or the
		// read_state certificate carrying its key did not check out.
		return mk(KindCertificate, "")
	case strings.Contains(msg, "cbor"), strings.Contains(msg, "candid"), strings.Contains(msg, "unexpected"):
		return mk(KindDecode, "")
	}
	return mk(KindTransport, "")
}

// withUnknownCanister turns a reject that says the canister does not
// exist (IC0301 CanisterNotFound, or reject code 3, with the replica's
// "Canister … not found") into
// KindUnknownCanister: a mistyped ledger id, not a failing ledger.
func withUnknownCanister(e *Error) *Error {
	if e.Kind != KindReject {
		return e
	}
	msg := strings.ToLower(e.Msg + " " + fmt.Sprint(e.Err))
	if (e.ICErrorCode == "IC0301" || e.Code == "3") && strings.Contains(msg, "canister") && strings.Contains(msg, "not found") {
		e.Kind = KindUnknownCanister
	}
	return e
}
