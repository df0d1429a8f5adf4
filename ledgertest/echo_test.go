package ledgertest

import (
	"crypto/ed25519"
	"net/http"
	"sync"
	"testing"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/identity"
	"github.com/aviate-labs/agent-go/leb128"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/fxamacker/cbor/v2"
)

// echoCanister is a minimal canister for exercising the replica without a
// ledger: it echoes, reports its caller and time, certifies data and can
// block an update until released.
type echoCanister struct {
	id principal.Principal

	mu      sync.Mutex
	data    []byte
	updates int
	callers []principal.Principal
	release chan struct{} // "block" waits on it
}

func newEcho(id principal.Principal) *echoCanister {
	return &echoCanister{id: id, release: make(chan struct{})}
}

func (e *echoCanister) ID() principal.Principal { return e.id }

func (e *echoCanister) CertifiedData() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.data
}

func (e *echoCanister) Query(ctx CallContext, method string, arg []byte) ([]byte, *Reject) {
	switch method {
	case "echo":
		return arg, nil
	case "whoami":
		return ctx.Caller.Raw, nil
	case "time":
		return leb128.AppendUnsignedUint64(nil, ctx.Time), nil
	case "cert":
		if ctx.DataCertificate == nil {
			return nil, &Reject{Code: RejectCanisterError, Message: "no data certificate"}
		}
		return ctx.DataCertificate(e.CertifiedData()), nil
	case "panic":
		panic("boom")
	}
	return nil, &Reject{Code: RejectDestinationInvalid, Message: "method not found: " + method, ErrorCode: "IC0302"}
}

func (e *echoCanister) Update(ctx CallContext, method string, arg []byte) ([]byte, *Reject) {
	e.mu.Lock()
	e.updates++
	e.callers = append(e.callers, ctx.Caller)
	e.mu.Unlock()
	switch method {
	case "set":
		e.mu.Lock()
		e.data = append([]byte(nil), arg...)
		e.mu.Unlock()
		return arg, nil
	case "whoami":
		return ctx.Caller.Raw, nil
	case "reject":
		return nil, &Reject{Code: RejectCanisterReject, Message: "no"}
	case "block":
		<-e.release
		return []byte("released"), nil
	case "cert":
		if ctx.DataCertificate != nil {
			return nil, &Reject{Code: RejectCanisterError, Message: "data certificate in an update"}
		}
		return []byte("none"), nil
	}
	return nil, &Reject{Code: RejectDestinationInvalid, Message: "method not found: " + method, ErrorCode: "IC0302"}
}

func (e *echoCanister) updateCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.updates
}

// fixture is a replica with one echo canister and an ed25519 agent.
type fixture struct {
	s     *Server
	echo  *echoCanister
	id    *identity.Ed25519Identity
	agent *agent.Agent
}

func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	s, err := NewServer(append([]Option{WithSeed(7)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	e := newEcho(s.NewCanisterID())
	s.Install(e)
	id := testIdentity(t, 1)
	a, err := s.NewAgent(id)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{s: s, echo: e, id: id, agent: a}
}

func testIdentity(t testing.TB, n byte) *identity.Ed25519Identity {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = n
	sk := ed25519.NewKeyFromSeed(seed)
	id, err := identity.NewEd25519Identity(sk.Public().(ed25519.PublicKey), sk)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// envelope builds a request envelope as agent-go does, signed by signer
// (nil: unsigned).
func envelope(t testing.TB, req agent.Request, pub []byte, signer func([]byte) []byte) ([]byte, agent.RequestID) {
	t.Helper()
	rid := agent.NewRequestID(req)
	env := agent.Envelope{Content: req, SenderPubKey: pub}
	if signer != nil {
		env.SenderSig = signer(append([]byte("\x0Aic-request"), rid[:]...))
	}
	b, err := cbor.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b, rid
}

func post(t testing.TB, url string, body []byte) (*http.Response, []byte) {
	t.Helper()
	resp, err := LoopbackHTTPClient().Post(url, "application/cbor", bytesReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := readAll(t, resp)
	return resp, b
}
