package icp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"

	"github.com/reconciled/reconciled/icrc3"
)

// AccountID is an ICP AccountIdentifier: SHA-224 of
// "\x0Aaccount-id" ‖ principal ‖ subaccount. It is one-way: a block names
// accounts only by it, so the matcher compares identifiers computed from the
// intent's accounts, never accounts read back from a block.
type AccountID [28]byte

var accountIDDomain = []byte("\x0Aaccount-id")

// NewAccountID computes the identifier of (owner, subaccount). An absent
// subaccount is 32 zero bytes, as the ledger reads it, so an explicit
// all-zero subaccount and none name the same identifier.
func NewAccountID(owner []byte, subaccount []byte) (AccountID, error) {
	var sub [32]byte
	if subaccount != nil {
		if len(subaccount) != 32 {
			return AccountID{}, fmt.Errorf("icp: subaccount of %d bytes, want 32", len(subaccount))
		}
		copy(sub[:], subaccount)
	}
	h := sha256.New224()
	h.Write(accountIDDomain)
	h.Write(owner)
	h.Write(sub[:])
	var id AccountID
	copy(id[:], h.Sum(nil))
	return id, nil
}

// AccountIDOf is the identifier of an ICRC-1 account, as the ICP ledger and
// explorers name it.
func AccountIDOf(a icrc3.Account) (AccountID, error) { return NewAccountID(a.Owner.Raw, a.Subaccount) }

// Checksum is the big-endian CRC32 of the hash that the textual form
// prefixes.
func (a AccountID) Checksum() [4]byte {
	var c [4]byte
	binary.BigEndian.PutUint32(c[:], crc32.ChecksumIEEE(a[:]))
	return c
}

// Address is the 32-byte form: checksum ‖ hash.
func (a AccountID) Address() [32]byte {
	var out [32]byte
	c := a.Checksum()
	copy(out[:4], c[:])
	copy(out[4:], a[:])
	return out
}

// String is the textual form: 64 lower-case hex digits of Address.
func (a AccountID) String() string {
	ad := a.Address()
	return hex.EncodeToString(ad[:])
}

// ParseAccountID reads the textual form and checks its checksum.
func ParseAccountID(s string) (AccountID, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return AccountID{}, fmt.Errorf("icp: account identifier %q: %w", s, err)
	}
	if len(b) != 32 {
		return AccountID{}, fmt.Errorf("icp: account identifier %q has %d bytes, want 32", s, len(b))
	}
	return fromAddress(b)
}

// fromAddress reads a 32-byte checksum ‖ hash, refusing a wrong checksum.
func fromAddress(b []byte) (AccountID, error) {
	var a AccountID
	copy(a[:], b[4:])
	if c := a.Checksum(); string(c[:]) != string(b[:4]) {
		return AccountID{}, fmt.Errorf("icp: account identifier %x: checksum %x, want %x", b, b[:4], c)
	}
	return a, nil
}
