package icrc3

import (
	"errors"
	"fmt"
	"strings"
	"testing"

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
