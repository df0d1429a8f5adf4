package ledgertest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"

	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/fxamacker/cbor/v2"
)

// Domain separators of the IC interface specification.
var (
	sepRequest    = []byte("\x0Aic-request")
	sepDelegation = []byte("\x1Aic-request-auth-delegation")
)

// maxDelegations is the longest sender_delegation chain the IC accepts.
const maxDelegations = 20

// maxDelegationTargets bounds one delegation's target list, as on the IC.
const maxDelegationTargets = 1000

var (
	oidEd25519        = asn1.ObjectIdentifier{1, 3, 101, 112}
	oidECPublicKey    = asn1.ObjectIdentifier{1, 2, 840, 10045, 2, 1}
	oidSecp256k1      = asn1.ObjectIdentifier{1, 3, 132, 0, 10}
	oidP256           = asn1.ObjectIdentifier{1, 2, 840, 10045, 3, 1, 7}
	oidCanisterSig    = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 56387, 1, 2}
	errUnsupportedKey = errors.New("unsupported public key")
)

// senderKey is a parsed sender public key of one of the IC's basic
// signature schemes.
type senderKey struct {
	scheme string // "ed25519", "ecdsa_secp256k1", "ecdsa_p256"
	verify func(msg, sig []byte) bool
}

type subjectPublicKeyInfo struct {
	Algorithm pkix.AlgorithmIdentifier
	PublicKey asn1.BitString
}

// parseSenderKey parses a DER SubjectPublicKeyInfo as the specification's
// "Signatures" section defines it: Ed25519 (RFC 8410), or ECDSA on P-256 or
// secp256k1 (RFC 5480, uncompressed or compressed point). ECDSA signatures
// are the 64-byte r||s over the SHA-256 of the message.
func parseSenderKey(der []byte) (*senderKey, error) {
	var spki subjectPublicKeyInfo
	rest, err := asn1.Unmarshal(der, &spki)
	if err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("%w: not a DER SubjectPublicKeyInfo", errUnsupportedKey)
	}
	alg := spki.Algorithm.Algorithm
	switch {
	case alg.Equal(oidEd25519):
		k, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			return nil, fmt.Errorf("%w: ed25519: %v", errUnsupportedKey, err)
		}
		ek := k.(ed25519.PublicKey)
		return &senderKey{scheme: "ed25519", verify: func(msg, sig []byte) bool { return ed25519.Verify(ek, msg, sig) }}, nil
	case alg.Equal(oidECPublicKey):
		var curve asn1.ObjectIdentifier
		if _, err := asn1.Unmarshal(spki.Algorithm.Parameters.FullBytes, &curve); err != nil {
			return nil, fmt.Errorf("%w: ECDSA key without a named curve", errUnsupportedKey)
		}
		point := spki.PublicKey.RightAlign()
		switch {
		case curve.Equal(oidP256):
			k, err := x509.ParsePKIXPublicKey(der)
			if err != nil {
				return nil, fmt.Errorf("%w: P-256: %v", errUnsupportedKey, err)
			}
			pk := k.(*ecdsa.PublicKey)
			return &senderKey{scheme: "ecdsa_p256", verify: func(msg, sig []byte) bool {
				if len(sig) != 64 {
					return false
				}
				h := sha256.Sum256(msg)
				r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
				return ecdsa.Verify(pk, h[:], r, s)
			}}, nil
		case curve.Equal(oidSecp256k1):
			pk, err := secp256k1.ParsePubKey(point)
			if err != nil {
				return nil, fmt.Errorf("%w: secp256k1: %v", errUnsupportedKey, err)
			}
			return &senderKey{scheme: "ecdsa_secp256k1", verify: func(msg, sig []byte) bool {
				if len(sig) != 64 {
					return false
				}
				var r, s secp256k1.ModNScalar
				if r.SetByteSlice(sig[:32]) || s.SetByteSlice(sig[32:]) || r.IsZero() || s.IsZero() {
					return false // overflowed the group order, or zero
				}
				if s.IsOverHalfOrder() {
					return false // the IC accepts only low-S signatures
				}
				h := sha256.Sum256(msg)
				return secpecdsa.NewSignature(&r, &s).Verify(h[:], pk)
			}}, nil
		default:
			return nil, fmt.Errorf("%w: ECDSA curve %v (the IC accepts P-256 and secp256k1)", errUnsupportedKey, curve)
		}
	case alg.Equal(oidCanisterSig):
		return nil, fmt.Errorf("%w: canister signatures are not supported by this replica", errUnsupportedKey)
	}
	return nil, fmt.Errorf("%w: algorithm %v", errUnsupportedKey, alg)
}

