package icrc1

import (
	"context"
	"fmt"
	"sync"

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

// MintingAccount reads the ledger's icrc1_minting_account: as a replicated
// call whose reply certificate conn verifies (certified), else as a signed
// query, whose answer is one node's word (certified false). Only the
// certified state settles the answer, its absence included: a ledger
// whose certified reject says it does not serve the method has none (the
// caller treats that cautiously), while a call's non-replicated rejection,
// a query's reject or a lost call settle nothing. Both ledger families
// serve it: the ICP ledger is an ICRC-1 ledger too.
func MintingAccount(ctx context.Context, conn *icagent.Conn) (acc *icrc3.Account, certified bool, err error) {
	const method = "icrc1_minting_account"
	raw, err := conn.Call(ctx, method, NoArgs)
	certified = err == nil
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, false, fmt.Errorf("icrc3: detect %s: %w", method, err)
	case err != nil && icagent.Certified(err) && icagent.MethodMissing(err):
		// No minting account is the cautious reading: the engine never
		// lets a mint or burn with the intent's stamp end absent.
		return nil, true, nil
	case err != nil:
		if raw, err = conn.Query(ctx, conn.Ledger(), method, NoArgs, true); err != nil {
			if icagent.MethodMissing(err) {
				return nil, false, nil
			}
			return nil, false, fmt.Errorf("icrc3: detect %s: %w", method, err)
		}
	}
	var ca *icrc3.CandidAccount
	if err := UnmarshalReply(raw, &ca); err != nil {
		return nil, false, &icrc3.Error{Kind: icrc3.KindDecode, Canister: conn.Ledger(), Method: method, Err: err}
	}
	if ca == nil {
		return nil, certified, nil
	}
	a, err := ca.Account()
	if err != nil {
		return nil, false, &icrc3.Error{Kind: icrc3.KindDecode, Canister: conn.Ledger(), Method: method, Err: err}
	}
	return &a, certified, nil
}

// Minting is a ledger's minting account as the daemon knows it: kept
// once certified, and until then read again on every Get, by one read at
// a time whose result concurrent callers share. No lock is held while
// the read is in flight. The zero value is ready for use.
type Minting struct {
	mu      sync.Mutex
	settled *mintAnswer
	read    icagent.Shared[mintAnswer]
}

type mintAnswer struct {
	acc       *icrc3.Account
	certified bool
}

// Get returns the certified minting account, or reads it through conn
// (MintingAccount), waiting as long as ctx allows. An uncertain answer
// (certified false) serves this call only.
func (m *Minting) Get(ctx context.Context, conn *icagent.Conn) (acc *icrc3.Account, certified bool, err error) {
	m.mu.Lock()
	s := m.settled
	m.mu.Unlock()
	if s != nil {
		return s.acc, true, nil
	}
	a, err := m.read.Do(ctx, func(ctx context.Context) (mintAnswer, error) {
		acc, certified, err := MintingAccount(ctx, conn)
		if err != nil {
			return mintAnswer{}, err
		}
		a := mintAnswer{acc: acc, certified: certified}
		if certified {
			m.mu.Lock()
			m.settled = &a
			m.mu.Unlock()
		}
		return a, nil
	})
	if err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			err = icagent.Classify(err, conn.Ledger(), "icrc1_minting_account")
		}
		return nil, false, err
	}
	return a.acc, a.certified, nil
}
