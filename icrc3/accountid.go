package icrc3

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
)

// ICPAccountID is the ICP ledger's account identifier of a: CRC32 (big
// endian) of SHA-224("\x0Aaccount-id" ‖ owner ‖ subaccount) followed by that
// hash, with 32 zero bytes for an absent subaccount. It is the 64-hex
// "account id" that the ICP ledger's own interface and explorers show.
func (a Account) ICPAccountID() [32]byte {
	h := sha256.New224()
	h.Write([]byte("\x0Aaccount-id"))
	h.Write(a.Owner.Raw)
	sub := a.Subaccount
	if len(sub) == 0 {
		sub = make([]byte, 32)
	}
	h.Write(sub)
	var out [32]byte
	sum := h.Sum(out[4:4])
	binary.BigEndian.PutUint32(out[:4], crc32.ChecksumIEEE(sum))
	return out
}

// ICPAccountIDHex is ICPAccountID in lower-case hex.
func (a Account) ICPAccountIDHex() string {
	id := a.ICPAccountID()
	return hex.EncodeToString(id[:])
}

// ICPAddress is the textual account identifier of a 28-byte account hash:
// its CRC32 followed by the hash, in hex.
func ICPAddress(hash28 []byte) string {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(hash28)), crc32.ChecksumIEEE(hash28))
	return hex.EncodeToString(append(out, hash28...))
}
