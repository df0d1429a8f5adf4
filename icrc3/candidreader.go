package icrc3

import "fmt"

// CandidReader is the bounded Candid decoder the ICRC-3 pages are read
// with (decode.go), for the replies of a ledger family whose blocks are
// not ICRC-3 Values (the ICP ledger's, package icp): it reads one reply,
// checks wire types against the expected ones, and bounds every length by
// the bytes left, nesting by MaxValueDepth and work on zero-width values by
// a budget, so hostile input costs no more than its size. It offers the few
// operations such replies need; the caller reads the reply's values in
// wire order, each once. A CandidType it is given that the reply does not
// define reads as a type mismatch, never out of the type table.
type CandidReader struct{ d *decoder }

// defined reports whether t is a type of the reply's table or a primitive.
func (r *CandidReader) defined(t CandidType) bool { return r.d.validRef(int64(t)) }

func (r *CandidReader) undefined(t CandidType, what string) error {
	return r.d.typeErrf("%s: type %d is not the reply's", what, t)
}

// CandidType is a type of the reply: an index into its type table, or a
// primitive type's opcode.
type CandidType int64

// CandidField is one field of a record or variant type, in wire order (by
// ID, CandidFieldID of its name).
type CandidField struct {
	ID   uint32
	Type CandidType
}

// NewCandidReader reads reply.
func NewCandidReader(reply []byte) *CandidReader { return &CandidReader{d: newDecoder(reply)} }

// CandidFieldID is Candid's hash of a field name.
func CandidFieldID(name string) uint32 { return fieldID(name) }

// Header reads the type table and returns the type of the reply's one
// value.
func (r *CandidReader) Header() (CandidType, error) {
	ref, err := r.d.readHeader()
	return CandidType(ref), err
}

// Record returns the fields of record type t, having checked that t is a
// record holding every field named in required; what names the value in
// errors.
func (r *CandidReader) Record(t CandidType, what string, required ...string) ([]CandidField, error) {
	if !r.defined(t) {
		return nil, r.undefined(t, what)
	}
	rec, err := r.d.record(int64(t), what)
	if err == nil {
		err = r.d.requireFields(rec, what, required...)
	}
	if err != nil {
		return nil, err
	}
	return fieldsOf(rec), nil
}

// Variant reads the arm of a value of variant type t and returns that
// arm's field.
func (r *CandidReader) Variant(t CandidType, what string) (CandidField, error) {
	if !r.defined(t) || t < 0 || r.d.types[t].op != opVariant {
		return CandidField{}, r.d.typeErrf("%s: wire type is not a variant", what)
	}
	vt := &r.d.types[t]
	arm, err := r.d.uleb()
	if err == nil && arm >= uint64(len(vt.fields)) {
		err = r.d.errf("variant arm %d of %d", arm, len(vt.fields))
	}
	if err != nil {
		return CandidField{}, err
	}
	f := vt.fields[arm]
	return CandidField{ID: f.id, Type: CandidType(f.typ)}, nil
}

func fieldsOf(t *candidType) []CandidField {
	fs := make([]CandidField, len(t.fields))
	for i, f := range t.fields {
		fs[i] = CandidField{ID: f.id, Type: CandidType(f.typ)}
	}
	return fs
}

// VecOf is the element type of vec type t.
func (r *CandidReader) VecOf(t CandidType, what string) (CandidType, error) {
	if !r.defined(t) {
		return 0, r.undefined(t, what)
	}
	inner, err := r.d.vecOf(int64(t), what)
	return CandidType(inner), err
}

// IsBlob reports whether t is vec nat8.
func (r *CandidReader) IsBlob(t CandidType) bool { return r.defined(t) && r.d.isBlob(int64(t)) }

// IsNat64 reports whether t is nat64.
func (r *CandidReader) IsNat64(t CandidType) bool { return t == opNat64 }

// IsFunc reports whether t is a func reference type.
func (r *CandidReader) IsFunc(t CandidType) bool { return r.defined(t) && r.d.op(int64(t)) == opFunc }

// Count reads a vector's length, refused unless each of its items could
// still take at least minSize bytes of the reply.
func (r *CandidReader) Count(minSize int) (int, error) { return r.d.count(minSize) }

// Blob reads a vec nat8 value. It aliases the reply.
func (r *CandidReader) Blob() ([]byte, error) { return r.d.blob() }

// OptBlob reads a value of type t expected to be `opt blob` by Candid's
// rules for opt: null, reserved and any wire type that is not a blob read
// as nil; a bare blob reads as present. It aliases the reply.
func (r *CandidReader) OptBlob(t CandidType) ([]byte, error) {
	if !r.defined(t) {
		return nil, r.undefined(t, "opt blob")
	}
	return r.d.optBlob(int64(t))
}

// Nat64 reads a nat64 value.
func (r *CandidReader) Nat64() (uint64, error) {
	b, err := r.d.take(8)
	if err != nil {
		return 0, err
	}
	return le64(b), nil
}

// Func reads a func reference value: the canister and method it names.
func (r *CandidReader) Func() (Callback, error) { return r.d.funcRef() }

// Skip reads past a value of type t that lies depth values deep in the
// reply (0 for the reply's own fields): a field the caller does not read.
func (r *CandidReader) Skip(t CandidType, depth int) error {
	if !r.defined(t) {
		return r.undefined(t, "skipped value")
	}
	return r.d.skip(int64(t), depth)
}

// Finish fails unless the whole reply was read.
func (r *CandidReader) Finish() error { return r.d.finish() }

// TypeErrorf is an error of a reply that is well-formed Candid of another
// type than the expected one.
func (r *CandidReader) TypeErrorf(format string, args ...any) error {
	return r.d.typeErrf("%s", fmt.Sprintf(format, args...))
}
