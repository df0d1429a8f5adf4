package ledgertest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/identity"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/fxamacker/cbor/v2"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func readAll(t testing.TB, r *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got nil", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func modes() []struct {
	name string
	opts []Option
} {
	return []struct {
		name string
		opts []Option
	}{{"delegated", nil}, {"root-subnet", []Option{WithRootSubnet()}}}
}

func TestAgentQueryAndCall(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			f := newFixture(t, m.opts...)
			// A Candid round trip through the echo method: verified query.
			var out string
			if err := f.agent.Query(f.echo.ID(), "echo", []any{"hello"}, []any{&out}); err != nil {
				t.Fatalf("verified query: %v", err)
			}
			if out != "hello" {
				t.Fatalf("echo = %q", out)
			}
			who, err := f.agent.QueryRaw(f.echo.ID(), "whoami", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(who, f.id.Sender().Raw) {
				t.Fatalf("query caller = %x, want the ed25519 sender %x", who, f.id.Sender().Raw)
			}
			// v4 synchronous call.
			who, err = f.agent.CallRaw(f.echo.ID(), "whoami", []byte{})
			if err != nil {
				t.Fatalf("v4 call: %v", err)
			}
			if !bytes.Equal(who, f.id.Sender().Raw) {
				t.Fatalf("call caller = %x, want %x", who, f.id.Sender().Raw)
			}
			// A canister reject comes back with its code and the default error code.
			_, err = f.agent.CallRaw(f.echo.ID(), "reject", []byte{})
			wantErr(t, err, "(4) no", "IC0406")
			// GetTime reads the certified virtual clock.
			before := f.s.Now()
			got, err := f.agent.GetTime(f.echo.ID())
			if err != nil {
				t.Fatal(err)
			}
			if uint64(got.UnixNano()) < before || uint64(got.UnixNano()) > f.s.Now() {
				t.Fatalf("certified time %d outside [%d, %d]", got.UnixNano(), before, f.s.Now())
			}
			if !bytes.Equal(f.agent.GetRootKey(), f.s.RootKey()) || len(f.s.RootKey()) != 133 {
				t.Fatalf("root key mismatch or bad length %d", len(f.s.RootKey()))
			}
		})
	}
}

