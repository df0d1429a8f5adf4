package ledgertest

import (
	"bytes"
	"testing"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/principal"
)

const fuzzNow = uint64(1_800_000_000_000_000_000)

func envelopeSeeds(t testing.TB) [][]byte {
	id := testIdentity(t, 1)
	cid := principal.Principal{Raw: []byte{0, 0, 0, 0, 0, 0x10, 0, 0, 1, 1}}
	exp := fuzzNow + 60e9
	var out [][]byte
	for _, r := range []agent.Request{
		{Type: agent.RequestTypeQuery, Sender: id.Sender(), CanisterID: cid, MethodName: "echo", Arguments: []byte("DIDL\x00\x00"), IngressExpiry: exp, Nonce: []byte{1, 2}},
		{Type: agent.RequestTypeCall, Sender: id.Sender(), CanisterID: cid, MethodName: "icrc1_transfer", Arguments: []byte{}, IngressExpiry: exp},
		{Type: agent.RequestTypeReadState, Sender: id.Sender(), Paths: [][]hashtree.Label{{hashtree.Label("time")}, {hashtree.Label("request_status"), bytes.Repeat([]byte{7}, 32)}}, IngressExpiry: exp},
	} {
		b, _ := envelope(t, r, id.PublicKey(), sign(id))
		out = append(out, b)
	}
	anon, _ := envelope(t, agent.Request{Type: agent.RequestTypeQuery, Sender: principal.AnonymousID, CanisterID: cid, MethodName: "m", Arguments: []byte{}, IngressExpiry: exp}, nil, nil)
	delegated, _ := delegatedEnvelope(t, agent.Request{Type: agent.RequestTypeCall, CanisterID: cid, MethodName: "m", Arguments: []byte{}, IngressExpiry: exp},
		ed25519Signer(1), []delegationSpec{{to: ed25519Signer(2), expiration: exp, targets: []principal.Principal{cid}}})
	return append(out, anon, delegated)
}

func TestDecodeRequestMatchesAgent(t *testing.T) {
	id := testIdentity(t, 1)
	r := agent.Request{Type: agent.RequestTypeReadState, Sender: id.Sender(), Paths: [][]hashtree.Label{{hashtree.Label("time")}, {hashtree.Label("subnet")}}, IngressExpiry: fuzzNow + 1, Nonce: []byte{3}}
	body, rid := envelope(t, r, id.PublicKey(), sign(id))
	got, err := decodeRequest(body, fuzzNow)
	if err != nil {
		t.Fatal(err)
	}
	if got.id != rid {
		t.Fatalf("request id %x, agent-go computes %x", got.id, rid)
	}
	if !got.sender.Equal(id.Sender()) || got.typ != "read_state" || len(got.paths) != 2 {
		t.Fatalf("decoded %+v", got)
	}
	// One flipped bit anywhere in the signed content breaks the signature.
	for i := range body {
		mut := append([]byte(nil), body...)
		mut[i] ^= 0x01
		if _, err := decodeRequest(mut, fuzzNow); err == nil {
			t.Fatalf("byte %d flipped and the request still authenticates", i)
		}
	}
}

// FuzzRequestEnvelope feeds arbitrary bodies to the request decoder: it must
// refuse them with an envelope error, never panic, and whatever it accepts
// must be authenticated.
func FuzzRequestEnvelope(f *testing.F) {
	for _, s := range envelopeSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Add([]byte{0xa1, 0x67, 'c', 'o', 'n', 't', 'e', 'n', 't', 0xa0})
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeRequest(body, fuzzNow)
		if err != nil {
			if _, ok := asEnvelopeError(err); !ok {
				t.Fatalf("error %v is not an envelope error", err)
			}
			return
		}
		if len(r.sender.Raw) == 0 {
			t.Fatal("accepted a request without a sender")
		}
		if r.ingressExpiry < fuzzNow {
			t.Fatal("accepted an expired request")
		}
	})
}
