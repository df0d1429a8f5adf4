package icrc3

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/aviate-labs/agent-go/principal"
)

// decode*.go are a purpose-built Candid reader for the block-page replies. It is
// not a general Candid decoder: it knows the few expected types, checks the
// wire types against them by Candid's subtyping rules (extra record fields
// are skipped, an absent opt field reads as null, nat is accepted where int
// is expected), and hashes each ICRC-3 Value while reading it, so a page is
// walked exactly once. agent-go's reflection decoder does the same job over
// thirty times slower (BenchmarkDecodeGetBlocks); the differential tests and
// fuzz targets hold the two to the same output.

// Candid type opcodes (negative SLEB128 values in the type table).
const (
	opNull      = -1
	opBool      = -2
	opNat       = -3
	opInt       = -4
	opNat8      = -5
	opNat16     = -6
	opNat32     = -7
	opNat64     = -8
	opInt8      = -9
	opInt16     = -10
	opInt32     = -11
	opInt64     = -12
	opFloat32   = -13
	opFloat64   = -14
	opText      = -15
	opReserved  = -16
	opEmpty     = -17
	opOpt       = -18
	opVec       = -19
	opRecord    = -20
	opVariant   = -21
	opFunc      = -22
	opService   = -23
	opPrincipal = -24
)

// MaxValueDepth bounds the nesting of a decoded Value (and of any skipped
// value), so hostile input cannot exhaust the stack. DFINITY blocks nest four
// deep.
const MaxValueDepth = 64

// fieldID is Candid's field-name hash: sum of utf8 bytes times 223^k mod 2^32.
func fieldID(name string) uint32 {
	var h uint32
	for i := 0; i < len(name); i++ {
		h = h*223 + uint32(name[i])
	}
	return h
}

var (
	idBlob                  = fieldID("Blob")
	idText                  = fieldID("Text")
	idNat                   = fieldID("Nat")
	idInt                   = fieldID("Int")
	idArray                 = fieldID("Array")
	idMap                   = fieldID("Map")
	idNat64                 = fieldID("Nat64")
	idLogLength             = fieldID("log_length")
	idBlocks                = fieldID("blocks")
	idArchivedBlocks        = fieldID("archived_blocks")
	idID                    = fieldID("id")
	idBlock                 = fieldID("block")
	idArgs                  = fieldID("args")
	idCallback              = fieldID("callback")
	idStart                 = fieldID("start")
	idLength                = fieldID("length")
	idFirstIndex            = fieldID("first_index")
	idChainLength           = fieldID("chain_length")
	idCertificate           = fieldID("certificate")
	idTupleKey       uint32 = 0
	idTupleValue     uint32 = 1
)

type candidField struct {
	id  uint32
	typ int64
}

type candidType struct {
	op     int64
	inner  int64         // opt, vec
	fields []candidField // record, variant: strictly increasing ids
}

// decoder holds one reply's state. buf is the input: what a decoded reply
// keeps is copied out of it (blocks into out, principals and certificates
// one by one), except that the tree reader's Values alias buf, so that
// reader works on a private copy.
type decoder struct {
	buf    []byte
	pos    int
	types  []candidType
	budget int // steps left; bounds work on zero-width values (vec null)

	valueChecked []bool // per type-table index: checked as a Value variant
	scratch      [][]byte
	keys         map[string]keyEntry
	keyCache     [64]keyEntry // direct-mapped in front of keys
	values       []Value      // slab carved into Array payloads
	fields       []Field      // slab carved into Map payloads

	out       []byte       // the blocks' encodings (rawValue), shared by a page
	parts     []blockParts // slab carved into parsed blocks
	partsUsed int          // parts[:partsUsed] are carved
	rp        rawParser
	mid       [2]mapMidstate // per depth: the block map and the tx map
	orders    [2]orderCache  // per depth: the pair orders met

	hs *pageHashes // the page's queued hashes (hashjobs.go)

	keysRepeat bool // rawBlock's last block repeats a key at depth 0 or 1
	badBlock   int  // blockVec: 1 + the first block parse refused, or 0

	// rawBlock's last block: where its encoding starts in out, and the
	// entries of its map and of the Maps directly in it, which parse
	// would otherwise find by walking the encoding again.
	blockStart int
	ents       blockEntries
	entTmp     [2][]rawEntry // per depth: the Map being read
	// First backing for ents and entTmp, enough for any DFINITY block, so
	// recording them costs no allocation of its own.
	entMapsBuf [4]entMap
	entBuf     [3][16]rawEntry

	// tree selects the tree-building block reader (value and parseTree),
	// kept as the oracle of the differential tests; it leaves Raw unset and
	// the blocks' Values in trees.
	tree  bool
	trees []Value
}

