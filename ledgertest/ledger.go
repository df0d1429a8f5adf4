package ledgertest

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc3"
)

// BlockStyle selects how blocks name their type.
type BlockStyle int

const (
	// StyleDFINITY writes tx.op and no btype, as the DFINITY ICRC ledger does.
	StyleDFINITY BlockStyle = iota
	// StyleSpec writes btype (1xfer, 2xfer, 1mint, 1burn, 2approve) and no tx.op.
	StyleSpec
)

// Balance is an initial balance minted at ledger creation.
type Balance struct {
	Account icrc3.Account
	Amount  icrc3.Nat
}

// LedgerConfig configures a test ledger; the zero value is a DFINITY-style
// ledger with the DFINITY defaults.
type LedgerConfig struct {
	ID             principal.Principal // zero: a fresh id from the server
	MintingAccount *icrc3.Account      // nil: a fixed principal derived from the ledger id
	Fee            *icrc3.Nat          // nil: 10_000
	Decimals       uint8               // 0: 8
	Symbol, Name   string              // "": "TST", "Test Token"
	MaxMemoLength  int                 // 0: 32
	BlockStyle     BlockStyle
	TipFormat      TipFormat
	// TransactionWindow and PermittedDrift default to 24h and 60s. TooOld is
	// created_at+TW < now (no drift term, as the DFINITY ledger does).
	TransactionWindow, PermittedDrift time.Duration
	// ArchiveThreshold: when the ledger holds at least this many unarchived
	// blocks, the oldest ArchiveBatch (0: ArchiveThreshold/2) are archived. 0: never.
	ArchiveThreshold uint64
	ArchiveBatch     uint64
	// ArchiveCapacity: blocks per archive canister before another is created; 0: unlimited.
	ArchiveCapacity uint64
	// Overlap keeps archived blocks on the ledger until the next archiving round.
	Overlap bool
	// DisableICRC3 / DisableLegacy remove one endpoint family.
	DisableICRC3, DisableLegacy bool
	// Uncertified: the tip endpoints answer without a certificate, as a
	// ledger that certifies no tip does (readable only `verify: queries`).
	Uncertified     bool
	InitialBalances []Balance
}

// ArchiveInfo is an archive canister and the inclusive range of blocks it holds.
type ArchiveInfo struct {
	ID         principal.Principal
	Start, End uint64
}

// Execution is the ground truth of one successful ledger call.
type Execution struct {
	Index  uint64
	Method string
	Caller principal.Principal
	Arg    any // icrc1.TransferArg, icrc1.ApproveArgs or icrc1.TransferFromArgs
	Time   uint64
}

// LedgerCounters counts what the ledger and its archives served.
type LedgerCounters struct {
	// BlocksServed is the number of blocks returned by get_blocks-type
	// endpoints of the ledger and its archives, both endpoint families.
	BlocksServed uint64
	// Calls counts calls per method; archive methods are prefixed "archive.".
	Calls map[string]uint64
}

// host is what a ledger needs from the replica hosting it.
type host interface {
	NewCanisterID() principal.Principal
	Install(c Canister)
	Faults(id principal.Principal) Faults
	Now() uint64
}

type allowance struct {
	amount    icrc3.Nat
	expiresAt uint64 // 0: never
}

// Ledger is an ICRC-1/2/3 ledger canister following the DFINITY ledger's rules.
type Ledger struct {
	h          host
	id         principal.Principal
	cfg        LedgerConfig
	minting    icrc3.Account
	mintingID  uint32 // account id (plus one) of the minting account
	fee        icrc3.Nat
	tw, drift  uint64
	style      BlockStyle
	certified  atomic.Pointer[[]byte]
	blocksSent atomic.Uint64
	calls      sync.Map // method -> *atomic.Uint64

	mu          sync.RWMutex
	accts       *accountTable
	chain       []storedBlock
	extras      map[uint64]approveExtra // approve blocks with expected_allowance or expires_at
	balances    []icrc3.Nat             // by normalised account id
	supply      icrc3.Nat
	allowances  map[[2]uint32]allowance
	dedup       map[icrc3.Hash]uint64
	dedupQ      []dedupEntry // blocks with created_at_time, in chain order
	dedupHead   int
	archives    []*Archive
	archivedEnd uint64 // blocks [0, archivedEnd) are held by archives
	localStart  uint64 // the ledger serves [localStart, len(chain))
	execs       []Execution
	bulk        bool // GenerateHistory certifies once at the end instead of per block
	rh          *riHasher
	enc         encCache
}

