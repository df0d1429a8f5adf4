// Command payer makes one icrc1_transfer on a local test replica with agent-go
// and prints, as one JSON line, the arguments and the exact Candid bytes it
// sent: the client's tests build a tool layer's preview from them.
//
//	payer principal -seed N
//	payer transfer -url URL -canister ID -seed N -to ACCOUNT -amount N -created-at-time NS [-memo HEX] [-from-subaccount HEX]
package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/candid"
	"github.com/aviate-labs/agent-go/identity"

	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "payer:", err)
		os.Exit(1)
	}
}

// identityOf derives a deterministic ed25519 identity: tests fund its
// principal on the test ledger before it pays.
func identityOf(seed uint) (*identity.Ed25519Identity, error) {
	s := make([]byte, ed25519.SeedSize)
	s[0], s[1] = byte(seed), 'P'
	sk := ed25519.NewKeyFromSeed(s)
	return identity.NewEd25519Identity(sk.Public().(ed25519.PublicKey), sk)
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("want a command: principal or transfer")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	seed := fs.Uint("seed", 1, "identity seed")
	rawURL := fs.String("url", "", "test replica URL")
	canister := fs.String("canister", "", "ledger canister id")
	to := fs.String("to", "", "recipient account (ICRC-1 text)")
	amount := fs.String("amount", "", "amount (decimal)")
	memo := fs.String("memo", "", "memo (hex); empty: none")
	fromSub := fs.String("from-subaccount", "", "from_subaccount (hex); empty: none")
	stamp := fs.Uint64("created-at-time", 0, "created_at_time (ns)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	id, err := identityOf(*seed)
	if err != nil {
		return err
	}
	switch args[0] {
	case "principal":
		return json.NewEncoder(os.Stdout).Encode(map[string]string{"principal": id.Sender().Encode()})
	case "transfer":
	default:
		return fmt.Errorf("unknown command %q", args[0])
	}

	ledger, err := icrc3.ParsePrincipal(*canister)
	if err != nil {
		return err
	}
	toAcct, err := icrc3.ParseAccount(*to)
	if err != nil {
		return err
	}
	amt, err := icrc3.ParseNat(*amount)
	if err != nil {
		return err
	}
	arg := icrc1.TransferArg{To: toAcct.ToCandid(), Amount: icrc1.IDLNat(amt), CreatedAtTime: stamp}
	if *memo != "" {
		b, err := hex.DecodeString(*memo)
		if err != nil {
			return fmt.Errorf("memo: %w", err)
		}
		arg.Memo = &b
	}
	if *fromSub != "" {
		b, err := hex.DecodeString(*fromSub)
		if err != nil {
			return fmt.Errorf("from-subaccount: %w", err)
		}
		arg.FromSubaccount = &b
	}
	raw, err := candid.Marshal([]any{arg})
	if err != nil {
		return fmt.Errorf("encode argument: %w", err)
	}
	u, err := url.Parse(*rawURL)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	ag, err := agent.New(agent.Config{Identity: id, FetchRootKey: true, PollDelay: 10 * time.Millisecond,
		ClientConfig: []agent.ClientOption{agent.WithHostURL(u), agent.WithHttpClient(ledgertest.LoopbackHTTPClient())}})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	reply, err := ag.CallRaw(ledger, "icrc1_transfer", raw)
	if err != nil {
		return fmt.Errorf("icrc1_transfer: %w", err)
	}
	var res icrc1.TransferResult
	if err := candid.Unmarshal(reply, []any{&res}); err != nil {
		return fmt.Errorf("decode reply: %w", err)
	}
	if res.Ok == nil {
		return fmt.Errorf("icrc1_transfer refused: %+v", res.Err)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]string{
		"caller":  id.Sender().Encode(),
		"block":   res.Ok.BigInt().String(),
		"arg_hex": hex.EncodeToString(raw),
	})
}
