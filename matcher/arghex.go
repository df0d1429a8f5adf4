package matcher

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc3"
)

// arg_hex is read by a small Candid reader that knows only the three
// argument types, rather than by agent-go's generic decoder. Two reasons:
// the generic decoder can be made to recurse without end (a recursive type)
// or to allocate whatever a length prefix claims (a principal), and either
// would kill the process on one bad intent; and it tolerates missing or
// mistyped fields, where a lenient reading could call two different calls
// the same. Tests check this reader against agent-go's encoder.
//
// What is accepted is what the ledger decodes to the same values: fields in
// any table layout, opt fields left out of the record type (read as null,
// as the ledger reads them). Refused: extra fields (the ledger would ignore
// them, but a strange payload is better looked at than guessed about), opt
// fields of another type (the ledger would silently read null), subaccounts
// that are not 32 bytes, and trailing bytes.

// Candid type opcodes used here (the spec's negative type codes).
const (
	opNat       = -3
	opNat8      = -5
	opNat64     = -8
	opOpt       = -18
	opVec       = -19
	opRecord    = -20
	opVariant   = -21
	opPrincipal = -24
)

type shapeKind int

const (
	sNat shapeKind = iota
	sNat64
	sBlob
	sSubaccount // a blob the ledger decodes as exactly 32 bytes
	sPrincipal
	sOpt
	sRecord
)

type shape struct {
	kind   shapeKind
	elem   *shape       // sOpt
	fields []shapeField // sRecord
}

type shapeField struct {
	name string
	id   uint32
	s    *shape
}

func field(name string, s *shape) shapeField {
	return shapeField{name: name, id: candidHash(name), s: s}
}

func opt(s *shape) *shape { return &shape{kind: sOpt, elem: s} }

// candidHash is the Candid field id of a name.
func candidHash(s string) uint32 {
	var h uint32
	for i := 0; i < len(s); i++ {
		h = h*223 + uint32(s[i])
	}
	return h
}

var (
	natShape     = &shape{kind: sNat}
	nat64Shape   = &shape{kind: sNat64}
	blobShape    = &shape{kind: sBlob}
	subShape     = &shape{kind: sSubaccount}
	accountShape = &shape{kind: sRecord, fields: []shapeField{
		field("owner", &shape{kind: sPrincipal}),
		field("subaccount", opt(subShape)),
	}}
	argShapes = map[Method]*shape{
		MethodTransfer: {kind: sRecord, fields: []shapeField{
			field("from_subaccount", opt(subShape)), field("to", accountShape), field("amount", natShape),
			field("fee", opt(natShape)), field("memo", opt(blobShape)), field("created_at_time", opt(nat64Shape)),
		}},
		MethodTransferFrom: {kind: sRecord, fields: []shapeField{
			field("spender_subaccount", opt(subShape)), field("from", accountShape), field("to", accountShape),
			field("amount", natShape), field("fee", opt(natShape)), field("memo", opt(blobShape)),
			field("created_at_time", opt(nat64Shape)),
		}},
		MethodApprove: {kind: sRecord, fields: []shapeField{
			field("from_subaccount", opt(subShape)), field("spender", accountShape), field("amount", natShape),
			field("expected_allowance", opt(natShape)), field("expires_at", opt(nat64Shape)), field("fee", opt(natShape)),
			field("memo", opt(blobShape)), field("created_at_time", opt(nat64Shape)),
		}},
	}
)

// maxNatBytes bounds a nat's LEB128 encoding: 64 bytes hold 448 bits, more
// than any ledger's token maximum (2^256−1).
const maxNatBytes = 64

// decodedArg is one field read from arg_hex; present=false for null.
type decodedArg struct {
	present bool
	nat     *big.Int
	nat64   uint64
	blob    []byte
	owner   principal.Principal
	fields  map[string]decodedArg // records
}

type typeEntry struct {
	op     int64
	ref    int64      // opt, vec
	fields []fieldRef // record, variant
}

type fieldRef struct {
	id  uint32
	ref int64
}

type candidReader struct {
	b     []byte
	pos   int
	table []typeEntry
}

var errShort = errors.New("unexpected end of data")

