package icrc1

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aviate-labs/agent-go/candid"

	"github.com/reconciled/reconciled/icagent"
	"github.com/reconciled/reconciled/icrc3"
)

// NoArgs is the Candid encoding of an empty argument list.
var NoArgs = []byte("DIDL\x00\x00")

// UnmarshalReply decodes a one-value Candid reply into out with agent-go's
// decoder, after icrc3.ScreenCandid has refused what would make that
// decoder allocate without bound, and turning its panics into errors: a
// reply is one node's bytes.
func UnmarshalReply(raw []byte, out any) (err error) {
	if err := icrc3.ScreenCandid(raw); err != nil {
		return fmt.Errorf("candid reply refused before decoding: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("candid decoder panicked: %v", p)
		}
	}()
	return candid.Unmarshal(raw, []any{out})
}

const mintingMethod = "icrc1_minting_account"

// MintingAccount reads the ledger's icrc1_minting_account: as a replicated
// call whose reply certificate conn verifies (certified), else as a signed
// query, whose answer is one node's word (certified false). Only the
// certified state settles the answer, its absence included: a ledger
// whose certified reject says it does not serve the method has none (the
// caller treats that cautiously), while a call's non-replicated rejection,
// a query's reject or a lost call settle nothing. Both ledger families
// serve it: the ICP ledger is an ICRC-1 ledger too.
func MintingAccount(ctx context.Context, conn *icagent.Conn) (acc *icrc3.Account, certified bool, err error) {
	if acc, err := certifiedMinting(ctx, conn); err == nil || ctx.Err() != nil {
		return acc, err == nil, err
	}
	acc, err = queriedMinting(ctx, conn)
	return acc, false, err
}

// certifiedMinting reads the minting account by a replicated call; an
// error means the subnet said nothing certain.
func certifiedMinting(ctx context.Context, conn *icagent.Conn) (*icrc3.Account, error) {
	raw, err := conn.Call(ctx, mintingMethod, NoArgs)
	switch {
	case err != nil && icagent.Certified(err) && icagent.MethodMissing(err):
		// No minting account is the cautious reading: the engine never
		// lets a mint or burn with the intent's stamp end absent.
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("icrc3: detect %s: %w", mintingMethod, err)
	}
	return decodeMinting(conn, raw)
}

// queriedMinting reads the minting account by a signed query: one node's
// word, and a reject saying the method is missing is only that node's.
func queriedMinting(ctx context.Context, conn *icagent.Conn) (*icrc3.Account, error) {
	raw, err := conn.Query(ctx, conn.Ledger(), mintingMethod, NoArgs, true)
	switch {
	case err != nil && icagent.MethodMissing(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("icrc3: detect %s: %w", mintingMethod, err)
	}
	return decodeMinting(conn, raw)
}

func decodeMinting(conn *icagent.Conn, raw []byte) (*icrc3.Account, error) {
	var ca *icrc3.CandidAccount
	if err := UnmarshalReply(raw, &ca); err != nil {
		return nil, &icrc3.Error{Kind: icrc3.KindDecode, Canister: conn.Ledger(), Method: mintingMethod, Err: err}
	}
	if ca == nil {
		return nil, nil
	}
	a, err := ca.Account()
	if err != nil {
		return nil, &icrc3.Error{Kind: icrc3.KindDecode, Canister: conn.Ledger(), Method: mintingMethod, Err: err}
	}
	return &a, nil
}

// DefaultMintingWait is how long Minting.Get waits for the certified call
// by default: a replicated call answers in seconds (a synchronous call
// endpoint waits about 10 s before it answers 202).
const DefaultMintingWait = 10 * time.Second

// Minting is a ledger's minting account as the daemon knows it: kept
// once certified, and until then read again on every Get. The certified
// call is one at a time, shared by concurrent callers and never waited
// for under a lock; a caller waits for it at most Wait, and then (or when
// it fails) takes the node's signed query answer as uncertain, for this
// call only, while the call goes on and settles the account if it
// succeeds: a call lost before induction runs to its ingress expiry, and
// no decision should wait that long. The zero value is ready for use.
type Minting struct {
	// Wait bounds the wait for the certified call (0: DefaultMintingWait).
	Wait time.Duration

	mu      sync.Mutex
	settled *icrc3.Account
	ok      bool
	call    icagent.Shared[mintingRead]
}

// mintingRead is one certified call's answer and when the call began.
type mintingRead struct {
	acc   *icrc3.Account
	began time.Time
}

// Get returns the certified minting account, or reads it through conn,
// as long as ctx allows. certified false is one node's word. A caller
// that joined a call begun before it came and failed asks once more: a
// failure shared from before is no answer about the subnet now.
func (m *Minting) Get(ctx context.Context, conn *icagent.Conn) (acc *icrc3.Account, certified bool, err error) {
	m.mu.Lock()
	acc, ok := m.settled, m.ok
	m.mu.Unlock()
	if ok {
		return acc, true, nil
	}
	wait := m.Wait
	if wait <= 0 {
		wait = DefaultMintingWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	read := func(ctx context.Context) (mintingRead, error) {
		began := time.Now()
		acc, err := certifiedMinting(ctx, conn)
		if err == nil {
			m.mu.Lock()
			m.settled, m.ok = acc, true
			m.mu.Unlock()
		}
		return mintingRead{acc, began}, err
	}
	came := time.Now()
	r, err := m.call.Do(wctx, read)
	if err != nil && wctx.Err() == nil && r.began.Before(came) {
		// The call that failed began before this caller came: its
		// failure (a fault since lifted, a reply lost) says nothing of
		// the subnet now. Ask once more, within the same wait.
		r, err = m.call.Do(wctx, read)
	}
	acc = r.acc
	cancel()
	switch {
	case err == nil:
		return acc, true, nil
	case ctx.Err() != nil:
		return nil, false, icagent.Classify(ctx.Err(), conn.Ledger(), mintingMethod)
	}
	// The call failed, or is still in flight past the wait.
	acc, err = queriedMinting(ctx, conn)
	return acc, false, err
}
