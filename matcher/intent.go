package matcher

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc3"

	"github.com/reconciled/reconciled"
)

// Method is the ledger method the intent called.
type Method string

const (
	MethodTransfer     Method = "icrc1_transfer"
	MethodTransferFrom Method = "icrc2_transfer_from"
	MethodApprove      Method = "icrc2_approve"
)

// MaxIntentBytes bounds an intent body; nothing legitimate comes close.
const MaxIntentBytes = 64 << 10

// MaxMemoBytes bounds args.memo. Ledgers choose their own limit (the DFINITY
// ledger defaults to 32 bytes and lets it be raised, and deployed ledgers have
// raised it), so a tighter bound here would refuse intents a ledger accepts.
// A memo over the ledger's limit traps before any block is written, so such an
// intent simply never matches: it ends `absent`, which is the truth.
const MaxMemoBytes = 256

// Intent is a parsed, validated intent (docs/design.md#intent).
type Intent struct {
	ID       string
	Canister principal.Principal
	Method   Method
	Caller   principal.Principal
	Args     Args
	// After is what the tool layer saw last; informational only.
	After string
	// IngressExpiry is the sent envelope's expiry (ns), nil when not given.
	// It must be the latest expiry of every envelope sent with these
	// bytes; CheckRules refuses one before the window's start.
	IngressExpiry *uint64
	// ArgHex is the Candid the tool layer sent, nil when not given. When
	// present it has been checked to agree with Args.
	ArgHex []byte

	// sent holds the accounts of ArgHex as encoded (an explicit all-zero
	// subaccount kept), which their text form in Args cannot spell; nil
	// without ArgHex. Match then compares as the ledger deduplicates.
	sent *sentAccounts
}

// sentAccounts are the Account arguments of arg_hex as encoded; an
// argument the method does not have is nil.
type sentAccounts struct {
	from, to, spender *icrc3.Account
}

// Args is the method's Candid record. Which fields are meaningful depends on
// Method; the others are nil/zero. Optional values are nil when the intent
// left them empty, and subaccounts keep their sent form (nil, or 32 bytes
// that may be all zero) because the ledger records them as sent.
type Args struct {
	FromSubaccount    []byte         // transfer, approve
	SpenderSubaccount []byte         // transfer_from
	From              *icrc3.Account // transfer_from
	To                *icrc3.Account // transfer, transfer_from
	Spender           *icrc3.Account // approve
	Amount            icrc3.Nat
	Fee               *icrc3.Nat
	Memo              []byte     // meaningful only when HasMemo
	HasMemo           bool       // an absent memo differs from an empty one
	CreatedAt         uint64     // created_at_time: the stamp; always set
	ExpectedAllowance *icrc3.Nat // approve
	ExpiresAt         *uint64    // approve
}

// Stamp returns created_at_time.
func (in *Intent) Stamp() uint64 { return in.Args.CreatedAt }

// CallerAccount is the account the caller acted from: (caller,
// from_subaccount) for transfer and approve, (caller, spender_subaccount) for
// transfer_from.
func (in *Intent) CallerAccount() icrc3.Account {
	if in.Method == MethodTransferFrom {
		return icrc3.Account{Owner: in.Caller, Subaccount: in.Args.SpenderSubaccount}
	}
	return icrc3.Account{Owner: in.Caller, Subaccount: in.Args.FromSubaccount}
}

// Debited is the account the tokens (or, for approve, the allowance) come
// from: the caller account, except for transfer_from where it is args.from.
func (in *Intent) Debited() icrc3.Account {
	if in.Method == MethodTransferFrom {
		return *in.Args.From
	}
	return in.CallerAccount()
}

var topFields = map[string]bool{
	"intent_id": true, "canister_id": true, "method": true, "caller": true,
	"args": true, "after": true, "ingress_expiry": true, "arg_hex": true,
}

// argFields lists each method's record fields in the standard's order, which
// is also their order in Canonical.
var argFields = map[Method][]string{
	MethodTransfer:     {"from_subaccount", "to", "amount", "fee", "memo", "created_at_time"},
	MethodTransferFrom: {"spender_subaccount", "from", "to", "amount", "fee", "memo", "created_at_time"},
	MethodApprove:      {"from_subaccount", "spender", "amount", "expected_allowance", "expires_at", "fee", "memo", "created_at_time"},
}

// ParseIntent reads an intent strictly. Every refusal is an *Error.
func ParseIntent(data []byte) (*Intent, error) {
	in, e := parseIntent(data)
	if e != nil {
		return nil, e
	}
	return in, nil
}