func TestAnonymousCaller(t *testing.T) {
	f := newFixture(t)
	a, err := f.s.NewAgent(new(identity.AnonymousIdentity))
	if err != nil {
		t.Fatal(err)
	}
	who, err := a.CallRaw(f.echo.ID(), "whoami", []byte{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(who, principal.AnonymousID.Raw) {
		t.Fatalf("caller = %x, want anonymous", who)
	}
}

func TestAsyncCallPolling(t *testing.T) {
	// v3 is synchronous; with a short timeout it falls back to 202 while
	// "block" runs, and the agent polls.
	f := newFixture(t, WithSyncCallTimeout(20*time.Millisecond))
	a, err := f.s.NewAgentWithConfig(agent.Config{Identity: f.id, ClientConfig: []agent.ClientOption{agent.WithLegacyAPI()}})
	if err != nil {
		t.Fatal(err)
	}
	// "block" keeps executing until released, so the agent must poll
	// request_status through read_state while the status is "processing".
	type result struct {
		reply []byte
		err   error
	}
	done := make(chan result, 1)
	var once sync.Once
	release := func() { once.Do(func() { close(f.echo.release) }) }
	t.Cleanup(release) // runs before the server closes
	go func() {
		r, err := a.CallRaw(f.echo.ID(), "block", []byte{})
		done <- result{r, err}
	}()
	// Wait until the agent has polled at least twice before releasing.
	deadline := time.After(5 * time.Second)
	for f.s.Stats().ReadStates(f.echo.ID()) < 2 {
		select {
		case <-deadline:
			t.Fatal("the agent never polled")
		case r := <-done:
			t.Fatalf("call ended before release: %q, %v", r.reply, r.err)
		case <-time.After(time.Millisecond):
		}
	}
	release()
	r := <-done
	if r.err != nil || string(r.reply) != "released" {
		t.Fatalf("async call = %q, %v", r.reply, r.err)
	}
	// Async rejects arrive through polling too.
	_, err = a.CallRaw(f.echo.ID(), "reject", []byte{})
	wantErr(t, err, "(4) no")
	// Legacy v2 read_state serves GetTime as well.
	if _, err := a.GetTime(f.echo.ID()); err != nil {
		t.Fatal(err)
	}
}

func TestDelegationRangeCheck(t *testing.T) {
	f := newFixture(t)
	lo, _ := f.s.CanisterRange()
	var n uint64
	for _, b := range lo.Raw[:8] {
		n = n<<8 | uint64(b)
	}
	outside := newEcho(canisterIDFromCounter(n - 1))
	f.s.Install(outside)
	_, err := f.agent.QueryRaw(outside.ID(), "echo", []byte("x"))
	wantErr(t, err, "not in range")
	// The same canister is fine in root-subnet mode, where agent-go checks no ranges.
	g := newFixture(t, WithRootSubnet())
	g.s.Install(outside)
	if _, err := g.agent.QueryRaw(outside.ID(), "echo", []byte("x")); err != nil {
		t.Fatal(err)
	}
}

func TestDataCertificate(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			f := newFixture(t, m.opts...)
			if _, err := f.agent.CallRaw(f.echo.ID(), "set", []byte("tip-root-hash-32-bytes-long....!")); err != nil {
				t.Fatal(err)
			}
			// Updates get no data certificate, as on the IC.
			if r, err := f.agent.CallRaw(f.echo.ID(), "cert", []byte{}); err != nil || string(r) != "none" {
				t.Fatalf("update cert = %q, %v", r, err)
			}
			raw, err := f.agent.QueryRaw(f.echo.ID(), "cert", nil)
			if err != nil {
				t.Fatal(err)
			}
			cert := decodeCert(t, raw)
			if err := certification.VerifyCertifiedData(cert, f.echo.ID(), f.agent.GetRootKey(), []byte("tip-root-hash-32-bytes-long....!")); err != nil {
				t.Fatalf("VerifyCertifiedData: %v", err)
			}
			if err := cert.VerifyTime(5 * time.Minute); err != nil {
				t.Fatal(err)
			}
			if (cert.Delegation != nil) != (m.opts == nil) {
				t.Fatalf("delegation present = %v in mode %s", cert.Delegation != nil, m.name)
			}
			// Everything but the canister's data and the time is pruned, labels kept.
			_, err = cert.Tree.Lookup(hashtree.Label("subnet"), f.s.SubnetID().Raw)
			var le hashtree.LookupError
			if !errors.As(err, &le) || le.Type != hashtree.LookupResultUnknown {
				t.Fatalf("subnet lookup = %v, want unknown (pruned)", err)
			}
			if err := certification.VerifyCertifiedData(cert, f.echo.ID(), f.agent.GetRootKey(), []byte("other")); err == nil {
				t.Fatal("certificate accepted for the wrong data")
			}
		})
	}
}

func decodeCert(t *testing.T, raw []byte) certification.Certificate {
	t.Helper()
	if !bytes.HasPrefix(raw, []byte{0xd9, 0xd9, 0xf7}) {
		t.Fatalf("certificate lacks the self-describe tag: %x", raw[:min(len(raw), 8)])
	}
	var cert certification.Certificate
	if err := cbor.Unmarshal(raw, &cert); err != nil {
		t.Fatalf("decode certificate: %v", err)
	}
	return cert
}

