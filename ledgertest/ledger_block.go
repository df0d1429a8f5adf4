package ledgertest

import (
	"bytes"
	"crypto/sha256"

	"github.com/reconciled/reconciled/icrc3"
)

// Blocks are kept in a compact typed form rather than as icrc3.Values: a
// million-block ledger must fit in memory and build quickly. blockRec is the
// full working form used while executing and serving; storedBlock (below)
// is what the chain keeps. The Value and the RI hash are derived from
// blockRec by one function each, and a test proves the fast hash equals
// Value.Hash() of the materialised block.

type op uint8

const (
	opXfer op = iota + 1
	opMint
	opBurn
	opApprove
)

const (
	fTxFee     uint8 = 1 << iota // tx.fee present (caller set it)
	fBlockFee                    // top-level fee present (ledger charged its own fee)
	fMemo                        // tx.memo present
	fCreatedAt                   // tx.ts present
	fExpAllow                    // tx.expected_allowance present
	fExpiresAt                   // tx.expires_at present
)

type blockRec struct {
	ts        uint64
	createdAt uint64
	expiresAt uint64
	amt       icrc3.Nat
	fee       icrc3.Nat // tx.fee or the top-level fee, per flags
	expAllow  icrc3.Nat
	memo      []byte
	hash      icrc3.Hash
	txHash    icrc3.Hash
	// Account ids into the ledger's account table, plus one (0 = absent).
	from, to, spender uint32
	op                op
	flags             uint8
}

// storedBlock is what the chain keeps per block: the fee is the ledger's
// (it cannot change), approve-only fields live in a side map and the tx hash
// only in the dedup queue, which keeps a million blocks near 100 MB.
type storedBlock struct {
	ts, createdAt     uint64
	amt               icrc3.Nat
	memo              []byte
	hash              icrc3.Hash
	from, to, spender uint32
	op                op
	flags             uint8
}

type approveExtra struct {
	expAllow  icrc3.Nat
	expiresAt uint64
}

// acct is an account in the form a block records it, with its precomputed
// RI hash and the id of its ICRC-1-normalised form (which balances use).
type acct struct {
	a    icrc3.Account
	val  icrc3.Value
	hash icrc3.Hash
	norm uint32
}

// accountTable interns accounts so blocks store 4-byte ids.
type accountTable struct {
	accts []acct
	byKey map[string]uint32 // recorded form -> id
	norms map[string]uint32 // normalised form -> norm id
}

func newAccountTable() *accountTable {
	return &accountTable{byKey: map[string]uint32{}, norms: map[string]uint32{}}
}

func recordedKey(a icrc3.Account) string {
	var b []byte
	b = append(b, byte(len(a.Owner.Raw)))
	b = append(b, a.Owner.Raw...)
	if a.Subaccount != nil {
		b = append(b, 1)
		b = append(b, a.Subaccount...)
	}
	return string(b)
}

func normKey(a icrc3.Account) string {
	var b []byte
	b = append(b, byte(len(a.Owner.Raw)))
	b = append(b, a.Owner.Raw...)
	if !a.IsDefaultSubaccount() {
		b = append(b, a.Subaccount...)
	}
	return string(b)
}

// intern returns the id (plus one, as blocks store it) of a's recorded form.
func (t *accountTable) intern(a icrc3.Account) uint32 {
	k := recordedKey(a)
	if id, ok := t.byKey[k]; ok {
		return id + 1
	}
	nk := normKey(a)
	n, ok := t.norms[nk]
	if !ok {
		n = uint32(len(t.norms))
		t.norms[nk] = n
	}
	c := icrc3.Account{Owner: a.Owner, Subaccount: append([]byte(nil), a.Subaccount...)}
	if a.Subaccount == nil {
		c.Subaccount = nil
	}
	v := c.Value()
	t.accts = append(t.accts, acct{a: c, val: v, hash: v.Hash(), norm: n})
	id := uint32(len(t.accts) - 1)
	t.byKey[k] = id
	return id + 1
}

// normID returns the balance slot of a without interning its recorded form.
func (t *accountTable) normID(a icrc3.Account) (uint32, bool) {
	n, ok := t.norms[normKey(a)]
	return n, ok
}

