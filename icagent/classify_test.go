package icagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"testing"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc3"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// Classify must recognise the error shapes agent-go v0.9.2 produces, which
// are plain strings for rejects and HTTP failures.
func TestClassifyAgentErrors(t *testing.T) {
	ledger := principal.Principal{Raw: []byte{1}}
	cases := []struct {
		err    error
		kind   icrc3.ErrorKind
		code   string
		icCode string
	}{
		{fmt.Errorf("(%d) %s: %s", 5, "Canister trapped: boom", "IC0503"), icrc3.KindReject, "5", "IC0503"},
		{fmt.Errorf("(%d) %s: %s", 3, "Canister has no query method", "IC0536"), icrc3.KindReject, "3", "IC0536"},
		{fmt.Errorf("(%d) %s: %s", 4, "no", ""), icrc3.KindReject, "4", ""},
		{fmt.Errorf("(%d) %s: %s", 503, "503 Service Unavailable", "lost"), icrc3.KindTransport, "", ""},
		{fmt.Errorf("(%d) %s: %s", 500, "500 Internal Server Error", "a: b"), icrc3.KindTransport, "", ""},
		{&url.Error{Op: "Post", URL: "http://127.0.0.1:1", Err: io.EOF}, icrc3.KindTransport, "", ""},
		{&net.OpError{Op: "dial", Err: timeoutErr{}}, icrc3.KindTransport, "", ""},
		{context.DeadlineExceeded, icrc3.KindTransport, "", ""},
		{io.ErrUnexpectedEOF, icrc3.KindDecode, "", ""},
		{errors.New("invalid replied signature"), icrc3.KindCertificate, "", ""},
		{errors.New("certificate outdated, exceeds ingress expiry"), icrc3.KindStale, "", ""},
		{errors.New("no signatures"), icrc3.KindCertificate, "", ""},
	}
	for _, tc := range cases {
		e := Classify(tc.err, ledger, "m")
		if e.Kind != tc.kind || e.Code != tc.code || e.ICErrorCode != tc.icCode {
			t.Errorf("%q: kind %s code %q/%q, want %s %q/%q", tc.err, e.Kind.Code(), e.Code, e.ICErrorCode, tc.kind.Code(), tc.code, tc.icCode)
		}
		if !errors.Is(e, tc.err) {
			t.Errorf("%q: cause not wrapped", tc.err)
		}
	}
	if !MethodMissing(Classify(errors.New("(3) Canister has no query method \"x\": IC0536"), ledger, "x")) {
		t.Error("IC0536 not recognised as a missing method")
	}
	if MethodMissing(Classify(errors.New("(3) Canister rwa6j not found: IC0301"), ledger, "x")) {
		t.Error("a missing canister taken for a missing method")
	}
}