func TestForgedSender(t *testing.T) {
	f := newFixture(t)
	// An identity that claims a key but signs with another one.
	_, err := f.s.NewAgent(forger{f.id, testIdentity(t, 2)})
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := f.s.NewAgent(forger{f.id, testIdentity(t, 2)})
	_, err = forged.QueryRaw(f.echo.ID(), "whoami", nil)
	wantErr(t, err, "(400)", "Invalid signature: ed25519 signature of request")
	_, err = forged.CallRaw(f.echo.ID(), "whoami", []byte{})
	wantErr(t, err, "(400)", "Invalid signature: ed25519 signature of request")
	if f.echo.updateCount() != 0 {
		t.Fatal("a forged call executed")
	}

	now := uint64(time.Now().Add(time.Minute).UnixNano())
	base := agent.Request{Type: agent.RequestTypeCall, CanisterID: f.echo.ID(), MethodName: "whoami", Arguments: []byte{}, IngressExpiry: now, Nonce: []byte{1}}
	url := f.s.URL() + "/api/v4/canister/" + f.echo.ID().Encode() + "/call"
	other := testIdentity(t, 3)
	cases := map[string]struct {
		req    agent.Request
		pub    []byte
		signer func([]byte) []byte
		want   string
	}{
		"sender is not the key's principal": {withSender(base, other.Sender()), f.id.PublicKey(), sign(f.id), "does not match the public key"},
		"no signature":                      {withSender(base, f.id.Sender()), f.id.PublicKey(), nil, "Missing signature from user"},
		"anonymous with a signature":        {withSender(base, principal.AnonymousID), f.id.PublicKey(), sign(f.id), "anonymous"},
		"expired":                           {withExpiry(withSender(base, f.id.Sender()), uint64(time.Now().Add(-time.Second).UnixNano())), f.id.PublicKey(), sign(f.id), "Invalid request expiry: Specified ingress_expiry not within expected range"},
		"expiry too far ahead":              {withExpiry(withSender(base, f.id.Sender()), uint64(time.Now().Add(time.Hour).UnixNano())), f.id.PublicKey(), sign(f.id), "Invalid request expiry: "},
		"no sender":                         {base, nil, nil, "no sender"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			body, _ := envelope(t, c.req, c.pub, c.signer)
			resp, b := post(t, url, body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.want) {
				t.Fatalf("got %d %q, want 400 containing %q", resp.StatusCode, b, c.want)
			}
		})
	}
	if f.echo.updateCount() != 0 {
		t.Fatal("a refused call executed")
	}
}

type forger struct {
	claimed *identity.Ed25519Identity
	signer  *identity.Ed25519Identity
}

func (f forger) Sender() principal.Principal { return f.claimed.Sender() }
func (f forger) PublicKey() []byte           { return f.claimed.PublicKey() }
func (f forger) Sign(m []byte) ([]byte, error) {
	return f.signer.Sign(m)
}
func (f forger) ToPEM() ([]byte, error)  { return nil, errors.New("no") }
func (f forger) Verify(_, _ []byte) bool { return false }

func sign(id *identity.Ed25519Identity) func([]byte) []byte {
	return func(m []byte) []byte { s, _ := id.Sign(m); return s }
}

func withSender(r agent.Request, p principal.Principal) agent.Request { r.Sender = p; return r }
func withExpiry(r agent.Request, e uint64) agent.Request              { r.IngressExpiry = e; return r }

func TestReplayedCallExecutesOnce(t *testing.T) {
	f := newFixture(t)
	req := agent.Request{Type: agent.RequestTypeCall, Sender: f.id.Sender(), CanisterID: f.echo.ID(), MethodName: "set", Arguments: []byte("x"), IngressExpiry: uint64(time.Now().Add(time.Minute).UnixNano()), Nonce: []byte{9}}
	body, _ := envelope(t, req, f.id.PublicKey(), sign(f.id))
	url := f.s.URL() + "/api/v4/canister/" + f.echo.ID().Encode() + "/call"
	for i := 0; i < 3; i++ {
		resp, b := post(t, url, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("attempt %d: %d %s", i, resp.StatusCode, b)
		}
	}
	if n := f.echo.updateCount(); n != 1 {
		t.Fatalf("replayed envelope executed %d times, want 1", n)
	}
}

