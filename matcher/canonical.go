package matcher

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/reconciled/reconciled/icrc3"
)

// Canonical returns the intent as JSON with a fixed key order (top level as in
// docs/design.md#intent, args in the standard's field order), every optional key present
// (null when empty), accounts in canonical ICRC-1 text, blobs in lower-case
// hex and numbers as decimal strings. Two bodies that parse to the same
// intent have the same canonical bytes; ParseIntent(Canonical()) yields the
// same intent again.
func (in *Intent) Canonical() []byte { return in.canonical(true) }

func (in *Intent) canonical(withAfter bool) []byte {
	b := make([]byte, 0, 512)
	b = append(b, `{"intent_id":`...)
	b = appendString(b, in.ID)
	b = append(b, `,"canister_id":`...)
	b = appendString(b, in.Canister.Encode())
	b = append(b, `,"method":`...)
	b = appendString(b, string(in.Method))
	b = append(b, `,"caller":`...)
	b = appendString(b, in.Caller.Encode())
	b = append(b, `,"args":{`...)
	a := &in.Args
	for i, f := range argFields[in.Method] {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, f)
		b = append(b, ':')
		switch f {
		case "from_subaccount":
			b = appendHex(b, a.FromSubaccount, a.FromSubaccount != nil)
		case "spender_subaccount":
			b = appendHex(b, a.SpenderSubaccount, a.SpenderSubaccount != nil)
		case "from":
			b = appendString(b, a.From.String())
		case "to":
			b = appendString(b, a.To.String())
		case "spender":
			b = appendString(b, a.Spender.String())
		case "amount":
			b = appendNat(b, &a.Amount)
		case "fee":
			b = appendNat(b, a.Fee)
		case "expected_allowance":
			b = appendNat(b, a.ExpectedAllowance)
		case "expires_at":
			b = appendUint(b, a.ExpiresAt)
		case "memo":
			b = appendHex(b, a.Memo, a.HasMemo)
		case "created_at_time":
			b = appendUint(b, &a.CreatedAt)
		}
	}
	b = append(b, '}')
	if withAfter {
		b = append(b, `,"after":`...)
		b = appendString(b, in.After)
	}
	b = append(b, `,"ingress_expiry":`...)
	b = appendUint(b, in.IngressExpiry)
	b = append(b, `,"arg_hex":`...)
	b = appendHex(b, in.ArgHex, in.ArgHex != nil)
	return append(b, '}')
}

// Hash is the intent's identity: SHA-256 of the canonical form without
// `after`. The same intent_id with another hash is a different intent (a
// conflict). `after` only reports what the tool layer saw last; a tool layer
// that publishes an intent after a timeout and again after Err.TooOld is
// asking about the same payment, so that re-publication must not be refused.
func (in *Intent) Hash() [32]byte { return sha256.Sum256(in.HashedForm()) }

// HashedForm is what Hash hashes: Canonical without `after`.
func (in *Intent) HashedForm() []byte { return in.canonical(false) }

// HashHex is Hash in lower-case hex: the intent_hash of its verdicts.
func (in *Intent) HashHex() string {
	h := in.Hash()
	return hex.EncodeToString(h[:])
}

func appendString(b []byte, s string) []byte {
	// json.Marshal of a valid UTF-8 string cannot fail and is deterministic.
	q, _ := json.Marshal(s)
	return append(b, q...)
}

func appendHex(b, v []byte, present bool) []byte {
	if !present {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = hex.AppendEncode(b, v)
	return append(b, '"')
}

func appendNat(b []byte, n *icrc3.Nat) []byte {
	if n == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = append(b, n.String()...)
	return append(b, '"')
}

func appendUint(b []byte, v *uint64) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = strconv.AppendUint(b, *v, 10)
	return append(b, '"')
}