type keyEntry struct {
	key  string
	hash Hash
}

func newDecoder(b []byte) *decoder {
	d := &decoder{
		buf:    b,
		budget: 8*len(b) + 1024,
		keys:   make(map[string]keyEntry, 32),
	}
	d.ents.maps = d.entMapsBuf[:0]
	d.ents.slab = d.entBuf[0][:0]
	d.entTmp[0], d.entTmp[1] = d.entBuf[1][:0], d.entBuf[2][:0]
	return d
}

func (d *decoder) errf(format string, args ...any) error {
	return fmt.Errorf("icrc3: candid at byte %d: %s", d.pos, fmt.Sprintf(format, args...))
}

// errWireType marks input that is well-formed Candid of a type that is not
// the expected one, as opposed to malformed Candid.
var errWireType = errors.New("wire type mismatch")

func (d *decoder) typeErrf(format string, args ...any) error {
	return fmt.Errorf("icrc3: candid: %w: %s", errWireType, fmt.Sprintf(format, args...))
}

func (d *decoder) remaining() int { return len(d.buf) - d.pos }

func (d *decoder) byte1() (byte, error) {
	if d.pos >= len(d.buf) {
		return 0, d.errf("unexpected end of input")
	}
	c := d.buf[d.pos]
	d.pos++
	return c, nil
}

func (d *decoder) take(n uint64) ([]byte, error) {
	if n > uint64(d.remaining()) {
		return nil, d.errf("length %d exceeds the %d bytes left", n, d.remaining())
	}
	s := d.buf[d.pos : d.pos+int(n) : d.pos+int(n)]
	d.pos += int(n)
	return s, nil
}

// uleb reads an unsigned LEB128 that must fit in 64 bits.
func (d *decoder) uleb() (uint64, error) {
	// Variant tags and most lengths are a single byte.
	if d.pos < len(d.buf) && d.buf[d.pos] < 0x80 {
		d.pos++
		return uint64(d.buf[d.pos-1]), nil
	}
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c, err := d.byte1()
		if err != nil {
			return 0, err
		}
		if shift == 63 && c > 1 {
			return 0, d.errf("LEB128 value overflows 64 bits")
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
		if shift == 63 {
			return 0, d.errf("LEB128 value overflows 64 bits")
		}
	}
}

// sleb reads a signed LEB128 that must fit in 64 bits (type opcodes, indices).
func (d *decoder) sleb() (int64, error) {
	var v int64
	var shift uint
	for {
		c, err := d.byte1()
		if err != nil {
			return 0, err
		}
		if shift >= 63 && !(c == 0 || c == 0x7f) {
			return 0, d.errf("SLEB128 value overflows 64 bits")
		}
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c < 0x80 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
		if shift > 70 {
			return 0, d.errf("SLEB128 value overflows 64 bits")
		}
	}
}

