package ledgertest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/asn1"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/identity"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/fxamacker/cbor/v2"
)

// TestSenderSchemes: agent-go's ed25519, secp256k1 and P-256 identities
// reach canisters as their self-authenticating principals.
func TestSenderSchemes(t *testing.T) {
	f := newFixture(t)
	secp, err := identity.NewRandomSecp256k1Identity()
	if err != nil {
		t.Fatal(err)
	}
	p256, err := identity.NewRandomPrime256v1Identity()
	if err != nil {
		t.Fatal(err)
	}
	for name, id := range map[string]identity.Identity{"ed25519": testIdentity(t, 9), "secp256k1": secp, "p256": p256} {
		t.Run(name, func(t *testing.T) {
			a, err := f.s.NewAgent(id)
			if err != nil {
				t.Fatal(err)
			}
			who, err := a.QueryRaw(f.echo.ID(), "whoami", nil)
			if err != nil || !bytes.Equal(who, id.Sender().Raw) {
				t.Fatalf("query caller %x, %v; want %s", who, err, id.Sender())
			}
			who, err = a.CallRaw(f.echo.ID(), "whoami", []byte{})
			if err != nil || !bytes.Equal(who, id.Sender().Raw) {
				t.Fatalf("call caller %x, %v; want %s", who, err, id.Sender())
			}
		})
	}
}

// secpKey is a secp256k1 key whose SPKI carries a compressed or
// uncompressed point, signing low-S or high-S.
type secpKey struct {
	sk         *secp256k1.PrivateKey
	compressed bool
	highS      bool
}