func TestBadInput(t *testing.T) {
	f := newFixture(t)
	cid := f.echo.ID().Encode()
	expiry := uint64(time.Now().Add(time.Minute).UnixNano())

	t.Run("malformed CBOR", func(t *testing.T) {
		for _, ep := range []string{"/api/v2/canister/" + cid + "/query", "/api/v3/canister/" + cid + "/read_state", "/api/v4/canister/" + cid + "/call", "/api/v3/canister/" + cid + "/call"} {
			for _, body := range [][]byte{nil, {0xff}, {0xa1, 0x61}, []byte("not cbor"), {0xa1, 0x67, 'c', 'o', 'n', 't', 'e', 'n', 't', 0x01}} {
				resp, b := post(t, f.s.URL()+ep, body)
				if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
					t.Fatalf("%s %x: %d %q", ep, body, resp.StatusCode, b)
				}
			}
		}
	})
	t.Run("oversized body", func(t *testing.T) {
		resp, _ := post(t, f.s.URL()+"/api/v2/canister/"+cid+"/query", make([]byte, maxBodyBytes+1))
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("oversized body: %d", resp.StatusCode)
		}
	})
	t.Run("unknown endpoint and method", func(t *testing.T) {
		resp, _ := post(t, f.s.URL()+"/api/v9/canister/"+cid+"/query", nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("unknown version: %d", resp.StatusCode)
		}
		resp, err := LoopbackHTTPClient().Get(f.s.URL() + "/api/v2/canister/" + cid + "/query")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("GET query: %d", resp.StatusCode)
		}
		resp, b := post(t, f.s.URL()+"/api/v2/canister/not-a-principal/query", nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("bad ecid: %d %s", resp.StatusCode, b)
		}
	})
	t.Run("wrong request type or canister", func(t *testing.T) {
		req := agent.Request{Type: agent.RequestTypeCall, Sender: f.id.Sender(), CanisterID: f.echo.ID(), MethodName: "echo", Arguments: []byte{}, IngressExpiry: expiry}
		body, _ := envelope(t, req, f.id.PublicKey(), sign(f.id))
		resp, b := post(t, f.s.URL()+"/api/v2/canister/"+cid+"/query", body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "request type") {
			t.Fatalf("call envelope on query: %d %s", resp.StatusCode, b)
		}
		other := f.s.NewCanisterID()
		resp, b = post(t, f.s.URL()+"/api/v4/canister/"+other.Encode()+"/call", body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "does not match") {
			t.Fatalf("canister id mismatch: %d %s", resp.StatusCode, b)
		}
	})
	t.Run("unknown canister", func(t *testing.T) {
		ghost := f.s.NewCanisterID() // in range, never installed
		_, err := f.agent.QueryRaw(ghost, "echo", nil)
		wantErr(t, err, "(3)", "not found", "IC0301")
		_, err = f.agent.CallRaw(ghost, "echo", []byte{})
		wantErr(t, err, "(3)", "IC0301")
	})
	t.Run("unknown method", func(t *testing.T) {
		_, err := f.agent.QueryRaw(f.echo.ID(), "nope", nil)
		wantErr(t, err, "(3) method not found: nope", "IC0302")
		_, err = f.agent.CallRaw(f.echo.ID(), "nope", []byte{})
		wantErr(t, err, "(3) method not found: nope", "IC0302")
	})
	t.Run("canister trap", func(t *testing.T) {
		_, err := f.agent.QueryRaw(f.echo.ID(), "panic", nil)
		wantErr(t, err, "(5)", "trapped", "IC0502")
	})
	t.Run("bad candid", func(t *testing.T) {
		// The echo canister returns the argument, so a non-Candid argument
		// comes back as a reply agent-go cannot decode.
		q, err := f.agent.CreateRawAPIRequest(agent.RequestTypeQuery, f.echo.ID(), "echo", []byte("not candid"))
		if err != nil {
			t.Fatal(err)
		}
		var raw []byte
		if err := q.Query(&raw, false); err != nil || string(raw) != "not candid" {
			t.Fatalf("raw echo = %q, %v", raw, err)
		}
		// Candid decoding of that reply fails on the client side.
		var out string
		q, err = f.agent.CreateRawAPIRequest(agent.RequestTypeQuery, f.echo.ID(), "echo", []byte("not candid"))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Query(&raw, false); err != nil {
			t.Fatal(err)
		}
		if err := candid.Unmarshal(raw, []any{&out}); err == nil {
			t.Fatal("non-Candid reply decoded")
		}
	})
	t.Run("read_state of another sender's request", func(t *testing.T) {
		req := agent.Request{Type: agent.RequestTypeCall, Sender: f.id.Sender(), CanisterID: f.echo.ID(), MethodName: "echo", Arguments: []byte{}, IngressExpiry: expiry, Nonce: []byte{7}}
		body, rid := envelope(t, req, f.id.PublicKey(), sign(f.id))
		if resp, b := post(t, f.s.URL()+"/api/v4/canister/"+cid+"/call", body); resp.StatusCode != http.StatusOK {
			t.Fatalf("call: %d %s", resp.StatusCode, b)
		}
		other := testIdentity(t, 4)
		rs := agent.Request{Type: agent.RequestTypeReadState, Sender: other.Sender(), Paths: [][]hashtree.Label{{hashtree.Label("request_status"), rid[:]}}, IngressExpiry: expiry}
		body, _ = envelope(t, rs, other.PublicKey(), sign(other))
		resp, b := post(t, f.s.URL()+"/api/v3/canister/"+cid+"/read_state", body)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("foreign request_status: %d %s", resp.StatusCode, b)
		}
		// The owner may read it.
		if _, node, err := f.agent.RequestStatus(f.echo.ID(), rid); err != nil || node == nil {
			t.Fatalf("owner read_state: %v", err)
		}
		for _, p := range [][]hashtree.Label{{hashtree.Label("canister"), f.s.NewCanisterID().Raw, hashtree.Label("certified_data")}, {hashtree.Label("nope")}} {
			rs.Sender, rs.Paths = f.id.Sender(), [][]hashtree.Label{p}
			body, _ = envelope(t, rs, f.id.PublicKey(), sign(f.id))
			resp, b = post(t, f.s.URL()+"/api/v3/canister/"+cid+"/read_state", body)
			if resp.StatusCode/100 != 4 {
				t.Fatalf("path %s: %d %s", p, resp.StatusCode, b)
			}
		}
	})
	t.Run("unknown request status is absent", func(t *testing.T) {
		status, _, err := f.agent.RequestStatus(f.echo.ID(), agent.RequestID{1, 2, 3})
		if err != nil || status != nil {
			t.Fatalf("unknown request: status %q, err %v; want absent", status, err)
		}
	})
}