// count reads a length prefix and rejects it unless each of the n items could
// still take at least minSize bytes, so no slice is sized from an unchecked
// prefix.
func (d *decoder) count(minSize int) (int, error) {
	n, err := d.uleb()
	if err != nil {
		return 0, err
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(d.remaining()/minSize) {
		return 0, d.errf("vector length %d exceeds the %d bytes left", n, d.remaining())
	}
	return int(n), nil
}

// leb returns the raw bytes of one unsigned or signed LEB128 number.
func (d *decoder) leb() ([]byte, error) {
	start := d.pos
	for i := start; i < len(d.buf); i++ {
		if d.buf[i] < 0x80 {
			d.pos = i + 1
			return d.buf[start:d.pos], nil
		}
	}
	d.pos = len(d.buf)
	_, err := d.byte1() // the end-of-input error, at the end
	return nil, err
}

func (d *decoder) readHeader() (int64, error) {
	if !bytes.HasPrefix(d.buf, []byte("DIDL")) {
		return 0, d.errf("missing DIDL magic")
	}
	d.pos = 4
	n, err := d.uleb()
	if err != nil {
		return 0, fmt.Errorf("type table length: %w", err)
	}
	if n > uint64(d.remaining()) {
		return 0, d.errf("type table length %d exceeds input", n)
	}
	d.types = make([]candidType, n)
	for i := range d.types {
		if err := d.readTypeEntry(&d.types[i]); err != nil {
			return 0, fmt.Errorf("type %d: %w", i, err)
		}
	}
	for i := range d.types {
		if err := d.checkRefs(&d.types[i]); err != nil {
			return 0, fmt.Errorf("type %d: %w", i, err)
		}
	}
	d.valueChecked = make([]bool, n)
	argc, err := d.uleb()
	if err != nil {
		return 0, fmt.Errorf("argument count: %w", err)
	}
	if argc != 1 {
		return 0, d.typeErrf("reply carries %d values, want 1", argc)
	}
	ref, err := d.sleb()
	if err != nil {
		return 0, err
	}
	if !d.validRef(ref) {
		return 0, d.errf("invalid type reference %d", ref)
	}
	return ref, nil
}

func (d *decoder) readTypeEntry(t *candidType) error {
	op, err := d.sleb()
	if err != nil {
		return err
	}
	t.op = op
	switch op {
	case opOpt, opVec:
		t.inner, err = d.sleb()
		return err
	case opRecord, opVariant:
		n, err := d.count(2)
		if err != nil {
			return err
		}
		t.fields = make([]candidField, n)
		for i := range t.fields {
			id, err := d.uleb()
			if err != nil {
				return err
			}
			if id > math.MaxUint32 {
				return d.errf("field id %d out of range", id)
			}
			if i > 0 && uint32(id) <= t.fields[i-1].id {
				return d.errf("field ids not strictly increasing: %d after %d", id, t.fields[i-1].id)
			}
			typ, err := d.sleb()
			if err != nil {
				return err
			}
			t.fields[i] = candidField{id: uint32(id), typ: typ}
		}
		return nil
	case opFunc:
		// Argument and result types are read but not compared: a callback is
		// only ever called back through its own canister's interface.
		for range 2 {
			n, err := d.count(1)
			if err != nil {
				return err
			}
			for range n {
				ref, err := d.sleb()
				if err != nil {
					return err
				}
				t.fields = append(t.fields, candidField{typ: ref})
			}
		}
		n, err := d.count(1)
		if err != nil {
			return err
		}
		anns, _ := d.take(uint64(n))
		for _, a := range anns {
			if a < 1 || a > 3 {
				return d.errf("unknown func annotation %d", a)
			}
		}
		return nil
	case opService:
		n, err := d.count(2)
		if err != nil {
			return err
		}
		for range n {
			l, err := d.uleb()
			if err != nil {
				return err
			}
			name, err := d.take(l)
			if err != nil {
				return err
			}
			if !utf8.Valid(name) {
				return d.errf("service method name is not UTF-8")
			}
			ref, err := d.sleb()
			if err != nil {
				return err
			}
			t.fields = append(t.fields, candidField{typ: ref})
		}
		return nil
	}
	if op < opPrincipal {
		// A future type: its definition is length-prefixed and skipped.
		l, err := d.uleb()
		if err != nil {
			return err
		}
		_, err = d.take(l)
		return err
	}
	return d.typeErrf("opcode %d is not a type constructor", op)
}

func (d *decoder) validRef(ref int64) bool {
	if ref >= 0 {
		return ref < int64(len(d.types))
	}
	return (ref <= opNull && ref >= opEmpty) || ref == opPrincipal
}

func (d *decoder) checkRefs(t *candidType) error {
	switch t.op {
	case opOpt, opVec:
		if !d.validRef(t.inner) {
			return d.errf("invalid type reference %d", t.inner)
		}
	case opRecord, opVariant, opFunc:
		for _, f := range t.fields {
			if !d.validRef(f.typ) {
				return d.errf("invalid type reference %d", f.typ)
			}
		}
	case opService:
		for _, f := range t.fields {
			if f.typ < 0 || f.typ >= int64(len(d.types)) || d.types[f.typ].op != opFunc {
				return d.errf("service method type %d is not a func", f.typ)
			}
		}
	}
	return nil
}

// op returns the constructor of a type reference.
func (d *decoder) op(ref int64) int64 {
	if ref >= 0 {
		return d.types[ref].op
	}
	return ref
}

func (d *decoder) isBlob(ref int64) bool {
	return ref >= 0 && d.types[ref].op == opVec && d.types[ref].inner == opNat8
}

func (d *decoder) record(ref int64, what string) (*candidType, error) {
	if ref < 0 || d.types[ref].op != opRecord {
		return nil, d.typeErrf("%s: wire type is not a record", what)
	}
	return &d.types[ref], nil
}

func (d *decoder) vecOf(ref int64, what string) (int64, error) {
	if ref < 0 || d.types[ref].op != opVec {
		return 0, d.typeErrf("%s: wire type is not a vec", what)
	}
	return d.types[ref].inner, nil
}

// missing reports the first expected field id absent from a record type.
func missing(t *candidType, ids ...uint32) (uint32, bool) {
	for _, id := range ids {
		if _, ok := slices.BinarySearchFunc(t.fields, id, func(f candidField, id uint32) int {
			switch {
			case f.id < id:
				return -1
			case f.id > id:
				return 1
			}
			return 0
		}); !ok {
			return id, true
		}
	}
	return 0, false
}

// skip reads past one value of any wire type; it is how fields the expected
// type does not name are ignored.
func (d *decoder) skip(ref int64, depth int) error {
	if depth >= 2*MaxValueDepth {
		return d.errf("value nested deeper than %d", 2*MaxValueDepth)
	}
	if err := d.spend(); err != nil {
		return err
	}
	var err error
	switch ref {
	case opNull, opReserved:
		return nil
	case opBool:
		c, err := d.byte1()
		if err == nil && c > 1 {
			err = d.errf("invalid bool %d", c)
		}
		return err
	case opNat, opInt:
		_, err = d.leb()
	case opNat8, opInt8:
		_, err = d.take(1)
	case opNat16, opInt16:
		_, err = d.take(2)
	case opNat32, opInt32, opFloat32:
		_, err = d.take(4)
	case opNat64, opInt64, opFloat64:
		_, err = d.take(8)
	case opText:
		l, err := d.uleb()
		if err != nil {
			return err
		}
		b, err := d.take(l)
		if err == nil && !utf8.Valid(b) {
			err = d.errf("text is not valid UTF-8")
		}
		return err
	case opEmpty:
		return d.errf("a value of type empty cannot exist")
	case opPrincipal:
		_, err = d.principal()
	default:
		return d.skipComposite(ref, depth)
	}
	return err
}

func (d *decoder) skipComposite(ref int64, depth int) error {
	t := &d.types[ref]
	switch t.op {
	case opOpt:
		c, err := d.byte1()
		if err != nil {
			return err
		}
		switch c {
		case 0:
			return nil
		case 1:
			return d.skip(t.inner, depth+1)
		}
		return d.errf("invalid opt flag %d", c)
	case opVec:
		n, err := d.uleb()
		if err != nil {
			return err
		}
		// As agent-go does: no element is narrower than a byte for the
		// length check, and zero-width elements are paid for from the budget.
		if n > uint64(d.remaining()) {
			return d.errf("vector length %d exceeds the %d bytes left", n, d.remaining())
		}
		if t.inner == opNat8 || t.inner == opInt8 {
			_, err := d.take(n)
			return err
		}
		for range n {
			if err := d.skip(t.inner, depth+1); err != nil {
				return err
			}
		}
		return nil
	case opRecord:
		for _, f := range t.fields {
			if err := d.skip(f.typ, depth+1); err != nil {
				return err
			}
		}
		return nil
	case opVariant:
		tag, err := d.uleb()
		if err != nil {
			return err
		}
		if tag >= uint64(len(t.fields)) {
			return d.errf("variant index %d out of range", tag)
		}
		return d.skip(t.fields[tag].typ, depth+1)
	case opFunc:
		_, err := d.funcRef()
		return err
	case opService:
		_, err := d.principal()
		return err
	}
	// A future type's value is self-delimiting: a byte count, a reference
	// count (references travel out of band), then the bytes.
	m, err := d.uleb()
	if err != nil {
		return err
	}
	if _, err := d.uleb(); err != nil {
		return err
	}
	_, err = d.take(m)
	return err
}

func (d *decoder) principal() ([]byte, error) {
	c, err := d.byte1()
	if err != nil {
		return nil, err
	}
	if c != 1 {
		return nil, d.errf("opaque or invalid principal reference %d", c)
	}
	l, err := d.uleb()
	if err != nil {
		return nil, err
	}
	return d.take(l)
}

func (d *decoder) funcRef() (Callback, error) {
	c, err := d.byte1()
	if err != nil {
		return Callback{}, err
	}
	if c != 1 {
		return Callback{}, d.errf("opaque or invalid func reference %d", c)
	}
	p, err := d.principal()
	if err != nil {
		return Callback{}, err
	}
	l, err := d.uleb()
	if err != nil {
		return Callback{}, err
	}
	m, err := d.take(l)
	if err != nil {
		return Callback{}, err
	}
	if !utf8.Valid(m) {
		return Callback{}, d.errf("method name is not valid UTF-8")
	}
	return Callback{Canister: principal.Principal{Raw: bytes.Clone(p)}, Method: string(m)}, nil
}

func (d *decoder) finish() error {
	if d.pos != len(d.buf) {
		return d.errf("%d trailing bytes", len(d.buf)-d.pos)
	}
	return nil
}