func parseIntent(data []byte) (*Intent, *Error) {
	if len(data) > MaxIntentBytes {
		return nil, refuse(CodeTooLarge, "", "body is %d bytes, at most %d", len(data), MaxIntentBytes)
	}
	root, err := parseJSON(data)
	if err != nil {
		var dup *dupKeyError
		if errors.As(err, &dup) {
			return nil, refuse(CodeBadJSON, dup.path, "duplicate key")
		}
		return nil, refuse(CodeBadJSON, "", "%v", err)
	}
	if root.kind != jsonObject {
		return nil, refuse(CodeBadJSON, "", "intent is %s, want an object", root.kind)
	}
	for _, k := range root.keys {
		if !topFields[k] {
			return nil, refuse(CodeUnknownField, k, "unknown field")
		}
	}
	in := &Intent{}
	var e *Error

	if in.ID, e = requiredString(root, "intent_id", CodeBadIntentID); e != nil {
		return nil, e
	}
	if !reconciled.ValidIntentID(in.ID) {
		return nil, refuse(CodeBadIntentID, "intent_id", "want [A-Za-z0-9_-]{1,128}")
	}

	s, e := requiredString(root, "canister_id", CodeBadCanister)
	if e != nil {
		return nil, e
	}
	if in.Canister, err = icrc3.ParsePrincipal(s); err != nil {
		return nil, refuse(CodeBadCanister, "canister_id", "%v", err)
	}

	s, e = requiredString(root, "method", CodeBadMethod)
	if e != nil {
		return nil, e
	}
	in.Method = Method(s)
	fields, ok := argFields[in.Method]
	if !ok {
		return nil, refuse(CodeBadMethod, "method", "%q is not icrc1_transfer, icrc2_transfer_from or icrc2_approve", s)
	}

	if s, e = requiredString(root, "caller", CodeBadCaller); e != nil {
		return nil, e
	}
	if in.Caller, err = icrc3.ParsePrincipal(s); err != nil {
		return nil, refuse(CodeBadCaller, "caller", "%v", err)
	}

	args, present := root.obj["args"]
	if !present || args.kind != jsonObject {
		kind := "absent"
		if present {
			kind = args.kind.String()
		}
		return nil, refuse(CodeBadArgs, "args", "args is %s, want an object", kind)
	}
	if e = parseArgs(in.Method, fields, args, &in.Args); e != nil {
		return nil, e
	}

	if v, ok := root.obj["after"]; ok && v.kind != jsonNull {
		if v.kind != jsonString {
			return nil, refuse(CodeBadAfter, "after", "after is %s, want a string", v.kind)
		}
		in.After = v.str
	}
	if in.IngressExpiry, e = optionalNat64(root, "ingress_expiry", "ingress_expiry", CodeBadExpiry); e != nil {
		return nil, e
	}
	if in.IngressExpiry != nil && *in.IngressExpiry == 0 {
		// An unset expiry serialised as zero: as the window's end it would
		// close the window before it opened.
		return nil, refuse(CodeBadExpiry, "ingress_expiry", "ingress_expiry 0 is no envelope's expiry; leave the field out when it is unknown")
	}
	if v, ok := root.obj["arg_hex"]; ok && v.kind != jsonNull {
		if v.kind != jsonString {
			return nil, refuse(CodeBadArgHex, "arg_hex", "arg_hex is %s, want a hex string", v.kind)
		}
		b, err := decodeHex(v.str)
		if err != nil {
			return nil, refuse(CodeBadArgHex, "arg_hex", "%v", err)
		}
		if in.sent, e = checkArgHex(in.Method, b, &in.Args); e != nil {
			return nil, e
		}
		in.ArgHex = b
	}
	return in, nil
}

func parseArgs(m Method, fields []string, obj *jsonValue, a *Args) *Error {
	known := make(map[string]bool, len(fields))
	for _, f := range fields {
		known[f] = true
	}
	for _, k := range obj.keys {
		if !known[k] {
			return refuse(CodeUnknownField, "args."+k, "not a field of %s's argument", m)
		}
	}
	var e *Error
	for _, f := range fields {
		path := "args." + f
		switch f {
		case "from_subaccount":
			a.FromSubaccount, e = optionalSubaccount(obj, f, path)
		case "spender_subaccount":
			a.SpenderSubaccount, e = optionalSubaccount(obj, f, path)
		case "from":
			a.From, e = requiredAccount(obj, f, path)
		case "to":
			a.To, e = requiredAccount(obj, f, path)
		case "spender":
			a.Spender, e = requiredAccount(obj, f, path)
		case "amount":
			var n *icrc3.Nat
			if n, e = optionalNat(obj, f, path, CodeBadAmount); e == nil {
				if n == nil {
					e = refuse(CodeBadAmount, path, "amount is required")
				} else {
					a.Amount = *n
				}
			}
		case "fee":
			a.Fee, e = optionalNat(obj, f, path, CodeBadFee)
		case "expected_allowance":
			a.ExpectedAllowance, e = optionalNat(obj, f, path, CodeBadAllowance)
		case "expires_at":
			a.ExpiresAt, e = optionalNat64(obj, f, path, CodeBadExpiresAt)
		case "memo":
			a.Memo, a.HasMemo, e = optionalMemo(obj, f, path)
		case "created_at_time":
			var ts *uint64
			if ts, e = optionalNat64(obj, f, path, CodeBadStamp); e == nil {
				if ts == nil {
					e = refuse(CodeNoStamp, path, "created_at_time is required: without it nothing can be matched")
				} else if *ts > MaxStamp {
					e = refuse(CodeBadStamp, path, "created_at_time is after the year 2260: no ledger time can reach it")
				} else {
					a.CreatedAt = *ts
				}
			}
		}
		if e != nil {
			return e
		}
	}
	return nil
}

