package icrc3

import (
	"errors"
	"fmt"
	"math/big"
	"math/bits"
)

// Nat is an arbitrary-precision natural number. ICRC-1 amounts are Candid
// `nat` (ckETH amounts exceed 2^64), yet nearly every value on a ledger fits in
// 64 bits, so values below 2^64 are held inline and never allocate.
type Nat struct {
	lo  uint64
	big *big.Int // non-nil iff the value is >= 2^64; never mutated after construction
}

// NatFromUint64 returns n as a Nat.
func NatFromUint64(n uint64) Nat { return Nat{lo: n} }

// NatFromBig returns b as a Nat; b must not be negative. b is copied.
func NatFromBig(b *big.Int) (Nat, error) {
	if b == nil {
		return Nat{}, errors.New("icrc3: nil nat")
	}
	if b.Sign() < 0 {
		return Nat{}, fmt.Errorf("icrc3: negative nat %s", b)
	}
	if b.IsUint64() {
		return Nat{lo: b.Uint64()}, nil
	}
	return Nat{big: new(big.Int).Set(b)}, nil
}

// ParseNat parses a decimal string with no sign, no leading '+', no spaces and
// no leading zeros (other than "0" itself): the only form the wire formats use.
func ParseNat(s string) (Nat, error) {
	if s == "" {
		return Nat{}, errors.New("icrc3: empty nat")
	}
	if len(s) > 1 && s[0] == '0' {
		return Nat{}, fmt.Errorf("icrc3: nat %q has a leading zero", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return Nat{}, fmt.Errorf("icrc3: nat %q is not a decimal number", s)
		}
	}
	if len(s) <= 19 {
		var v uint64
		for i := 0; i < len(s); i++ {
			v = v*10 + uint64(s[i]-'0')
		}
		return Nat{lo: v}, nil
	}
	b, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return Nat{}, fmt.Errorf("icrc3: nat %q is not a decimal number", s)
	}
	return NatFromBig(b)
}

// Uint64 returns the value and whether it fits in 64 bits.
func (n Nat) Uint64() (uint64, bool) {
	if n.big != nil {
		return 0, false
	}
	return n.lo, true
}

// Big returns the value as a new big.Int.
func (n Nat) Big() *big.Int {
	if n.big != nil {
		return new(big.Int).Set(n.big)
	}
	return new(big.Int).SetUint64(n.lo)
}

// Cmp compares n and m, returning -1, 0 or +1.
func (n Nat) Cmp(m Nat) int {
	switch {
	case n.big == nil && m.big == nil:
		switch {
		case n.lo < m.lo:
			return -1
		case n.lo > m.lo:
			return 1
		}
		return 0
	case n.big == nil:
		return -1
	case m.big == nil:
		return 1
	}
	return n.big.Cmp(m.big)
}

// Equal reports whether n == m.
func (n Nat) Equal(m Nat) bool { return n.Cmp(m) == 0 }

// IsZero reports whether n == 0.
func (n Nat) IsZero() bool { return n.big == nil && n.lo == 0 }

// String returns the decimal form.
func (n Nat) String() string {
	if n.big != nil {
		return n.big.String()
	}
	return fmt.Sprint(n.lo)
}

// MarshalText encodes n as a decimal string (JSON: a string, since values can exceed 2^53).
func (n Nat) MarshalText() ([]byte, error) { return []byte(n.String()), nil }

// UnmarshalText parses a decimal string.
func (n *Nat) UnmarshalText(b []byte) error {
	v, err := ParseNat(string(b))
	if err != nil {
		return err
	}
	*n = v
	return nil
}

// AppendLEB128 appends the unsigned LEB128 encoding of n to dst.
func (n Nat) AppendLEB128(dst []byte) []byte {
	if n.big == nil {
		return AppendUvarint(dst, n.lo)
	}
	return appendBigLEB128(dst, n.big)
}

// AppendUvarint appends the unsigned LEB128 encoding of v.
func AppendUvarint(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

func appendBigLEB128(dst []byte, b *big.Int) []byte {
	words := b.Bits()
	nbits := b.BitLen()
	if nbits == 0 {
		return append(dst, 0)
	}
	for pos := 0; pos < nbits; pos += 7 {
		var group uint64
		for k := 0; k < 7; k++ {
			bit := pos + k
			if bit >= nbits {
				break
			}
			w := words[bit/bits.UintSize]
			group |= uint64((w>>(uint(bit)%bits.UintSize))&1) << k
		}
		if pos+7 < nbits {
			group |= 0x80
		}
		dst = append(dst, byte(group))
	}
	return dst
}

// AppendSLEB128 appends the signed LEB128 encoding of i.
func AppendSLEB128(dst []byte, i *big.Int) []byte {
	if i.IsInt64() {
		v := i.Int64()
		for {
			b := byte(v & 0x7f)
			v >>= 7
			if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
				return append(dst, b)
			}
			dst = append(dst, b|0x80)
		}
	}
	v := new(big.Int).Set(i)
	mask := big.NewInt(0x7f)
	t := new(big.Int)
	for {
		b := byte(t.And(v, mask).Uint64())
		v.Rsh(v, 7) // arithmetic shift for negative values (floor division)
		if (v.Sign() == 0 && b&0x40 == 0) || (v.Cmp(big.NewInt(-1)) == 0 && b&0x40 != 0) {
			return append(dst, b)
		}
		dst = append(dst, b|0x80)
	}
}
