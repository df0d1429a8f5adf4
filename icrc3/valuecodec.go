package icrc3

import (
	"errors"
	"fmt"
)

// The block cache stores Values in a compact binary form rather than Candid:
// no type table, no field-id hashing, and a version byte so the format can
// change without misreading old rows.
//
//	value   = kind:byte payload
//	Blob    = uvarint(len) bytes        Text = uvarint(len) bytes
//	Nat     = LEB128                    Int  = SLEB128
//	Array   = uvarint(n) value*n        Map  = uvarint(n) (uvarint(len) key value)*n
const valueCodecV1 = 1

// ValueCodecV1 is the version byte MarshalValue writes first, for a writer
// of the same format that does not build a Value (the ICP family's
// conversion); its output must equal MarshalValue's byte for byte.
const ValueCodecV1 = valueCodecV1

// MarshalValue encodes v for the block cache.
func MarshalValue(v Value) []byte {
	return appendValue([]byte{valueCodecV1}, v)
}

func appendValue(dst []byte, v Value) []byte {
	dst = append(dst, byte(v.Kind))
	switch v.Kind {
	case KindBlob, KindText:
		dst = AppendUvarint(dst, uint64(len(v.Bytes)))
		dst = append(dst, v.Bytes...)
	case KindNat:
		dst = v.Nat.AppendLEB128(dst)
	case KindInt:
		dst = AppendSLEB128(dst, v.Int)
	case KindArray:
		dst = AppendUvarint(dst, uint64(len(v.Array)))
		for i := range v.Array {
			dst = appendValue(dst, v.Array[i])
		}
	case KindMap:
		dst = AppendUvarint(dst, uint64(len(v.Map)))
		for i := range v.Map {
			dst = AppendUvarint(dst, uint64(len(v.Map[i].Key)))
			dst = append(dst, v.Map[i].Key...)
			dst = appendValue(dst, v.Map[i].Value)
		}
	}
	return dst
}

// UnmarshalValue decodes what MarshalValue produced. The result does not
// alias b.
func UnmarshalValue(b []byte) (Value, error) {
	if len(b) == 0 {
		return Value{}, errors.New("icrc3: unmarshal value: empty input")
	}
	if b[0] != valueCodecV1 {
		return Value{}, fmt.Errorf("icrc3: unmarshal value: unknown format version %d", b[0])
	}
	d := &decoder{buf: append([]byte(nil), b...), pos: 1}
	v, err := d.codecValue(0)
	if err != nil {
		return Value{}, fmt.Errorf("icrc3: unmarshal value: %w", err)
	}
	if err := d.finish(); err != nil {
		return Value{}, fmt.Errorf("icrc3: unmarshal value: %w", err)
	}
	return v, nil
}

func (d *decoder) codecValue(depth int) (Value, error) {
	if depth >= MaxValueDepth {
		return Value{}, d.errf("value nested deeper than %d", MaxValueDepth)
	}
	k, err := d.byte1()
	if err != nil {
		return Value{}, err
	}
	switch Kind(k) {
	case KindBlob, KindText:
		b, err := d.blob()
		return Value{Kind: Kind(k), Bytes: b}, err
	case KindNat:
		raw, err := d.leb()
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: KindNat, Nat: natFromLEB(raw)}, nil
	case KindInt:
		i, err := d.int()
		return Value{Kind: KindInt, Int: i}, err
	case KindArray:
		n, err := d.count(2)
		if err != nil {
			return Value{}, err
		}
		vs := make([]Value, n)
		for i := range vs {
			if vs[i], err = d.codecValue(depth + 1); err != nil {
				return Value{}, err
			}
		}
		return Value{Kind: KindArray, Array: vs}, nil
	case KindMap:
		n, err := d.count(3)
		if err != nil {
			return Value{}, err
		}
		fs := make([]Field, n)
		for i := range fs {
			key, err := d.blob()
			if err != nil {
				return Value{}, err
			}
			fs[i].Key = string(key)
			if fs[i].Value, err = d.codecValue(depth + 1); err != nil {
				return Value{}, err
			}
		}
		return Value{Kind: KindMap, Map: fs}, nil
	}
	return Value{}, d.errf("unknown value kind %d", k)
}