func requiredString(obj *jsonValue, key, code string) (string, *Error) {
	v, ok := obj.obj[key]
	if !ok || v.kind == jsonNull {
		return "", refuse(code, key, "%s is required", key)
	}
	if v.kind != jsonString {
		return "", refuse(code, key, "%s is %s, want a string", key, v.kind)
	}
	return v.str, nil
}

// optionalString returns the string at key, or ok=false when the key is
// absent or null. Numbers are refused: a JSON number loses precision above
// 2^53 in most readers, so a sender using one may not have sent what it meant.
func optionalString(obj *jsonValue, key, path, code string) (s string, ok bool, e *Error) {
	v, present := obj.obj[key]
	if !present || v.kind == jsonNull {
		return "", false, nil
	}
	if v.kind != jsonString {
		return "", false, refuse(code, path, "%s is %s, want a string", path, v.kind)
	}
	return v.str, true, nil
}

func optionalNat(obj *jsonValue, key, path, code string) (*icrc3.Nat, *Error) {
	s, ok, e := optionalString(obj, key, path, code)
	if e != nil || !ok {
		return nil, e
	}
	n, err := icrc3.ParseNat(s)
	if err != nil {
		return nil, refuse(code, path, "%v", err)
	}
	return &n, nil
}

func optionalNat64(obj *jsonValue, key, path, code string) (*uint64, *Error) {
	n, e := optionalNat(obj, key, path, code)
	if e != nil || n == nil {
		return nil, e
	}
	v, ok := n.Uint64()
	if !ok {
		return nil, refuse(code, path, "%s does not fit in nat64", n)
	}
	return &v, nil
}

func requiredAccount(obj *jsonValue, key, path string) (*icrc3.Account, *Error) {
	s, ok, e := optionalString(obj, key, path, CodeBadAccount)
	if e != nil {
		return nil, e
	}
	if !ok {
		return nil, refuse(CodeBadAccount, path, "%s is required", path)
	}
	acc, err := icrc3.ParseAccount(s)
	if err != nil {
		return nil, refuse(CodeBadAccount, path, "%v", err)
	}
	return &acc, nil
}

func optionalSubaccount(obj *jsonValue, key, path string) ([]byte, *Error) {
	s, ok, e := optionalString(obj, key, path, CodeBadSubaccount)
	if e != nil || !ok {
		return nil, e
	}
	b, err := decodeHex(s)
	if err != nil {
		return nil, refuse(CodeBadSubaccount, path, "%v", err)
	}
	if len(b) != 32 {
		return nil, refuse(CodeBadSubaccount, path, "subaccount is %d bytes, want 32", len(b))
	}
	return b, nil
}

func optionalMemo(obj *jsonValue, key, path string) ([]byte, bool, *Error) {
	s, ok, e := optionalString(obj, key, path, CodeBadMemo)
	if e != nil || !ok {
		return nil, false, e
	}
	b, err := decodeHex(s)
	if err != nil {
		return nil, false, refuse(CodeBadMemo, path, "%v", err)
	}
	if len(b) > MaxMemoBytes {
		return nil, false, refuse(CodeBadMemo, path, "memo is %d bytes, at most %d", len(b), MaxMemoBytes)
	}
	return b, true, nil
}

// decodeHex accepts lower-case hex only, so each blob has one spelling.
func decodeHex(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, fmt.Errorf("not lower-case hex: %q at %d", c, i)
		}
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not hex: %w", err)
	}
	return b, nil
}

// IntentHash is the intent_hash of a body as published: the lower-case hex
// canonical hash (Intent.Hash, which leaves out `after`) of a body that
// parses, else the SHA-256 of the bytes exactly as received. Every verdict
// carries it, and intents are deduplicated on it.
func IntentHash(body []byte) string {
	if in, err := ParseIntent(body); err == nil {
		return in.HashHex()
	}
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}