func (t *accountTable) get(id uint32) *acct { return &t.accts[id-1] }

// Precomputed key hashes for the fast RI hash.
var (
	kAmt      = sha256.Sum256([]byte("amt"))
	kFee      = sha256.Sum256([]byte("fee"))
	kFrom     = sha256.Sum256([]byte("from"))
	kTo       = sha256.Sum256([]byte("to"))
	kSpender  = sha256.Sum256([]byte("spender"))
	kMemo     = sha256.Sum256([]byte("memo"))
	kOp       = sha256.Sum256([]byte("op"))
	kTS       = sha256.Sum256([]byte("ts"))
	kExpAllow = sha256.Sum256([]byte("expected_allowance"))
	kExpires  = sha256.Sum256([]byte("expires_at"))
	kPHash    = sha256.Sum256([]byte("phash"))
	kTx       = sha256.Sum256([]byte("tx"))
	kBType    = sha256.Sum256([]byte("btype"))
)

func (o op) name() string {
	switch o {
	case opXfer:
		return "xfer"
	case opMint:
		return "mint"
	case opBurn:
		return "burn"
	case opApprove:
		return "approve"
	}
	return ""
}

// btype is the ICRC-3 block type a spec-style ledger writes for r.
func (r *blockRec) btype() string {
	switch r.op {
	case opXfer:
		if r.spender != 0 {
			return "2xfer"
		}
		return "1xfer"
	case opMint:
		return "1mint"
	case opBurn:
		return "1burn"
	case opApprove:
		return "2approve"
	}
	return ""
}

var (
	hOp = map[op][32]byte{
		opXfer: sha256.Sum256([]byte("xfer")), opMint: sha256.Sum256([]byte("mint")),
		opBurn: sha256.Sum256([]byte("burn")), opApprove: sha256.Sum256([]byte("approve")),
	}
	hBType = map[string][32]byte{
		"1xfer": sha256.Sum256([]byte("1xfer")), "2xfer": sha256.Sum256([]byte("2xfer")),
		"1mint": sha256.Sum256([]byte("1mint")), "1burn": sha256.Sum256([]byte("1burn")),
		"2approve": sha256.Sum256([]byte("2approve")),
	}
)

// riHasher computes RI map hashes without building Values. It is reused
// across blocks so hashing allocates nothing.
type riHasher struct {
	pairs [12][64]byte
	flat  [12 * 64]byte
	n     int
	leb   [24]byte
}

func newRIHasher() *riHasher { return &riHasher{} }

func (rh *riHasher) reset() { rh.n = 0 }

func (rh *riHasher) add(k *[32]byte, v *[32]byte) {
	p := &rh.pairs[rh.n]
	copy(p[:32], k[:])
	copy(p[32:], v[:])
	rh.n++
}

func (rh *riHasher) digest(b []byte) [32]byte { return sha256.Sum256(b) }

func (rh *riHasher) addNat(k *[32]byte, n icrc3.Nat) {
	v := rh.digest(n.AppendLEB128(rh.leb[:0]))
	rh.add(k, &v)
}

func (rh *riHasher) addU64(k *[32]byte, n uint64) {
	v := rh.digest(icrc3.AppendUvarint(rh.leb[:0], n))
	rh.add(k, &v)
}

func (rh *riHasher) addBlob(k *[32]byte, b []byte) {
	v := rh.digest(b)
	rh.add(k, &v)
}

// mapHash sorts the pairs (insertion sort: at most a dozen) and hashes them.
func (rh *riHasher) mapHash() icrc3.Hash {
	p := rh.pairs[:rh.n]
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && bytes.Compare(p[j-1][:], p[j][:]) > 0; j-- {
			p[j-1], p[j] = p[j], p[j-1]
		}
	}
	for i := range p {
		copy(rh.flat[i*64:], p[i][:])
	}
	out := sha256.Sum256(rh.flat[:len(p)*64])
	rh.n = 0
	return out
}

