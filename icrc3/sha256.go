package icrc3

import (
	"crypto/sha256"
	"encoding/binary"
)

// A block's hash is a dozen SHA-256 sums of messages of 8 to 400 bytes.
// crypto/sha256 spends about as long per call setting up, copying and
// padding its state as it spends compressing a 64-byte block, so on CPUs
// with the SHA extensions the hot path pads on the stack and runs the
// same block rounds as crypto/sha256 itself, which also write the digest.
// Elsewhere it is crypto/sha256; the tests hold them all equal for every
// length. A page's sums mostly go to the sixteen-lane kernel instead
// (sha256batch.go); these take the few left over.

// sha256IV is the initial state; the assembly reads it too.
var sha256IV = [8]uint32{
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
}

// sum256 is sha256.Sum256.
func sum256(b []byte) (out Hash) {
	sum256To(&out, b)
	return out
}

// sum256To writes sha256.Sum256(b) to dst.
func sum256To(dst *Hash, b []byte) {
	if !haveSHANI {
		*dst = sha256.Sum256(b)
		return
	}
	h := sha256IV
	sha256Finish(&h, b, uint64(len(b)), dst)
}

// sha256Finish hashes into out the rest of a message whose state after
// the whole blocks before tail is h; total is the message's length in bytes.
func sha256Finish(h *[8]uint32, tail []byte, total uint64, out *Hash) {
	n := len(tail) &^ 63
	if n > 0 {
		sha256Blocks(h, tail[:n])
	}
	// Most messages end in one padded block: it alone is zeroed and copied.
	if rest := tail[n:]; len(rest) < 56 {
		var pad [64]byte
		copy(pad[:], rest)
		pad[len(rest)] = 0x80
		binary.BigEndian.PutUint64(pad[56:], total<<3)
		sha256BlocksDigest(h, pad[:], out)
	} else {
		var pad [128]byte
		copy(pad[:], rest)
		pad[len(rest)] = 0x80
		binary.BigEndian.PutUint64(pad[120:], total<<3)
		sha256BlocksDigest(h, pad[:], out)
	}
}
