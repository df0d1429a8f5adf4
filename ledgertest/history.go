package ledgertest

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc3"
)

// History generation runs every block through execute, the code path of
// real calls, so generated chains obey the same rules (balances,
// allowances, dedup, fee placement, archiving). Only the inputs are
// precomputed: a pool of interned accounts and memos, so a million blocks
// build without per-block allocation beyond the chain itself.

const (
	histOwners  = 48
	histMemos   = 64
	histFunding = 1_000_000_000_000 // minted to an account that runs low
)

type histAccount struct {
	a  icrc3.Account
	id uint32
}

// GenerateHistory appends n deterministic mixed blocks (transfers, approves,
// transfer_froms, mints and burns, with and without memo, fee,
// created_at_time and subaccounts) whose timestamps are spread
// non-decreasingly over [now-span, now], archiving as configured.
func (l *Ledger) GenerateHistory(n int, seed int64, span time.Duration) error {
	if n < 0 {
		return fmt.Errorf("ledgertest: generate history: negative block count %d", n)
	}
	if n == 0 {
		return nil
	}
	now := l.h.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bulk = true
	defer func() {
		l.bulk = false
		l.certify()
	}()

	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	accts := l.historyAccounts(seed)
	memos := make([][]byte, histMemos)
	for i := range memos {
		memos[i] = make([]byte, 1+i%min(l.cfg.MaxMemoLength, 32))
		for j := range memos[i] {
			memos[i][j] = byte(rng.Uint32())
		}
	}
	minting := l.mintingID

	var startTS uint64
	if uint64(span) < now {
		startTS = now - uint64(span)
	}
	if k := len(l.chain); k > 0 && l.chain[k-1].ts > startTS {
		startTS = l.chain[k-1].ts
	}
	if startTS > now {
		return fmt.Errorf("ledgertest: generate history: last block time %d is after now %d", startTS, now)
	}
	width := now - startTS

	pick := func() histAccount { return accts[rng.IntN(len(accts))] }
	var r txReq
	for i := 0; i < n; i++ {
		ts := startTS
		if n > 1 {
			// Evenly spread, computed without overflow for long spans.
			ts = startTS + uint64(float64(width)*float64(i)/float64(n-1))
		}
		for attempt := 0; ; attempt++ {
			r = txReq{}
			roll := rng.IntN(100)
			if attempt > 2 {
				roll = 0 // a mint to a non-minting account always applies
			}
			switch {
			case roll < 10: // mint
				to := pick()
				r = txReq{kind: kindTransfer, fromID: minting, from: l.minting, toID: to.id, to: to.a,
					amt: icrc3.NatFromUint64(histFunding + rng.Uint64N(histFunding))}
			case roll < 18: // burn
				from := pick()
				r = txReq{kind: kindTransfer, fromID: from.id, from: from.a, toID: minting, to: l.minting,
					amt: natAdd(l.fee, icrc3.NatFromUint64(rng.Uint64N(1_000_000)))}
			case roll < 28: // approve
				from, sp := pick(), pick()
				if string(from.a.Owner.Raw) == string(sp.a.Owner.Raw) {
					continue
				}
				r = txReq{kind: kindApprove, fromID: from.id, from: from.a, spID: sp.id, spender: sp.a,
					amt: icrc3.NatFromUint64(rng.Uint64N(histFunding))}
				if rng.IntN(8) == 0 {
					r.expiresAt, r.hasExpiresAt = ts+uint64(time.Hour), true
				}
			case roll < 40: // transfer_from
				from, sp, to := pick(), pick(), pick()
				r = txReq{kind: kindTransferFrom, fromID: from.id, from: from.a, spID: sp.id, spender: sp.a,
					toID: to.id, to: to.a, amt: icrc3.NatFromUint64(rng.Uint64N(1_000_000))}
			default: // transfer
				from, to := pick(), pick()
				r = txReq{kind: kindTransfer, fromID: from.id, from: from.a, toID: to.id, to: to.a,
					amt: icrc3.NatFromUint64(rng.Uint64N(10_000_000))}
			}
			if rng.IntN(3) == 0 {
				r.memo, r.hasMemo = memos[rng.IntN(len(memos))], true
			}
			if rng.IntN(2) == 0 {
				back := min(rng.Uint64N(uint64(30*time.Second)), ts)
				r.createdAt, r.hasCreatedAt = ts-back, true
			}
			isMintOrBurn := r.kind == kindTransfer && (r.fromID == minting || r.toID == minting)
			if rng.IntN(4) == 0 {
				r.hasFee = true
				if !isMintOrBurn {
					r.fee = l.fee
				}
			}
			_, lerr, trap := l.execute(&r, ts)
			if trap != nil {
				return fmt.Errorf("ledgertest: generate history: block %d: %w", len(l.chain), trap)
			}
			if lerr == nil {
				break
			}
			if lerr.kind == eInsufficientFunds || lerr.kind == eInsufficientAllowance {
				// Fund the account that lacked tokens or allowance so the mix
				// keeps exercising transfers rather than mints.
				if err := l.histFund(&r, ts, accts, rng); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// histFund appends the block that makes a failed request possible next
// time: a mint to its source, or an approve for its spender.
func (l *Ledger) histFund(r *txReq, ts uint64, accts []histAccount, rng *rand.Rand) error {
	var f txReq
	if r.kind == kindTransferFrom && l.accts.get(r.spID).norm != l.accts.get(r.fromID).norm {
		f = txReq{kind: kindApprove, fromID: r.fromID, from: r.from, spID: r.spID, spender: r.spender,
			amt: icrc3.NatFromUint64(histFunding)}
		if _, lerr, _ := l.execute(&f, ts); lerr == nil {
			return nil
		}
	}
	f = txReq{kind: kindTransfer, fromID: l.mintingID, from: l.minting, toID: r.fromID, to: r.from,
		amt: icrc3.NatFromUint64(histFunding + rng.Uint64N(histFunding))}
	if _, lerr, trap := l.execute(&f, ts); lerr != nil || trap != nil {
		return fmt.Errorf("ledgertest: generate history: funding mint at block %d failed: %v%v", len(l.chain), lerr, trap)
	}
	return nil
}

// historyAccounts interns a deterministic pool: each owner with no
// subaccount, with an explicit all-zero subaccount (the same ICRC-1 account,
// recorded differently) and with a random subaccount.
func (l *Ledger) historyAccounts(seed int64) []histAccount {
	var out []histAccount
	var zero [32]byte
	for i := 0; i < histOwners; i++ {
		var in [16]byte
		binary.LittleEndian.PutUint64(in[:8], uint64(seed))
		binary.LittleEndian.PutUint64(in[8:], uint64(i))
		sum := sha256.Sum224(in[:])
		owner := principal.Principal{Raw: append(sum[:28:28], 0x02)}
		sub := sha256.Sum256(in[:])
		for _, a := range []icrc3.Account{
			{Owner: owner},
			{Owner: owner, Subaccount: zero[:]},
			{Owner: owner, Subaccount: sub[:]},
		} {
			if a.Equal(l.minting) {
				continue
			}
			out = append(out, histAccount{a: a, id: l.accts.intern(a)})
		}
	}
	return out
}
