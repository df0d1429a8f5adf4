package icagent

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

	"github.com/reconciled/reconciled/icrc3"
)

// rejectRE matches agent-go's unexported reject error, "(code) message:
// error_code". HTTP failures share the shape with a three-digit code.
var rejectRE = regexp.MustCompile(`^\((\d+)\) (?s:(.*)): ([A-Za-z0-9_]*)$`)

// Classify turns an error from agent-go into an *Error. agent-go exposes
// no error types, so the message shape is all there is to go on.
func Classify(err error, canister principal.Principal, method string) *icrc3.Error {
	var e *icrc3.Error
	if errors.As(err, &e) {
		return e
	}
	mk := func(k icrc3.ErrorKind, code string) *icrc3.Error {
		return &icrc3.Error{Kind: k, Code: code, Canister: canister, Method: method, Err: err}
	}
	ch := func(code, icCode string) *icrc3.Error {
		e := mk(icrc3.KindReject, code)
		e.ICErrorCode = icCode
		return e
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return mk(icrc3.KindTransport, "")
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return mk(icrc3.KindTransport, "")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		// Bare, these come from the CBOR decoder on a cut reply body.
		return mk(icrc3.KindDecode, "")
	}
	var se *cbor.SyntaxError
	var te *cbor.UnmarshalTypeError
	var sme *cbor.SemanticError
	if errors.As(err, &se) || errors.As(err, &te) || errors.As(err, &sme) {
		return mk(icrc3.KindDecode, "")
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "(400) ") && strings.Contains(msg, "canister_not_found") {
		// A boundary node or replica that routes the id nowhere.
		return mk(icrc3.KindUnknownCanister, "")
	}
	if m := rejectRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		if n >= 100 { // an HTTP status: "(503) 503 Service Unavailable: body"
			return mk(icrc3.KindTransport, "")
		}
		return withUnknownCanister(ch(m[1], m[3]))
	}
	if strings.HasPrefix(msg, "(") {
		// An HTTP error whose body does not end in a word.
		if i := strings.IndexByte(msg, ')'); i > 1 {
			if n, err := strconv.ParseUint(msg[1:i], 10, 64); err == nil && n >= 100 {
				return mk(icrc3.KindTransport, "")
			}
		}
	}
	switch {
	case strings.Contains(msg, "certificate outdated"):
		// agent-go's VerifyTime on the read_state certificate of a
		// signed query.
		return mk(icrc3.KindStale, "")
	case strings.Contains(msg, "signature"), strings.Contains(msg, "certificate"),
		strings.Contains(msg, "lookup error"), strings.Contains(msg, "not in range"),
		strings.Contains(msg, "delegation"):
		// Query-signature verification: the node's signature or the
		// read_state certificate carrying its key did not check out.
		return mk(icrc3.KindCertificate, "")
	case strings.Contains(msg, "cbor"), strings.Contains(msg, "candid"), strings.Contains(msg, "unexpected"):
		return mk(icrc3.KindDecode, "")
	}
	return mk(icrc3.KindTransport, "")
}

// withUnknownCanister turns a reject that says the canister does not
// exist (IC0301 CanisterNotFound, or reject code 3, with the replica's
// "Canister … not found") into
// KindUnknownCanister: a mistyped ledger id, not a failing ledger.
func withUnknownCanister(e *icrc3.Error) *icrc3.Error {
	if e.Kind != icrc3.KindReject {
		return e
	}
	msg := strings.ToLower(e.Msg + " " + fmt.Sprint(e.Err))
	if (e.ICErrorCode == "IC0301" || e.Code == "3") && strings.Contains(msg, "canister") && strings.Contains(msg, "not found") {
		e.Kind = icrc3.KindUnknownCanister
	}
	return e
}

// MethodMissing reports whether a reject says the canister does not export
// the method (as opposed to failing to run it).
func MethodMissing(err error) bool {
	var e *icrc3.Error
	if !errors.As(err, &e) || e.Kind != icrc3.KindReject {
		return false
	}
	switch e.ICErrorCode {
	case "IC0302", "IC0536":
		return true
	}
	// Without an error_code, only a "destination invalid" reject that
	// names a method says so; "canister not found" must stay an error.
	msg := strings.ToLower(fmt.Sprint(e.Err))
	return e.Code == "3" && strings.Contains(msg, "method")
}