func (k secpKey) der(t testing.TB) []byte {
	pt := k.sk.PubKey().SerializeUncompressed()
	if k.compressed {
		pt = k.sk.PubKey().SerializeCompressed()
	}
	curve, _ := asn1.Marshal(oidSecp256k1)
	b, err := asn1.Marshal(subjectPublicKeyInfo{
		Algorithm: pkix.AlgorithmIdentifier{Algorithm: oidECPublicKey, Parameters: asn1.RawValue{FullBytes: curve}},
		PublicKey: asn1.BitString{Bytes: pt, BitLength: 8 * len(pt)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (k secpKey) sign(msg []byte) []byte {
	h := sha256.Sum256(msg)
	sig := secpecdsa.Sign(k.sk, h[:]) // RFC 6979, low-S
	r, s := sig.R(), sig.S()
	if k.highS {
		s.Negate()
	}
	out := make([]byte, 64)
	r.PutBytesUnchecked(out[:32])
	s.PutBytesUnchecked(out[32:])
	return out
}

func TestSecp256k1Encodings(t *testing.T) {
	f := newFixture(t)
	var seed [32]byte
	seed[0] = 5
	sk := secp256k1.PrivKeyFromBytes(seed[:])
	url := f.s.URL() + "/api/v4/canister/" + f.echo.ID().Encode() + "/call"
	for _, c := range []struct {
		name string
		key  secpKey
		ok   bool
	}{
		{"uncompressed", secpKey{sk: sk}, true},
		{"compressed", secpKey{sk: sk, compressed: true}, true},
		{"high-S", secpKey{sk: sk, highS: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			der := c.key.der(t)
			sender := principal.NewSelfAuthenticating(der)
			req := agent.Request{Type: agent.RequestTypeCall, Sender: sender, CanisterID: f.echo.ID(), MethodName: "whoami", Arguments: []byte{}, IngressExpiry: uint64(time.Now().Add(time.Minute).UnixNano()), Nonce: []byte(c.name)}
			body, _ := envelope(t, req, der, c.key.sign)
			resp, b := post(t, url, body)
			if c.ok && resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if !c.ok && (resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(string(b), "Invalid signature: ecdsa_secp256k1")) {
				t.Fatalf("want 400 Invalid signature, got %d %s", resp.StatusCode, b)
			}
		})
	}
}

type signer struct {
	der  []byte
	sign func([]byte) []byte
}

func ed25519Signer(n byte) signer {
	seed := make([]byte, ed25519.SeedSize)
	seed[0], seed[1] = n, 0xde
	sk := ed25519.NewKeyFromSeed(seed)
	id, _ := identity.NewEd25519Identity(sk.Public().(ed25519.PublicKey), sk)
	return signer{id.PublicKey(), func(m []byte) []byte { return ed25519.Sign(sk, m) }}
}

func p256Signer(t testing.TB) signer {
	sk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := identity.NewPrime256v1Identity(sk)
	return signer{id.PublicKey(), func(m []byte) []byte {
		h := sha256.Sum256(m)
		r, s, err := ecdsa.Sign(rand.Reader, sk, h[:])
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		s.FillBytes(out[32:])
		return out
	}}
}

type delegationSpec struct {
	to         signer
	expiration uint64
	targets    []principal.Principal // nil: no targets field
}

// delegatedEnvelope builds an envelope as agent-js's DelegationIdentity
// does: sender_pubkey is the root key, each delegation is signed by the key
// before it, and the request by the last delegated key.
func delegatedEnvelope(t testing.TB, req agent.Request, root signer, chain []delegationSpec) ([]byte, agent.RequestID) {
	t.Helper()
	type signedDelegation struct {
		Delegation map[string]any `cbor:"delegation"`
		Signature  []byte         `cbor:"signature"`
	}
	var sds []signedDelegation
	by := root
	for _, d := range chain {
		m := map[string]any{"pubkey": d.to.der, "expiration": d.expiration}
		if d.targets != nil {
			ts := []any{}
			for _, p := range d.targets {
				ts = append(ts, p.Raw)
			}
			m["targets"] = ts
		}
		h, err := certification.HashAny(m)
		if err != nil {
			t.Fatal(err)
		}
		sds = append(sds, signedDelegation{m, by.sign(append([]byte("\x1Aic-request-auth-delegation"), h[:]...))})
		by = d.to
	}
	req.Sender = principal.NewSelfAuthenticating(root.der)
	rid := agent.NewRequestID(req)
	b, err := cbor.Marshal(map[string]any{
		"content":           req,
		"sender_pubkey":     root.der,
		"sender_sig":        by.sign(append([]byte("\x0Aic-request"), rid[:]...)),
		"sender_delegation": sds,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b, rid
}

func TestSenderDelegations(t *testing.T) {
	f := newFixture(t)
	root, session, inner := ed25519Signer(1), p256Signer(t), ed25519Signer(3)
	later := uint64(time.Now().Add(time.Hour).UnixNano())
	earlier := uint64(time.Now().Add(-time.Second).UnixNano())
	other := f.s.NewCanisterID()
	cid := f.echo.ID().Encode()
	for _, c := range []struct {
		name  string
		chain []delegationSpec
		want  string // "" = accepted
	}{
		{"one delegation", []delegationSpec{{to: session, expiration: later}}, ""},
		{"targets include the canister", []delegationSpec{{to: session, expiration: later, targets: []principal.Principal{other, f.echo.ID()}}}, ""},
		{"two delegations", []delegationSpec{{to: session, expiration: later}, {to: inner, expiration: later}}, ""},
		{"targets exclude the canister", []delegationSpec{{to: session, expiration: later, targets: []principal.Principal{other}}}, "is not one of the delegation targets"},
		{"expired", []delegationSpec{{to: session, expiration: earlier}}, "Invalid delegation expiry"},
		{"repeated key", []delegationSpec{{to: session, expiration: later}, {to: root, expiration: later}}, "repeats a public key"},
		// The last delegation names inner's key, the request is signed by session's.
		{"request not signed by the last key", []delegationSpec{{to: session, expiration: later}, {to: signer{inner.der, session.sign}, expiration: later}}, "Invalid signature: ed25519"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := agent.Request{Type: agent.RequestTypeCall, CanisterID: f.echo.ID(), MethodName: "whoami", Arguments: []byte{}, IngressExpiry: uint64(time.Now().Add(time.Minute).UnixNano()), Nonce: []byte(c.name)}
			body, _ := delegatedEnvelope(t, req, root, c.chain)
			resp, b := post(t, f.s.URL()+"/api/v4/canister/"+cid+"/call", body)
			if c.want == "" {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %s", resp.StatusCode, b)
				}
				// The caller is the root key's principal, as for Internet Identity users.
				q := req
				q.Type, q.Nonce = agent.RequestTypeQuery, nil
				qb, _ := delegatedEnvelope(t, q, root, c.chain)
				resp, b = post(t, f.s.URL()+"/api/v3/canister/"+cid+"/query", qb)
				var qr struct {
					Status string `cbor:"status"`
					Reply  struct {
						Arg []byte `cbor:"arg"`
					} `cbor:"reply"`
				}
				if resp.StatusCode != http.StatusOK || cbor.Unmarshal(b, &qr) != nil || !bytes.Equal(qr.Reply.Arg, principal.NewSelfAuthenticating(root.der).Raw) {
					t.Fatalf("delegated query: %d %+v", resp.StatusCode, qr)
				}
				return
			}
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.want) {
				t.Fatalf("want 400 containing %q, got %d %s", c.want, resp.StatusCode, b)
			}
		})
	}
}
