package ledgertest

import (
	"errors"
	"fmt"
	"time"

	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/fxamacker/cbor/v2"
)

// Ingress expiry limits of the IC: a request must not have expired and may
// not expire more than the maximum TTL plus the validator's permitted drift
// ahead (MAX_INGRESS_TTL and PERMITTED_DRIFT_AT_VALIDATOR).
const (
	maxIngressTTL  = 5 * time.Minute
	permittedDrift = 30 * time.Second
)

// requestTimes are the two clocks an ingress expiry may be valid against.
// ledger is the replica's virtual clock, the IC's time as far as any client
// can tell (certified /time, query signatures): a client that syncs its
// clock to a certificate stamps expiries from it. wall is this machine's
// clock: a client that never syncs stamps expiries from its own clock, which
// after an Advance lags the ledger clock. Accepting either is a documented
// accommodation of the test replica; the IC has only one clock.
type requestTimes struct{ ledger, wall uint64 }

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
	// targets are the target lists of the sender's delegations that had one:
	// the request may only reach a canister every list names.
	targets [][][]byte
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

// decodeRequest is decodeRequestAt with both clocks at now.
func decodeRequest(body []byte, now uint64) (*request, error) {
	return decodeRequestAt(body, requestTimes{ledger: now, wall: now})
}

// decodeRequestAt parses an envelope, recomputes the request id the way the
// IC does (hash of the content map) and authenticates the sender. The
// ingress expiry must be valid against one of the two clocks.
func decodeRequestAt(body []byte, times requestTimes) (*request, error) {
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
	if !expiryValid(c.IngressExpiry, times.ledger) && !expiryValid(c.IngressExpiry, times.wall) {
		// The IC's text: agent-js re-syncs its clock when a reply starts
		// with exactly "Invalid request expiry: ".
		return nil, badRequest("Invalid request expiry: Specified ingress_expiry not within expected range: Minimum allowed expiry: %s, Maximum allowed expiry: %s, Provided expiry: %s",
			fmtICTime(times.ledger), fmtICTime(times.ledger+uint64(maxIngressTTL+permittedDrift)), fmtICTime(c.IngressExpiry))
	}
	if err := authenticate(r, &env, times); err != nil {
		return nil, err
	}
	return r, nil
}

func expiryValid(expiry, now uint64) bool {
	return expiry >= now && expiry <= now+uint64(maxIngressTTL+permittedDrift)
}

// fmtICTime formats ns since the epoch as the IC's error texts do.
func fmtICTime(ns uint64) string {
	return time.Unix(0, int64(ns)).UTC().Format("2006-01-02 15:04:05.999999999 UTC")
}

func asEnvelopeError(err error) (*envelopeError, bool) {
	var e *envelopeError
	ok := errors.As(err, &e)
	return e, ok
}