// txHash is the RI hash of the block's tx map: the DFINITY ledger's dedup
// identity. style decides whether tx.op is written.
func (rh *riHasher) txHash(r *blockRec, t *accountTable, style BlockStyle) icrc3.Hash {
	rh.reset()
	if style == StyleDFINITY {
		h := hOp[r.op]
		rh.add(&kOp, &h)
	}
	rh.addNat(&kAmt, r.amt)
	if r.from != 0 {
		rh.add(&kFrom, (*[32]byte)(&t.get(r.from).hash))
	}
	if r.to != 0 {
		rh.add(&kTo, (*[32]byte)(&t.get(r.to).hash))
	}
	if r.spender != 0 {
		rh.add(&kSpender, (*[32]byte)(&t.get(r.spender).hash))
	}
	if r.flags&fTxFee != 0 {
		rh.addNat(&kFee, r.fee)
	}
	if r.flags&fMemo != 0 {
		rh.addBlob(&kMemo, r.memo)
	}
	if r.flags&fCreatedAt != 0 {
		rh.addU64(&kTS, r.createdAt)
	}
	if r.flags&fExpAllow != 0 {
		rh.addNat(&kExpAllow, r.expAllow)
	}
	if r.flags&fExpiresAt != 0 {
		rh.addU64(&kExpires, r.expiresAt)
	}
	return rh.mapHash()
}

// blockHash is the RI hash of the whole block, given its tx hash and parent.
func (rh *riHasher) blockHash(r *blockRec, phash *icrc3.Hash, style BlockStyle) icrc3.Hash {
	rh.reset()
	if style == StyleSpec {
		h := hBType[r.btype()]
		rh.add(&kBType, &h)
	}
	if r.flags&fBlockFee != 0 {
		rh.addNat(&kFee, r.fee)
	}
	if phash != nil {
		rh.addBlob(&kPHash, phash[:])
	}
	rh.addU64(&kTS, r.ts)
	rh.add(&kTx, (*[32]byte)(&r.txHash))
	return rh.mapHash()
}

// txValue builds the tx map with keys in byte order, as the DFINITY ledger
// (a BTreeMap) emits them.
func txValue(r *blockRec, t *accountTable, style BlockStyle) icrc3.Value {
	fs := make([]icrc3.Field, 0, 10)
	fs = append(fs, icrc3.F("amt", icrc3.NatValue(r.amt)))
	if r.flags&fExpAllow != 0 {
		fs = append(fs, icrc3.F("expected_allowance", icrc3.NatValue(r.expAllow)))
	}
	if r.flags&fExpiresAt != 0 {
		fs = append(fs, icrc3.F("expires_at", icrc3.Uint(r.expiresAt)))
	}
	if r.flags&fTxFee != 0 {
		fs = append(fs, icrc3.F("fee", icrc3.NatValue(r.fee)))
	}
	if r.from != 0 {
		fs = append(fs, icrc3.F("from", t.get(r.from).val))
	}
	if r.flags&fMemo != 0 {
		fs = append(fs, icrc3.F("memo", icrc3.Blob(r.memo)))
	}
	if style == StyleDFINITY {
		fs = append(fs, icrc3.F("op", icrc3.Text(r.op.name())))
	}
	if r.spender != 0 {
		fs = append(fs, icrc3.F("spender", t.get(r.spender).val))
	}
	if r.to != 0 {
		fs = append(fs, icrc3.F("to", t.get(r.to).val))
	}
	if r.flags&fCreatedAt != 0 {
		fs = append(fs, icrc3.F("ts", icrc3.Uint(r.createdAt)))
	}
	return icrc3.MapValue(fs...)
}

// blockValue materialises a block as the ledger serves it.
func blockValue(r *blockRec, phash *icrc3.Hash, t *accountTable, style BlockStyle) icrc3.Value {
	fs := make([]icrc3.Field, 0, 5)
	if style == StyleSpec {
		fs = append(fs, icrc3.F("btype", icrc3.Text(r.btype())))
	}
	if r.flags&fBlockFee != 0 {
		fs = append(fs, icrc3.F("fee", icrc3.NatValue(r.fee)))
	}
	if phash != nil {
		fs = append(fs, icrc3.F("phash", icrc3.Blob(append([]byte(nil), phash[:]...))))
	}
	fs = append(fs, icrc3.F("ts", icrc3.Uint(r.ts)))
	fs = append(fs, icrc3.F("tx", txValue(r, t, style)))
	return icrc3.MapValue(fs...)
}
