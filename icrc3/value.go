package icrc3

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
)

// Kind names the variant of an ICRC-3 Value.
type Kind uint8

const (
	KindBlob Kind = iota + 1
	KindText
	KindNat
	KindInt
	KindArray
	KindMap
)

func (k Kind) String() string {
	switch k {
	case KindBlob:
		return "Blob"
	case KindText:
		return "Text"
	case KindNat:
		return "Nat"
	case KindInt:
		return "Int"
	case KindArray:
		return "Array"
	case KindMap:
		return "Map"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Value is the ICRC-3 generic value. The legacy Nat64 variant decodes to a
// KindNat: both hash as LEB128, so the distinction carries no meaning.
type Value struct {
	Kind  Kind
	Bytes []byte   // KindBlob: the bytes; KindText: UTF-8
	Nat   Nat      // KindNat
	Int   *big.Int // KindInt
	Array []Value  // KindArray
	Map   []Field  // KindMap, in the order received (duplicate keys kept, as the standard hashes them)
}

// Field is one entry of a Map value.
type Field struct {
	Key   string
	Value Value
}

// Constructors keep tests and the test ledger terse.
func Blob(b []byte) Value          { return Value{Kind: KindBlob, Bytes: b} }
func Text(s string) Value          { return Value{Kind: KindText, Bytes: []byte(s)} }
func NatValue(n Nat) Value         { return Value{Kind: KindNat, Nat: n} }
func Uint(n uint64) Value          { return Value{Kind: KindNat, Nat: NatFromUint64(n)} }
func IntValue(i *big.Int) Value    { return Value{Kind: KindInt, Int: new(big.Int).Set(i)} }
func ArrayValue(vs ...Value) Value { return Value{Kind: KindArray, Array: vs} }
func MapValue(fs ...Field) Value   { return Value{Kind: KindMap, Map: fs} }
func F(key string, v Value) Field  { return Field{Key: key, Value: v} }

// Text returns the value of a KindText as a string.
func (v Value) Text() string { return string(v.Bytes) }

// Get returns the first field of a Map with the given key.
func (v Value) Get(key string) (Value, bool) {
	for i := range v.Map {
		if v.Map[i].Key == key {
			return v.Map[i].Value, true
		}
	}
	return Value{}, false
}

// Equal reports structural equality (Nat64-vs-Nat is not distinguished).
func (v Value) Equal(w Value) bool {
	if v.Kind != w.Kind {
		return false
	}
	switch v.Kind {
	case KindBlob, KindText:
		return bytes.Equal(v.Bytes, w.Bytes)
	case KindNat:
		return v.Nat.Equal(w.Nat)
	case KindInt:
		return v.Int.Cmp(w.Int) == 0
	case KindArray:
		return slices.EqualFunc(v.Array, w.Array, Value.Equal)
	case KindMap:
		return slices.EqualFunc(v.Map, w.Map, func(a, b Field) bool { return a.Key == b.Key && a.Value.Equal(b.Value) })
	}
	return false
}

// Hash is a SHA-256 digest: a block hash, a phash, a certified tip hash.
type Hash [32]byte

func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// MarshalText encodes the hash as lower-case hex.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText decodes 64 hex digits.
func (h *Hash) UnmarshalText(b []byte) error {
	if len(b) != 64 {
		return fmt.Errorf("icrc3: hash must be 64 hex digits, got %d", len(b))
	}
	_, err := hex.Decode(h[:], b)
	return err
}

// Hash returns the ICRC-3 representation-independent hash of v, exactly as
// the standard's HASHINGVALUES.md defines it (SLEB128 for Int, map pairs
// sorted as 64-byte strings, duplicate keys kept).
func (v Value) Hash() Hash {
	var scratch []byte
	return v.hashInto(&scratch)
}

func (v Value) hashInto(scratch *[]byte) Hash {
	switch v.Kind {
	case KindBlob, KindText:
		return sha256.Sum256(v.Bytes)
	case KindNat:
		var buf [16]byte
		return sha256.Sum256(v.Nat.AppendLEB128(buf[:0]))
	case KindInt:
		var buf [16]byte
		return sha256.Sum256(AppendSLEB128(buf[:0], v.Int))
	case KindArray:
		h := sha256.New()
		for i := range v.Array {
			e := v.Array[i].hashInto(scratch)
			h.Write(e[:])
		}
		var out Hash
		h.Sum(out[:0])
		return out
	case KindMap:
		pairs := make([][64]byte, len(v.Map))
		for i := range v.Map {
			k := sha256.Sum256([]byte(v.Map[i].Key))
			e := v.Map[i].Value.hashInto(scratch)
			copy(pairs[i][:32], k[:])
			copy(pairs[i][32:], e[:])
		}
		slices.SortFunc(pairs, func(a, b [64]byte) int { return bytes.Compare(a[:], b[:]) })
		h := sha256.New()
		for i := range pairs {
			h.Write(pairs[i][:])
		}
		var out Hash
		h.Sum(out[:0])
		return out
	}
	// A zero Kind is a programming error: hash something that can never
	// collide with a real block so a chain check fails loudly.
	return sha256.Sum256([]byte("icrc3: invalid value kind"))
}
