package icrc3

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"
)

// TestSum256MatchesCryptoSHA256 holds the block hashes' SHA-256 to
// crypto/sha256 for every length up to five blocks and around each
// padding boundary, over random and all-ones bytes.
func TestSum256MatchesCryptoSHA256(t *testing.T) {
	t.Logf("SHA-NI block function in use: %v", haveSHANI)
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1100)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	ones := make([]byte, len(buf))
	for i := range ones {
		ones[i] = 0xff
	}
	for n := 0; n <= len(buf); n++ {
		for _, b := range [][]byte{buf[:n], ones[:n], buf[len(buf)-n:]} {
			if got, want := sum256(b), Hash(sha256.Sum256(b)); got != want {
				t.Fatalf("length %d: sum256 %s, crypto/sha256 %s", n, got, want)
			}
		}
	}
}

// TestSum256DoesNotWriteInput guards the padding: it is built on the
// stack, never in the caller's spare capacity.
func TestSum256DoesNotWriteInput(t *testing.T) {
	for n := 0; n <= 200; n++ {
		b := make([]byte, n, n+128)
		full := b[:cap(b)]
		for i := range full {
			full[i] = 0xa5
		}
		sum256(b)
		for i, c := range full {
			if c != 0xa5 {
				t.Fatalf("length %d: byte %d changed to %#x", n, i, c)
			}
		}
	}
}

func FuzzSum256(f *testing.F) {
	for _, n := range []int{0, 1, 32, 55, 56, 63, 64, 119, 120, 128, 384} {
		f.Add(make([]byte, n))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := sum256(b), Hash(sha256.Sum256(b)); got != want {
			t.Fatalf("length %d: sum256 %s, crypto/sha256 %s", len(b), got, want)
		}
	})
}