func newLedger(h host, cfg LedgerConfig) (*Ledger, error) {
	l := &Ledger{
		h:          h,
		cfg:        cfg,
		accts:      newAccountTable(),
		allowances: map[[2]uint32]allowance{},
		dedup:      map[icrc3.Hash]uint64{},
		extras:     map[uint64]approveExtra{},
		rh:         newRIHasher(),
		style:      cfg.BlockStyle,
	}
	if cfg.BlockStyle != StyleDFINITY && cfg.BlockStyle != StyleSpec {
		return nil, fmt.Errorf("ledgertest: unknown block style %d", cfg.BlockStyle)
	}
	if cfg.TipFormat != TipLEB128 && cfg.TipFormat != TipLegacy {
		return nil, fmt.Errorf("ledgertest: unknown tip format %d", cfg.TipFormat)
	}
	if cfg.DisableICRC3 && cfg.DisableLegacy {
		return nil, fmt.Errorf("ledgertest: a ledger must serve at least one block endpoint family")
	}
	l.id = cfg.ID
	if len(l.id.Raw) == 0 {
		l.id = h.NewCanisterID()
	}
	if cfg.MintingAccount != nil {
		l.minting = *cfg.MintingAccount
	} else {
		// A self-authenticating-style principal derived from the ledger id:
		// deterministic for a deterministic server, distinct per ledger.
		sum := sha256.Sum224(append([]byte("ledgertest minting account "), l.id.Raw...))
		l.minting = icrc3.Account{Owner: principal.Principal{Raw: append(sum[:28:28], 0x02)}}
	}
	l.fee = icrc3.NatFromUint64(10_000)
	if cfg.Fee != nil {
		l.fee = *cfg.Fee
	}
	if !fitsU64(l.fee) {
		return nil, fmt.Errorf("ledgertest: fee %s does not fit a u64 ledger", l.fee)
	}
	if l.cfg.Decimals == 0 {
		l.cfg.Decimals = 8
	}
	if l.cfg.Symbol == "" {
		l.cfg.Symbol = "TST"
	}
	if l.cfg.Name == "" {
		l.cfg.Name = "Test Token"
	}
	if l.cfg.MaxMemoLength == 0 {
		l.cfg.MaxMemoLength = 32
	}
	l.tw, l.drift = uint64(24*time.Hour), uint64(60*time.Second)
	if cfg.TransactionWindow > 0 {
		l.tw = uint64(cfg.TransactionWindow)
	}
	if cfg.PermittedDrift > 0 {
		l.drift = uint64(cfg.PermittedDrift)
	}
	if l.cfg.ArchiveThreshold > 0 && l.cfg.ArchiveBatch == 0 {
		l.cfg.ArchiveBatch = max(l.cfg.ArchiveThreshold/2, 1)
	}
	l.mintingID = l.accts.intern(l.minting)
	root := newTipTree(cfg.TipFormat, 0, icrc3.Hash{}).rootHash()
	empty := root[:]
	l.certified.Store(&empty)

	now := h.Now()
	for i, b := range cfg.InitialBalances {
		req := txReq{kind: kindTransfer, from: l.minting, to: b.Account, amt: b.Amount}
		if _, lerr, trap := l.execute(&req, now); lerr != nil || trap != nil {
			return nil, fmt.Errorf("ledgertest: initial balance %d: %v%v", i, lerr, trap)
		}
	}
	h.Install(l)
	return l, nil
}

// ID returns the ledger's canister id.
func (l *Ledger) ID() principal.Principal { return l.id }

// MintingAccount returns the minting account.
func (l *Ledger) MintingAccount() icrc3.Account { return l.minting }

// Fee returns the transfer fee.
func (l *Ledger) Fee() icrc3.Nat { return l.fee }

// CertifiedData is the root hash of the tip tree.
func (l *Ledger) CertifiedData() []byte { return *l.certified.Load() }

// Len returns the chain length.
func (l *Ledger) Len() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return uint64(len(l.chain))
}

// Block returns block i as the ledger serves it, wherever it is stored.
func (l *Ledger) Block(i uint64) (icrc3.Value, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if i >= uint64(len(l.chain)) {
		return icrc3.Value{}, false
	}
	return l.blockValueLocked(i), true
}

