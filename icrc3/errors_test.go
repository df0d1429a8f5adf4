package icrc3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"
)

func TestErrorCodes(t *testing.T) {
	want := map[ErrorKind]string{
		KindTransport: "E_TRANSPORT", KindReject: "E_REJECT", KindDecode: "E_DECODE",
		KindCertificate: "E_CERTIFICATE", KindStale: "E_STALE_CERTIFICATE", KindChain: "E_CHAIN",
		KindArchiveUnreachable: "E_ARCHIVE_UNREACHABLE", KindLagging: "E_LAGGING",
		KindUnsupported: "E_UNSUPPORTED", KindUncertified: "E_UNCERTIFIED",
	}
	for k, code := range want {
		if k.Code() != code {
			t.Errorf("%d: %s, want %s", k, k.Code(), code)
		}
	}
	if ErrorKind(0).Code() != "E_UNKNOWN" {
		t.Error("zero kind has a code")
	}
}

func TestErrorWrapping(t *testing.T) {
	cause := &ChainError{Index: 7, Want: Hash{1}, Got: Hash{2}}
	e := &Error{Kind: KindChain, Index: idx(7), Canister: principal.Principal{Raw: []byte{0, 0, 0, 0, 0, 0, 0, 1, 1, 1}}, Method: "icrc3_get_blocks", Err: cause}
	wrapped := fmt.Errorf("scan: %w", e)
	var got *Error
	var ce *ChainError
	if !errors.As(wrapped, &got) || got != e || !errors.As(wrapped, &ce) || ce != cause {
		t.Fatal("errors.As does not reach the typed errors")
	}
	if ReasonCode(wrapped) != "E_CHAIN" || !IsKind(wrapped, KindChain) || IsKind(wrapped, KindDecode) {
		t.Fatal("reason code lookup")
	}
	if ReasonCode(errors.New("plain")) != "" {
		t.Fatal("a plain error has a reason code")
	}
	msg := e.Error()
	for _, part := range []string{"E_CHAIN", "icrc3_get_blocks", "block 7", "chain break at block 7"} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q lacks %q", msg, part)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// classify must recognise the error shapes agent-go v0.9.2 produces, which
// are plain strings for rejects and HTTP failures.
func TestClassifyAgentErrors(t *testing.T) {
	ledger := principal.Principal{Raw: []byte{1}}
	cases := []struct {
		err    error
		kind   ErrorKind
		code   string
		icCode string
	}{
		{fmt.Errorf("(%d) %s: %s", 5, "Canister trapped: boom", "IC0503"), KindReject, "5", "IC0503"},
		{fmt.Errorf("(%d) %s: %s", 3, "Canister has no query method", "IC0536"), KindReject, "3", "IC0536"},
		{fmt.Errorf("(%d) %s: %s", 4, "no", ""), KindReject, "4", ""},
		{fmt.Errorf("(%d) %s: %s", 503, "503 Service Unavailable", "lost"), KindTransport, "", ""},
		{fmt.Errorf("(%d) %s: %s", 500, "500 Internal Server Error", "a: b"), KindTransport, "", ""},
		{&url.Error{Op: "Post", URL: "http://127.0.0.1:1", Err: io.EOF}, KindTransport, "", ""},
		{&net.OpError{Op: "dial", Err: timeoutErr{}}, KindTransport, "", ""},
		{context.DeadlineExceeded, KindTransport, "", ""},
		{io.ErrUnexpectedEOF, KindDecode, "", ""},
		{errors.New("invalid replied signature"), KindCertificate, "", ""},
		{errors.New("certificate outdated, exceeds ingress expiry"), KindStale, "", ""},
		{errors.New("no signatures"), KindCertificate, "", ""},
	}
	for _, tc := range cases {
		e := classify(tc.err, ledger, "m")
		if e.Kind != tc.kind || e.Code != tc.code || e.ICErrorCode != tc.icCode {
			t.Errorf("%q: kind %s code %q/%q, want %s %q/%q", tc.err, e.Kind.Code(), e.Code, e.ICErrorCode, tc.kind.Code(), tc.code, tc.icCode)
		}
		if !errors.Is(e, tc.err) {
			t.Errorf("%q: cause not wrapped", tc.err)
		}
	}
	if !methodMissing(classify(errors.New("(3) Canister has no query method \"x\": IC0536"), ledger, "x")) {
		t.Error("IC0536 not recognised as a missing method")
	}
	if methodMissing(classify(errors.New("(3) Canister rwa6j not found: IC0301"), ledger, "x")) {
		t.Error("a missing canister taken for a missing method")
	}
}

// The hand-encoded arguments must decode, with agent-go's decoder, to the
// ranges they were made from (the type table order may differ from
// agent-go's own encoder, which Candid allows).
func TestCandidArgs(t *testing.T) {
	type rng struct {
		Start  idl.Nat `ic:"start"`
		Length idl.Nat `ic:"length"`
	}
	args := []BlockRange{{Start: 0, Length: 100}, {Start: 1 << 40, Length: 1 << 33}, {Start: 1<<64 - 1, Length: 1}}
	var got []rng
	if err := candid.Unmarshal(encodeGetBlocksArgs(args...), []any{&got}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(args) {
		t.Fatalf("%d ranges", len(got))
	}
	for i, r := range got {
		if r.Start.BigInt().Uint64() != args[i].Start || r.Length.BigInt().Uint64() != args[i].Length {
			t.Errorf("range %d: %v+%v, want %+v", i, r.Start, r.Length, args[i])
		}
	}
	var one rng
	if err := candid.Unmarshal(encodeLegacyGetBlocksArgs(12345, 2000), []any{&one}); err != nil {
		t.Fatal(err)
	}
	if one.Start.BigInt().Uint64() != 12345 || one.Length.BigInt().Uint64() != 2000 {
		t.Fatalf("legacy args %v+%v", one.Start, one.Length)
	}
	want, err := candid.Marshal([]any{rng{idl.NewNat(uint64(12345)), idl.NewNat(uint64(2000))}})
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeLegacyGetBlocksArgs(12345, 2000); !bytes.Equal(got, want) {
		t.Fatalf("legacy args\n got %x\nwant %x", got, want)
	}
	var empty []rng
	if err := candid.Unmarshal(encodeGetBlocksArgs(), []any{&empty}); err != nil || len(empty) != 0 {
		t.Fatalf("empty args: %v %v", empty, err)
	}
	if _, _, err := candid.Decode(candidNoArgs); err != nil {
		t.Fatal(err)
	}
	want, err = candid.Marshal([]any{struct {
		From *principal.Principal `ic:"from,omitempty"`
	}{}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(candidGetArchivesArgs, want) {
		t.Fatalf("get_archives args\n got %x\nwant %x", candidGetArchivesArgs, want)
	}
}
