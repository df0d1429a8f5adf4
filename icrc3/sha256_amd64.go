//go:build amd64 && !purego

package icrc3

// sha256BlockSHANI runs p's blocks on h; with out not nil it writes the
// final state to out as the digest instead of back to h.
//
//go:noescape
func sha256BlockSHANI(h *[8]uint32, p []byte, out *Hash)

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax uint32)

// haveSHANI reports what the SHA-NI block function needs: SHA, SSSE3,
// SSE4.1 and AVX with the OS saving the XMM and YMM registers (the function
// uses VEX-encoded moves), as crypto/sha256 requires before it uses it.
var haveSHANI = func() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const ssse3, sse41, osxsave, avx = 1 << 9, 1 << 19, 1 << 27, 1 << 28
	if ecx1&(ssse3|sse41|osxsave|avx) != ssse3|sse41|osxsave|avx {
		return false
	}
	if xgetbv()&6 != 6 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<29) != 0
}()

func sha256Blocks(h *[8]uint32, p []byte) { sha256BlockSHANI(h, p, nil) }

func sha256BlocksDigest(h *[8]uint32, p []byte, out *Hash) { sha256BlockSHANI(h, p, out) }