type rawSignedDelegation struct {
	Delegation cbor.RawMessage `cbor:"delegation"`
	Signature  []byte          `cbor:"signature"`
}

type rawDelegation struct {
	PubKey     []byte   `cbor:"pubkey"`
	Expiration uint64   `cbor:"expiration"`
	Targets    [][]byte `cbor:"targets"`
}

// authenticate checks that the sender is the anonymous principal with no
// signature, or the self-authenticating principal of sender_pubkey, whose
// key (directly, or through the delegation chain) signed the request id.
// Delegation expirations are checked like ingress expiry, against either
// clock; targets are kept on the request for the endpoint to check.
func authenticate(r *request, env *rawEnvelope, times requestTimes) error {
	if r.sender.IsAnonymous() {
		if len(env.SenderPubKey) != 0 || len(env.SenderSig) != 0 || len(env.SenderDelegation) != 0 {
			return badRequest("Request from the anonymous user must not carry a public key, signature or delegation")
		}
		return nil
	}
	if len(env.SenderPubKey) == 0 || len(env.SenderSig) == 0 {
		return badRequest("Missing signature from user: %s", r.sender)
	}
	if want := principal.NewSelfAuthenticating(env.SenderPubKey); !bytes.Equal(want.Raw, r.sender.Raw) {
		return badRequest("The user id %s does not match the public key %x (it is %s's)", r.sender, env.SenderPubKey, want)
	}
	key, err := parseSenderKey(env.SenderPubKey)
	if err != nil {
		return badRequest("Invalid signature: %v", err)
	}
	if len(env.SenderDelegation) != 0 {
		var chain []rawSignedDelegation
		if err := decMode.Unmarshal(env.SenderDelegation, &chain); err != nil {
			return badRequest("Invalid delegation: malformed sender_delegation: %v", err)
		}
		if len(chain) > maxDelegations {
			return badRequest("Invalid delegation: %d delegations, at most %d are allowed", len(chain), maxDelegations)
		}
		seen := map[string]bool{string(env.SenderPubKey): true}
		for i, sd := range chain {
			var generic map[string]any
			var d rawDelegation
			if err := decMode.Unmarshal(sd.Delegation, &generic); err != nil {
				return badRequest("Invalid delegation: delegation %d: %v", i, err)
			}
			if err := decMode.Unmarshal(sd.Delegation, &d); err != nil {
				return badRequest("Invalid delegation: delegation %d: %v", i, err)
			}
			h, err := certification.HashAny(generic)
			if err != nil {
				return badRequest("Invalid delegation: delegation %d cannot be hashed: %v", i, err)
			}
			if !key.verify(append(append([]byte(nil), sepDelegation...), h[:]...), sd.Signature) {
				return badRequest("Invalid delegation: Invalid signature: %s signature of delegation %d could not be verified", key.scheme, i)
			}
			if d.Expiration < times.ledger && d.Expiration < times.wall {
				return badRequest("Invalid delegation expiry: delegation %d expired at %s (now %s)", i, fmtICTime(d.Expiration), fmtICTime(times.ledger))
			}
			if seen[string(d.PubKey)] {
				return badRequest("Invalid delegation: the chain repeats a public key (delegation %d)", i)
			}
			seen[string(d.PubKey)] = true
			if generic["targets"] != nil {
				if len(d.Targets) > maxDelegationTargets {
					return badRequest("Invalid delegation: delegation %d has %d targets, at most %d are allowed", i, len(d.Targets), maxDelegationTargets)
				}
				r.targets = append(r.targets, d.Targets)
			}
			if key, err = parseSenderKey(d.PubKey); err != nil {
				return badRequest("Invalid delegation: delegation %d: %v", i, err)
			}
		}
	}
	if !key.verify(append(append([]byte(nil), sepRequest...), r.id[:]...), env.SenderSig) {
		return badRequest("Invalid signature: %s signature of request %x could not be verified", key.scheme, r.id)
	}
	return nil
}

// targetsAllow reports whether every delegation's target list (when it has
// one) names the canister.
func (r *request) targetsAllow(cid principal.Principal) bool {
	for _, ts := range r.targets {
		ok := false
		for _, t := range ts {
			if bytes.Equal(t, cid.Raw) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
