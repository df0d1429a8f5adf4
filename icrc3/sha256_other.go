//go:build !amd64 || purego

package icrc3

const haveSHANI = false

func sha256Blocks(*[8]uint32, []byte) { panic("icrc3: no SHA-256 block function on this platform") }

func sha256BlocksDigest(*[8]uint32, []byte, *Hash) {
	panic("icrc3: no SHA-256 block function on this platform")
}

const haveBatchSHA = false

func sha256x16(*sha256Group, int, int, bool) {
	panic("icrc3: no SHA-256 block function on this platform")
}