func (r *candidReader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errShort
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *candidReader) take(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.pos {
		return nil, errShort
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s, nil
}

// uleb reads an unsigned LEB128 that must fit in 63 bits.
func (r *candidReader) uleb() (int64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift > 56 {
			return 0, errors.New("LEB128 length or count too large")
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	if v > 1<<62 {
		return 0, errors.New("LEB128 length or count too large")
	}
	return int64(v), nil
}

func (r *candidReader) sleb() (int64, error) {
	var v int64
	var shift uint
	for {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift > 56 {
			return 0, errors.New("SLEB128 type reference too large")
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c < 0x80 {
			if c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
	}
}

// count reads a length and refuses one larger than the bytes left, since
// every element takes at least a byte.
func (r *candidReader) count() (int, error) {
	n, err := r.uleb()
	if err != nil {
		return 0, err
	}
	if n > int64(len(r.b)-r.pos) {
		return 0, fmt.Errorf("count %d exceeds the %d bytes left", n, len(r.b)-r.pos)
	}
	return int(n), nil
}

func (r *candidReader) readTable() error {
	n, err := r.count()
	if err != nil {
		return fmt.Errorf("type table: %w", err)
	}
	r.table = make([]typeEntry, n)
	for i := range r.table {
		e := &r.table[i]
		if e.op, err = r.sleb(); err != nil {
			return fmt.Errorf("type %d: %w", i, err)
		}
		switch e.op {
		case opOpt, opVec:
			if e.ref, err = r.sleb(); err != nil {
				return fmt.Errorf("type %d: %w", i, err)
			}
		case opRecord, opVariant:
			nf, err := r.count()
			if err != nil {
				return fmt.Errorf("type %d: %w", i, err)
			}
			e.fields = make([]fieldRef, nf)
			for j := range e.fields {
				id, err := r.uleb()
				if err != nil {
					return fmt.Errorf("type %d field %d: %w", i, j, err)
				}
				if id > 0xffffffff || j > 0 && uint32(id) <= e.fields[j-1].id {
					return fmt.Errorf("type %d: field ids not increasing 32-bit values", i)
				}
				e.fields[j].id = uint32(id)
				if e.fields[j].ref, err = r.sleb(); err != nil {
					return fmt.Errorf("type %d field %d: %w", i, j, err)
				}
			}
		default:
			return fmt.Errorf("type %d: opcode %d is not used by ICRC-1/2 arguments", i, e.op)
		}
	}
	return nil
}

// entry resolves a reference to a composite type of the given opcode.
func (r *candidReader) entry(ref, op int64) (*typeEntry, bool) {
	if ref < 0 || ref >= int64(len(r.table)) || r.table[ref].op != op {
		return nil, false
	}
	return &r.table[ref], true
}

// check verifies that type ref is exactly shape s. The walk follows s, which
// is finite, so recursive tables cannot make it loop.
func (r *candidReader) check(ref int64, s *shape) error {
	switch s.kind {
	case sNat:
		if ref == opNat {
			return nil
		}
		return errors.New("want nat")
	case sNat64:
		if ref == opNat64 {
			return nil
		}
		return errors.New("want nat64")
	case sPrincipal:
		if ref == opPrincipal {
			return nil
		}
		return errors.New("want principal")
	case sBlob, sSubaccount:
		if e, ok := r.entry(ref, opVec); ok && e.ref == opNat8 {
			return nil
		}
		return errors.New("want blob")
	case sOpt:
		e, ok := r.entry(ref, opOpt)
		if !ok {
			return errors.New("want opt")
		}
		return r.check(e.ref, s.elem)
	case sRecord:
		e, ok := r.entry(ref, opRecord)
		if !ok {
			return errors.New("want record")
		}
		for _, f := range e.fields {
			sf, ok := s.lookup(f.id)
			if !ok {
				return fmt.Errorf("unexpected field id %d", f.id)
			}
			if err := r.check(f.ref, sf.s); err != nil {
				return fmt.Errorf("field %s: %w", sf.name, err)
			}
		}
		for _, sf := range s.fields {
			if sf.s.kind != sOpt && !e.has(sf.id) {
				return fmt.Errorf("missing field %s", sf.name)
			}
		}
		return nil
	}
	return errors.New("unknown shape")
}

func (s *shape) lookup(id uint32) (shapeField, bool) {
	for _, f := range s.fields {
		if f.id == id {
			return f, true
		}
	}
	return shapeField{}, false
}

func (e *typeEntry) has(id uint32) bool {
	for _, f := range e.fields {
		if f.id == id {
			return true
		}
	}
	return false
}

// value reads a value of type ref, already checked against s.
func (r *candidReader) value(ref int64, s *shape) (decodedArg, error) {
	d := decodedArg{present: true}
	switch s.kind {
	case sNat:
		start := r.pos
		for {
			c, err := r.byte()
			if err != nil {
				return d, err
			}
			if r.pos-start > maxNatBytes {
				return d, fmt.Errorf("nat longer than %d bytes", maxNatBytes)
			}
			if c < 0x80 {
				break
			}
		}
		d.nat = new(big.Int)
		for i := r.pos - 1; i >= start; i-- {
			d.nat.Lsh(d.nat, 7)
			d.nat.Or(d.nat, big.NewInt(int64(r.b[i]&0x7f)))
		}
	case sNat64:
		b, err := r.take(8)
		if err != nil {
			return d, err
		}
		d.nat64 = binary.LittleEndian.Uint64(b)
	case sBlob, sSubaccount:
		n, err := r.count()
		if err != nil {
			return d, err
		}
		b, _ := r.take(n)
		if s.kind == sSubaccount && n != 32 {
			return d, fmt.Errorf("subaccount is %d bytes, want 32", n)
		}
		d.blob = bytes.Clone(b)
	case sPrincipal:
		flag, err := r.byte()
		if err != nil {
			return d, err
		}
		if flag != 1 {
			return d, errors.New("opaque principal reference")
		}
		n, err := r.count()
		if err != nil {
			return d, err
		}
		if n > 29 {
			return d, fmt.Errorf("principal of %d bytes, at most 29", n)
		}
		b, _ := r.take(n)
		d.owner = principal.Principal{Raw: bytes.Clone(b)}
	case sOpt:
		tag, err := r.byte()
		if err != nil {
			return d, err
		}
		switch tag {
		case 0:
			return decodedArg{}, nil
		case 1:
			e, _ := r.entry(ref, opOpt)
			return r.value(e.ref, s.elem)
		}
		return d, fmt.Errorf("opt tag %d", tag)
	case sRecord:
		e, _ := r.entry(ref, opRecord)
		d.fields = make(map[string]decodedArg, len(s.fields))
		for _, f := range e.fields {
			sf, _ := s.lookup(f.id)
			v, err := r.value(f.ref, sf.s)
			if err != nil {
				return d, fmt.Errorf("%s: %w", sf.name, err)
			}
			d.fields[sf.name] = v
		}
	}
	return d, nil
}

// decodeArgHex reads the single argument of method m from Candid bytes.
func decodeArgHex(m Method, data []byte) (map[string]decodedArg, error) {
	if !bytes.HasPrefix(data, []byte("DIDL")) {
		return nil, errors.New("no DIDL header")
	}
	r := &candidReader{b: data, pos: 4}
	if err := r.readTable(); err != nil {
		return nil, err
	}
	n, err := r.count()
	if err != nil {
		return nil, fmt.Errorf("argument count: %w", err)
	}
	if n != 1 {
		return nil, fmt.Errorf("%d arguments, want 1", n)
	}
	ref, err := r.sleb()
	if err != nil {
		return nil, fmt.Errorf("argument type: %w", err)
	}
	s := argShapes[m]
	if err := r.check(ref, s); err != nil {
		return nil, fmt.Errorf("argument is not %s's: %w", m, err)
	}
	v, err := r.value(ref, s)
	if err != nil {
		return nil, fmt.Errorf("argument value: %w", err)
	}
	if r.pos != len(r.b) {
		return nil, fmt.Errorf("%d bytes after the argument", len(r.b)-r.pos)
	}
	return v.fields, nil
}

// checkArgHex checks that the sent bytes say what args says, and returns
// their accounts as encoded.
func checkArgHex(m Method, data []byte, a *Args) (*sentAccounts, *Error) {
	got, err := decodeArgHex(m, data)
	if err != nil {
		return nil, refuse(CodeBadArgHex, "arg_hex", "candid: %v", err)
	}
	sent := &sentAccounts{}
	for _, f := range argShapes[m].fields {
		d := got[f.name] // a missing opt field reads as null
		if !argAgrees(f.name, d, a) {
			return nil, refuse(CodeArgsMismatch, "args."+f.name, "arg_hex says %s, args says %s", d.describe(f.s), describeArg(f.name, a))
		}
		if f.s == accountShape {
			acc := d.account()
			switch f.name {
			case "from":
				sent.from = &acc
			case "to":
				sent.to = &acc
			case "spender":
				sent.spender = &acc
			}
		}
	}
	return sent, nil
}

func argAgrees(name string, d decodedArg, a *Args) bool {
	natEq := func(n *icrc3.Nat) bool {
		if n == nil || !d.present {
			return n == nil && !d.present
		}
		return n.Big().Cmp(d.nat) == 0
	}
	u64Eq := func(n *uint64) bool {
		if n == nil || !d.present {
			return n == nil && !d.present
		}
		return *n == d.nat64
	}
	// Subaccounts and memo compare exactly, null against 32 zero bytes
	// included: the ledger records what was sent. Accounts given as text
	// cannot spell an explicit zero subaccount, so they compare by ICRC-1
	// equality.
	blobEq := func(b []byte, has bool) bool {
		return has == d.present && bytes.Equal(b, d.blob)
	}
	accEq := func(acc *icrc3.Account) bool {
		if d.fields == nil {
			return false
		}
		return acc != nil && acc.Equal(d.account())
	}
	switch name {
	case "from_subaccount":
		return blobEq(a.FromSubaccount, a.FromSubaccount != nil)
	case "spender_subaccount":
		return blobEq(a.SpenderSubaccount, a.SpenderSubaccount != nil)
	case "from":
		return accEq(a.From)
	case "to":
		return accEq(a.To)
	case "spender":
		return accEq(a.Spender)
	case "amount":
		amt := a.Amount
		return natEq(&amt)
	case "fee":
		return natEq(a.Fee)
	case "expected_allowance":
		return natEq(a.ExpectedAllowance)
	case "expires_at":
		return u64Eq(a.ExpiresAt)
	case "memo":
		return blobEq(a.Memo, a.HasMemo)
	case "created_at_time":
		ts := a.CreatedAt
		return u64Eq(&ts)
	}
	return false
}

// account reads a decoded Account record.
func (d decodedArg) account() icrc3.Account {
	return icrc3.Account{Owner: d.fields["owner"].owner, Subaccount: d.fields["subaccount"].blob}
}

func (d decodedArg) describe(s *shape) string {
	if !d.present {
		return "null"
	}
	if s.kind == sOpt {
		s = s.elem
	}
	switch s.kind {
	case sNat:
		return d.nat.String()
	case sNat64:
		return fmt.Sprint(d.nat64)
	case sBlob, sSubaccount:
		return fmt.Sprintf("%x", d.blob)
	case sRecord:
		return d.account().String()
	}
	return "?"
}

func describeArg(name string, a *Args) string {
	opt := func(ok bool, s func() string) string {
		if !ok {
			return "null"
		}
		return s()
	}
	switch name {
	case "from_subaccount":
		return opt(a.FromSubaccount != nil, func() string { return fmt.Sprintf("%x", a.FromSubaccount) })
	case "spender_subaccount":
		return opt(a.SpenderSubaccount != nil, func() string { return fmt.Sprintf("%x", a.SpenderSubaccount) })
	case "from":
		return a.From.String()
	case "to":
		return a.To.String()
	case "spender":
		return a.Spender.String()
	case "amount":
		return a.Amount.String()
	case "fee":
		return opt(a.Fee != nil, func() string { return a.Fee.String() })
	case "expected_allowance":
		return opt(a.ExpectedAllowance != nil, func() string { return a.ExpectedAllowance.String() })
	case "expires_at":
		return opt(a.ExpiresAt != nil, func() string { return fmt.Sprint(*a.ExpiresAt) })
	case "memo":
		return opt(a.HasMemo, func() string { return fmt.Sprintf("%x", a.Memo) })
	case "created_at_time":
		return fmt.Sprint(a.CreatedAt)
	}
	return "?"
}
