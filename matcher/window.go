package matcher

import (
	"math"
	"time"

	"github.com/reconciled/reconciled/icrc3"
)

// Defaults for LedgerRules (docs/design.md#window): wider than the DFINITY ledger's
// 24 h / 60 s, which only costs blocks, never correctness.
// MaxStamp is the latest created_at_time an intent may carry. IC time is
// nanoseconds since 1970 in an int64 until the year 2262; a later stamp is
// no ledger time at all, and its window could not be stored or compared.
const MaxStamp = uint64(math.MaxInt64) - uint64(2*366*24*time.Hour)

const (
	DefaultTW    = 24 * time.Hour
	DefaultDrift = 2 * time.Minute
)

// FamilyTW and FamilyDrift are the DFINITY ICRC ledger's own transaction
// window and permitted drift (ckBTC, ckETH, SNS ledgers): a configured
// window narrower than these could close before the original executed.
const (
	FamilyTW    = 24 * time.Hour
	FamilyDrift = 60 * time.Second
)

// LedgerRules are the per-ledger facts matching depends on: the matcher's
// resolved input, not an operator's configuration. The engine derives them
// per decision from reconcile.LedgerConfig (Engine.rules), with
// MintingAccount resolved from the operator's override and the ledger's
// certified account.
type LedgerRules struct {
	// TW is the transaction window and Drift the permitted drift. Zero or
	// negative means the default: a window narrower than the ledger's could
	// close before the original executed and turn into a wrong `absent`.
	TW, Drift time.Duration
	// MintingAccount is the ledger's icrc1_minting_account; nil means the
	// ledger has none, so no intent is read as a mint or a burn. Never leave
	// it nil for want of asking: a mint or burn intent would then match
	// nothing and could end `absent`.
	MintingAccount *icrc3.Account
}

func (r LedgerRules) tw() uint64 {
	if r.TW <= 0 {
		return uint64(DefaultTW)
	}
	return uint64(r.TW)
}

func (r LedgerRules) drift() uint64 {
	if r.Drift <= 0 {
		return uint64(DefaultDrift)
	}
	return uint64(r.Drift)
}

// Window is the ledger-time range (ns, both ends inclusive) in which a block
// recording the intent can lie. From > To is an empty window.
type Window struct {
	From, To uint64
	// NarrowedBy names what pulled To below S+TW+D ("ingress_expiry"), or "".
	NarrowedBy string
}

// Window returns [S−D, S+TW+D] for stamp S, saturating at 0 and 2^64−1, with
// its end narrowed to ingress_expiry when that is earlier: an ingress message
// cannot execute after its expiry. An expiry before S−D narrows nothing (the
// window is never empty); CheckRules refuses such an intent.
func (in *Intent) Window(r LedgerRules) Window {
	s, d := in.Args.CreatedAt, r.drift()
	w := Window{From: satSub(s, d), To: satAdd(satAdd(s, r.tw()), d)}
	if in.IngressExpiry != nil && *in.IngressExpiry < w.To && *in.IngressExpiry >= w.From {
		w.To = *in.IngressExpiry
		w.NarrowedBy = "ingress_expiry"
	}
	return w
}

// CheckRules refuses what only the ledger's rules show to be wrong: an
// ingress_expiry before S−D. The ledger refuses a stamp more than D ahead of
// its time, so no envelope expiring before S−D could have executed the call;
// such a value is not the expiry of the envelopes sent (it must be the latest
// expiry of every envelope sent with these bytes), and as the window's end it
// would publish a final absent while the real call may still execute.
func (in *Intent) CheckRules(r LedgerRules) *Error {
	if in.IngressExpiry == nil {
		return nil
	}
	if start := satSub(in.Args.CreatedAt, r.drift()); *in.IngressExpiry < start {
		return refuse(CodeBadExpiry, "ingress_expiry",
			"ingress_expiry %d is before created_at_time − drift (%d): no envelope expiring then could have executed this call; send the latest expiry of every envelope sent with these bytes, or leave the field out",
			*in.IngressExpiry, start)
	}
	return nil
}

// Contains reports whether a block at ledger time ts can hold the intent.
func (w Window) Contains(ts uint64) bool { return w.From <= ts && ts <= w.To }

// ClosedAt reports whether certified ledger time t has passed the window's
// end, after which no new block can fall inside it. A window that saturated
// at 2^64−1 never closes.
func (w Window) ClosedAt(t uint64) bool { return t > w.To }

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func satSub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