func TestStatusEndpoint(t *testing.T) {
	s, err := NewServer(WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := LoopbackHTTPClient().Get(s.URL() + "/api/v2/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		RootKey []byte `cbor:"root_key"`
	}
	if err := cbor.Unmarshal(readAll(t, resp), &st); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(st.RootKey, s.RootKey()) {
		t.Fatal("status root key differs")
	}
	const prefix = "308182301d060d2b0601040182dc7c0503010201060c2b0601040182dc7c05030201036100"
	if hex.EncodeToString(st.RootKey[:37]) != prefix {
		t.Fatalf("DER prefix %x", st.RootKey[:37])
	}
	if _, err := certification.PublicBLSKeyFromDER(st.RootKey); err != nil {
		t.Fatal(err)
	}
}

func TestDeterministicSeed(t *testing.T) {
	a, err := NewServer(WithSeed(42))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewServer(WithSeed(42))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := NewServer(WithSeed(43))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !bytes.Equal(a.RootKey(), b.RootKey()) || !a.NewCanisterID().Equal(b.NewCanisterID()) || !a.SubnetID().Equal(b.SubnetID()) {
		t.Fatal("same seed, different replica")
	}
	if bytes.Equal(a.RootKey(), c.RootKey()) {
		t.Fatal("different seeds, same root key")
	}
	lo, hi := a.CanisterRange()
	id := a.NewCanisterID()
	if bytes.Compare(id.Raw, lo.Raw) < 0 || bytes.Compare(id.Raw, hi.Raw) > 0 {
		t.Fatalf("canister id %s outside [%s, %s]", id, lo, hi)
	}
}

func TestListenAddrLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "10.1.2.3:0", "example.com:0", ":0", "nonsense"} {
		if s, err := NewServer(WithListenAddr(addr)); err == nil {
			s.Close()
			t.Fatalf("listen address %q accepted", addr)
		}
	}
	s, err := NewServer(WithListenAddr("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestStats(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 3; i++ {
		if _, err := f.agent.QueryRaw(f.echo.ID(), "echo", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.agent.CallRaw(f.echo.ID(), "set", []byte("a")); err != nil {
		t.Fatal(err)
	}
	st := f.s.Stats()
	id := f.echo.ID()
	// Each verified query costs one extra read_state for the subnet.
	if st.Queries(id, "echo") != 3 || st.Queries(id, "") != 3 || st.Calls(id, "set") != 1 || st.ReadStates(id) != 3 {
		t.Fatalf("stats = %+v", st.Canisters[id.Encode()])
	}
}

func TestUpdatesAreSerialized(t *testing.T) {
	f := newFixture(t)
	counter := &countingCanister{id: f.s.NewCanisterID()}
	f.s.Install(counter)
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			_, err := f.agent.CallRaw(counter.ID(), "inc", []byte{})
			errs <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if counter.n != 8 || counter.overlap {
		t.Fatalf("n = %d, overlapping updates = %v", counter.n, counter.overlap)
	}
}

// countingCanister is deliberately unsynchronised: the race detector and
// the overlap flag catch any concurrent Update.
type countingCanister struct {
	id      principal.Principal
	n       int
	busy    bool
	overlap bool
}

func (c *countingCanister) ID() principal.Principal { return c.id }
func (c *countingCanister) CertifiedData() []byte   { return nil }
func (c *countingCanister) Query(CallContext, string, []byte) ([]byte, *Reject) {
	return nil, &Reject{Code: RejectCanisterError, Message: "no queries"}
}
func (c *countingCanister) Update(CallContext, string, []byte) ([]byte, *Reject) {
	if c.busy {
		c.overlap = true
	}
	c.busy = true
	c.n++
	c.busy = false
	return []byte(fmt.Sprint(c.n)), nil
}

func TestClosesWithRequestInFlight(t *testing.T) {
	s, err := NewServer(WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	e := newEcho(s.NewCanisterID())
	s.Install(e)
	s.SetFaults(e.ID(), Faults{Latency: time.Hour})
	a, err := s.NewAgent(testIdentity(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := a.QueryRaw(e.ID(), "echo", nil)
		errc <- err
	}()
	for s.Stats().Queries(e.ID(), "echo") == 0 {
		time.Sleep(time.Millisecond)
	}
	s.Close() // must not wait an hour
	if err := <-errc; err == nil {
		t.Fatal("query survived Close")
	}
}

func benchFixture(b *testing.B, opts ...Option) (*Server, *echoCanister, *agent.Agent) {
	b.Helper()
	s, err := NewServer(append([]Option{WithSeed(9)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	e := newEcho(s.NewCanisterID())
	s.Install(e)
	a, err := s.NewAgent(testIdentity(b, 1))
	if err != nil {
		b.Fatal(err)
	}
	return s, e, a
}

// BenchmarkVerifiedQuery is one agent-go query with signature verification:
// query + read_state of /subnet + BLS and ed25519 checks on both sides.
func BenchmarkVerifiedQuery(b *testing.B) {
	for _, m := range modes() {
		b.Run(m.name, func(b *testing.B) {
			_, e, a := benchFixture(b, m.opts...)
			for b.Loop() {
				if _, err := a.QueryRaw(e.ID(), "echo", []byte("x")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSyncCall is one v4 update call answered with a certificate.
func BenchmarkSyncCall(b *testing.B) {
	_, e, a := benchFixture(b)
	for b.Loop() {
		if _, err := a.CallRaw(e.ID(), "set", []byte("x")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDataCertificate is the replica's cost of ic0.data_certificate().
func BenchmarkDataCertificate(b *testing.B) {
	s, e, _ := benchFixture(b)
	data := bytes.Repeat([]byte{1}, 32)
	for b.Loop() {
		if c := s.dataCertificate(e.ID(), data, Faults{}, ^uint64(0)); len(c) == 0 {
			b.Fatal("empty certificate")
		}
	}
}

func TestExpiredStatusesArePruned(t *testing.T) {
	s, err := NewServer(WithSeed(4))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := uint64(time.Now().UnixNano())
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	s.statuses[[32]byte{1}] = &requestStatus{done: true, expiry: now - uint64(statusRetention) - 1}
	s.statuses[[32]byte{2}] = &requestStatus{done: true, expiry: now}
	s.statuses[[32]byte{3}] = &requestStatus{done: false, expiry: 0} // still executing
	for i := 0; i < 1023; i++ {
		s.pruneStatusesLocked(now)
	}
	if len(s.statuses) != 3 {
		t.Fatal("pruned before the sweep was due")
	}
	s.pruneStatusesLocked(now)
	if _, ok := s.statuses[[32]byte{1}]; ok || len(s.statuses) != 2 {
		t.Fatalf("after the sweep: %d statuses, expired one kept = %v", len(s.statuses), ok)
	}
}