// TipHash returns the hash of the last block (zero when the chain is empty).
func (l *Ledger) TipHash() icrc3.Hash {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.chain) == 0 {
		return icrc3.Hash{}
	}
	return l.chain[len(l.chain)-1].hash
}

// BalanceOf returns the balance of a (ICRC-1 account equality).
func (l *Ledger) BalanceOf(a icrc3.Account) icrc3.Nat {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.balanceLocked(a)
}

func (l *Ledger) balanceLocked(a icrc3.Account) icrc3.Nat {
	n, ok := l.accts.normID(a)
	if !ok || int(n) >= len(l.balances) {
		return icrc3.Nat{}
	}
	return l.balances[n]
}

// Archives returns the archives with their inclusive ranges.
func (l *Ledger) Archives() []ArchiveInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.archiveInfosLocked()
}

func (l *Ledger) archiveInfosLocked() []ArchiveInfo {
	out := make([]ArchiveInfo, 0, len(l.archives))
	for _, a := range l.archives {
		out = append(out, ArchiveInfo{ID: a.id, Start: a.start, End: a.end - 1})
	}
	return out
}

// Executions returns every successful transfer, approve and transfer_from
// call (Go-side or over HTTP), in execution order. Blocks written by
// InitialBalances and GenerateHistory are not calls and are not listed.
func (l *Ledger) Executions() []Execution {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]Execution(nil), l.execs...)
}

// Counters returns a snapshot of the ledger's and its archives' counters.
func (l *Ledger) Counters() LedgerCounters {
	c := LedgerCounters{BlocksServed: l.blocksSent.Load(), Calls: map[string]uint64{}}
	l.calls.Range(func(k, v any) bool {
		c.Calls[k.(string)] = v.(*atomic.Uint64).Load()
		return true
	})
	return c
}

// knownMethods bounds the counter map: method names come from the network.
var knownMethods = map[string]bool{
	"icrc1_transfer": true, "icrc2_approve": true, "icrc2_transfer_from": true, "icrc2_allowance": true,
	"icrc1_balance_of": true, "icrc1_fee": true, "icrc1_minting_account": true, "icrc1_decimals": true,
	"icrc1_symbol": true, "icrc1_name": true, "icrc1_metadata": true, "icrc1_total_supply": true,
	"icrc1_supported_standards": true, "icrc3_get_blocks": true, "icrc3_get_archives": true,
	"icrc3_get_tip_certificate": true, "icrc3_supported_block_types": true, "get_blocks": true,
	"get_data_certificate": true, "archives": true,
}

func (l *Ledger) count(prefix, method string) {
	if !knownMethods[method] {
		method = "(unknown)"
	}
	method = prefix + method
	v, ok := l.calls.Load(method)
	if !ok {
		v, _ = l.calls.LoadOrStore(method, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
}

type dedupEntry struct {
	idx    uint64
	txHash icrc3.Hash
}

// expand rebuilds the full record of block i. l.mu is held.
func (l *Ledger) expand(i uint64) blockRec {
	s := &l.chain[i]
	r := blockRec{ts: s.ts, createdAt: s.createdAt, amt: s.amt, memo: s.memo, hash: s.hash,
		from: s.from, to: s.to, spender: s.spender, op: s.op, flags: s.flags}
	if s.flags&(fTxFee|fBlockFee) != 0 {
		r.fee = l.fee
	}
	if s.flags&(fExpAllow|fExpiresAt) != 0 {
		x := l.extras[i]
		r.expAllow, r.expiresAt = x.expAllow, x.expiresAt
	}
	return r
}

func (l *Ledger) blockValueLocked(i uint64) icrc3.Value {
	var ph *icrc3.Hash
	if i > 0 {
		ph = &l.chain[i-1].hash
	}
	r := l.expand(i)
	return blockValue(&r, ph, l.accts, l.style)
}

// certifiedAt is the certified data of the chain's first n blocks: what a
// replica that has seen only n blocks certifies.
func (l *Ledger) certifiedAt(n uint64) []byte {
	r := l.tipTreeAt(n).rootHash()
	return r[:]
}

func (l *Ledger) tipTreeAt(n uint64) tipTree {
	var tip icrc3.Hash
	if n > 0 {
		tip = l.chain[n-1].hash
	}
	return newTipTree(l.cfg.TipFormat, n, tip)
}

// NewLedger creates a ledger (and, as it archives, its archives) on s.
func (s *Server) NewLedger(cfg LedgerConfig) (*Ledger, error) {
	return newLedger(s, cfg)
}
