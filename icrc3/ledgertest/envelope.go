package ledgertest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/fxamacker/cbor/v2"
)

// Ingress expiry limits of the IC: a request must not have expired and may
// not expire more than the maximum TTL plus the permitted drift ahead.
const (
	maxIngressTTL  = 5 * time.Minute
	permittedDrift = 60 * time.Second
)

// request is a decoded, authenticated request envelope.
type request struct {
	id            [32]byte
	typ           string
	canisterID    principal.Principal
	method        string
	arg           []byte
	sender        principal.Principal
	ingressExpiry uint64
	paths         [][][]byte
}

type rawEnvelope struct {
	Content          cbor.RawMessage `cbor:"content"`
	SenderPubKey     []byte          `cbor:"sender_pubkey"`
	SenderSig        []byte          `cbor:"sender_sig"`
	SenderDelegation cbor.RawMessage `cbor:"sender_delegation"`
}

type rawContent struct {
	RequestType   string     `cbor:"request_type"`
	CanisterID    []byte     `cbor:"canister_id"`
	MethodName    string     `cbor:"method_name"`
	Arg           []byte     `cbor:"arg"`
	Sender        []byte     `cbor:"sender"`
	IngressExpiry uint64     `cbor:"ingress_expiry"`
	Nonce         []byte     `cbor:"nonce"`
	Paths         [][][]byte `cbor:"paths"`
}

// envelopeError is a request the replica refuses before it reaches a
// canister; status is the HTTP status the IC answers with.
type envelopeError struct {
	status int
	msg    string
}

func (e *envelopeError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &envelopeError{status: 400, msg: fmt.Sprintf(format, a...)}
}

var decMode = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		MaxNestedLevels:  16,
		MaxArrayElements: 1 << 16,
		MaxMapPairs:      64,
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// decodeRequest parses an envelope, recomputes the request id the way the
// IC does (hash of the content map) and authenticates the sender. wallNow
// is the wall-clock time in ns: clients stamp ingress_expiry from their
// wall clock, not from the replica's virtual clock.
func decodeRequest(body []byte, wallNow uint64) (*request, error) {
	var env rawEnvelope
	if err := decMode.Unmarshal(body, &env); err != nil {
		return nil, badRequest("could not parse body as read request: %v", err)
	}
	if len(env.Content) == 0 {
		return nil, badRequest("request envelope has no content")
	}
	var generic map[string]any
	if err := decMode.Unmarshal(env.Content, &generic); err != nil {
		return nil, badRequest("malformed request content: %v", err)
	}
	var c rawContent
	if err := decMode.Unmarshal(env.Content, &c); err != nil {
		return nil, badRequest("malformed request content: %v", err)
	}
	id, err := certification.HashAny(generic)
	if err != nil {
		return nil, badRequest("cannot compute request id: %v", err)
	}
	if len(env.SenderDelegation) != 0 {
		return nil, badRequest("sender delegations are not supported by this replica")
	}
	r := &request{
		id:            id,
		typ:           c.RequestType,
		method:        c.MethodName,
		arg:           c.Arg,
		sender:        principal.Principal{Raw: c.Sender},
		ingressExpiry: c.IngressExpiry,
		paths:         c.Paths,
	}
	if c.CanisterID != nil {
		r.canisterID = principal.Principal{Raw: c.CanisterID}
	}
	if len(c.Sender) == 0 {
		return nil, badRequest("request has no sender")
	}
	switch {
	case c.IngressExpiry < wallNow:
		return nil, badRequest("invalid request expiry: %d is in the past (now %d)", c.IngressExpiry, wallNow)
	case c.IngressExpiry > wallNow+uint64(maxIngressTTL+permittedDrift):
		return nil, badRequest("invalid request expiry: %d is too far in the future (now %d)", c.IngressExpiry, wallNow)
	}
	if err := authenticate(r, env.SenderPubKey, env.SenderSig); err != nil {
		return nil, err
	}
	return r, nil
}

// authenticate checks that the sender is the anonymous principal with no
// signature, or the self-authenticating principal of an ed25519 key that
// signed the request id.
func authenticate(r *request, pubKey, sig []byte) error {
	if r.sender.IsAnonymous() {
		if len(pubKey) != 0 || len(sig) != 0 {
			return badRequest("anonymous request must not carry a public key or signature")
		}
		return nil
	}
	if len(pubKey) == 0 || len(sig) == 0 {
		return badRequest("missing signature: request from %s carries no public key or signature", r.sender)
	}
	if want := principal.NewSelfAuthenticating(pubKey); !bytes.Equal(want.Raw, r.sender.Raw) {
		return badRequest("invalid sender: the public key does not belong to %s (it is %s's)", r.sender, want)
	}
	key, err := x509.ParsePKIXPublicKey(pubKey)
	if err != nil {
		return badRequest("invalid public key: %v", err)
	}
	edKey, ok := key.(ed25519.PublicKey)
	if !ok {
		return badRequest("unsupported public key algorithm %T (this replica accepts ed25519 senders)", key)
	}
	msg := append([]byte("\x0Aic-request"), r.id[:]...)
	if !ed25519.Verify(edKey, msg, sig) {
		return badRequest("invalid signature: ed25519 verification of request %x failed", r.id)
	}
	return nil
}

func asEnvelopeError(err error) (*envelopeError, bool) {
	var e *envelopeError
	ok := errors.As(err, &e)
	return e, ok
}
