package toollayer

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/identity"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/matcher"
	"github.com/reconciled/reconciled/queue"
)

// User is one identity of the tool layer with its own agent.
type User struct {
	id    *identity.Ed25519Identity
	agent *agent.Agent
}

// NewUser derives an ed25519 identity from seed (deterministic) and an
// agent for it on srv.
func NewUser(srv *ledgertest.Server, seed byte) (*User, error) {
	s := make([]byte, ed25519.SeedSize)
	s[0], s[1] = seed, 'T'
	sk := ed25519.NewKeyFromSeed(s)
	id, err := identity.NewEd25519Identity(sk.Public().(ed25519.PublicKey), sk)
	if err != nil {
		return nil, err
	}
	ag, err := srv.NewAgent(id)
	if err != nil {
		return nil, err
	}
	return &User{id: id, agent: ag}, nil
}

func (u *User) Principal() principal.Principal { return u.id.Sender() }

// Call runs an update call and reports whether the reply came back; a lost
// reply (any error) is the unknown outcome the daemon settles.
func (u *User) Call(ledger principal.Principal, method string, arg any, res any) (replied bool) {
	return u.agent.Call(ledger, method, []any{arg}, []any{res}) == nil
}

// Intent builds an intent body (docs/design.md#intent).
type Intent struct {
	ID       string         `json:"intent_id"`
	Canister string         `json:"canister_id"`
	Method   string         `json:"method"`
	Caller   string         `json:"caller"`
	Args     map[string]any `json:"args"`
	After    string         `json:"after"`
}

func (d Intent) JSON() []byte {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // only strings and maps of strings
	}
	return b
}

func optHex(b *[]byte) any {
	if b == nil {
		return nil
	}
	return hex.EncodeToString(*b)
}

func optU64(v *uint64) any {
	if v == nil {
		return nil
	}
	return strconv.FormatUint(*v, 10)
}

func acctText(c icrc3.CandidAccount) string {
	a := icrc3.Account{Owner: c.Owner}
	if c.Subaccount != nil {
		a.Subaccount = *c.Subaccount
	}
	return a.String()
}

// Transfer, Approve and TransferFrom are the intents of the three
// payment methods, their args as the call sent them.
func Transfer(id string, ledger, caller principal.Principal, a icrc1.TransferArg) Intent {
	return Intent{ID: id, Canister: ledger.Encode(), Method: "icrc1_transfer", Caller: caller.Encode(), After: "Err.TooOld",
		Args: map[string]any{"from_subaccount": optHex(a.FromSubaccount), "to": acctText(a.To),
			"amount": a.Amount.BigInt().String(), "fee": nil, "memo": optHex(a.Memo), "created_at_time": optU64(a.CreatedAtTime)}}
}

func Approve(id string, ledger, caller principal.Principal, a icrc1.ApproveArgs) Intent {
	return Intent{ID: id, Canister: ledger.Encode(), Method: "icrc2_approve", Caller: caller.Encode(), After: "unknown",
		Args: map[string]any{"from_subaccount": optHex(a.FromSubaccount), "spender": acctText(a.Spender),
			"amount": a.Amount.BigInt().String(), "expected_allowance": nil, "expires_at": optU64(a.ExpiresAt),
			"fee": nil, "memo": optHex(a.Memo), "created_at_time": optU64(a.CreatedAtTime)}}
}

func TransferFrom(id string, ledger, caller principal.Principal, a icrc1.TransferFromArgs) Intent {
	return Intent{ID: id, Canister: ledger.Encode(), Method: "icrc2_transfer_from", Caller: caller.Encode(), After: "unknown",
		Args: map[string]any{"spender_subaccount": optHex(a.SpenderSubaccount), "from": acctText(a.From), "to": acctText(a.To),
			"amount": a.Amount.BigInt().String(), "fee": nil, "memo": optHex(a.Memo), "created_at_time": optU64(a.CreatedAtTime)}}
}

// PublishAndWait publishes an intent and returns the first verdict that
// satisfies until. The verdict stream keeps every verdict, and the watch
// starts from the intent's latest one, so a verdict published before the
// watch starts is not missed.
func PublishAndWait(ctx context.Context, c *queue.Conn, canister, id string, body []byte, until func(reconciled.Verdict) bool) (reconciled.Verdict, error) {
	if _, err := c.PublishIntent(ctx, canister, id, body, matcher.IntentHash(body)); err != nil {
		return reconciled.Verdict{}, err
	}
	// A verdict of another body under this id never answers this one.
	own := matcher.IntentHash(body)
	return WaitVerdict(ctx, c, id, func(v reconciled.Verdict) bool { return v.IntentHash == own && until(v) })
}

// WaitVerdict waits for a verdict of id that satisfies until.
func WaitVerdict(ctx context.Context, c *queue.Conn, id string, until func(reconciled.Verdict) bool) (reconciled.Verdict, error) {
	var got reconciled.Verdict
	err := c.WatchIntent(ctx, id, func(v reconciled.Verdict) error {
		if until(v) {
			got = v
			return queue.ErrStop
		}
		return nil
	})
	if err != nil {
		return got, fmt.Errorf("waiting for a verdict of %s: %w", id, err)
	}
	return got, nil
}

// AnyVerdict accepts the first verdict; FinalVerdict only a final one.
func AnyVerdict(reconciled.Verdict) bool     { return true }
func FinalVerdict(v reconciled.Verdict) bool { return v.Final }
