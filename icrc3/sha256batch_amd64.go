//go:build amd64 && !purego

package icrc3

// sha256x16 computes the sixteen sums of grp, each of nfull whole blocks and
// npad padded ones; iv says every lane starts from the initial state.
//
//go:noescape
func sha256x16(grp *sha256Group, nfull, npad int, iv bool)

// haveBatchSHA reports what sha256x16 needs: AVX-512 F, BW and VL with the
// OS saving the opmask and ZMM registers.
var haveBatchSHA = func() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const osxsave = 1 << 27
	if ecx1&osxsave == 0 || xgetbv()&0xe6 != 0xe6 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const avx512f, avx512bw, avx512vl = 1 << 16, 1 << 30, 1 << 31
	return ebx7&(avx512f|avx512bw|avx512vl) == avx512f|avx512bw|avx512vl
}()
