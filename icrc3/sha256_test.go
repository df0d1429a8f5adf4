package icrc3

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"slices"
	"syscall"
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
			want := Hash(sha256.Sum256(b))
			if got := sum256(b); got != want {
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
		want := Hash(sha256.Sum256(b))
		if got := sum256(b); got != want {
			t.Fatalf("length %d: sum256 %s, crypto/sha256 %s", len(b), got, want)
		}
	})
}

// TestSortPairsMatchesBytesOrder holds the map hash's pair sort to plain
// byte order, for both of its algorithms (up to 16 pairs and above), with
// pairs that tie on the first eight bytes, on the whole key hash (a
// repeated key) and on everything.
func TestSortPairsMatchesBytesOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 4000 {
		n := r.IntN(40)
		pairs := make([][64]byte, n)
		for i := range pairs {
			switch j := r.IntN(max(i, 1)); {
			case i > 0 && r.IntN(4) == 0: // shares the first eight bytes
				copy(pairs[i][:8], pairs[j][:8])
				pairs[i][8+r.IntN(56)] = byte(r.Uint32())
			case i > 0 && r.IntN(4) == 0: // the same key
				copy(pairs[i][:32], pairs[j][:32])
				pairs[i][32+r.IntN(32)] = byte(r.Uint32())
			case i > 0 && r.IntN(6) == 0: // the same pair
				pairs[i] = pairs[j]
			default:
				for k := range pairs[i] {
					pairs[i][k] = byte(r.Uint32())
				}
			}
		}
		flat := make([]byte, 0, 64*n)
		for i := range pairs {
			flat = append(flat, pairs[i][:]...)
		}
		slices.SortFunc(pairs, func(a, b [64]byte) int { return bytes.Compare(a[:], b[:]) })
		sortPairs(flat)
		for i := range pairs {
			if !bytes.Equal(flat[i*64:(i+1)*64], pairs[i][:]) {
				t.Fatalf("round %d, %d pairs: pair %d out of order", round, n, i)
			}
		}
	}
}

// TestMapHashMidstate drives the map hash's kept state through repeats and
// changes of the first pair, at every depth it keeps and beyond, with one
// to 24 maps queued before each run, against crypto/sha256: a stale
// state, or a queued map reading a state changed after it was queued,
// would be a wrong block hash.
func TestMapHashMidstate(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	d := newDecoder(nil)
	d.hs = new(pageHashes)
	firsts := make([][]byte, 3)
	for i := range firsts {
		firsts[i] = make([]byte, 64)
		for j := range firsts[i] {
			firsts[i][j] = byte(r.Uint32())
		}
	}
	var identity pairPerm
	for i := range identity {
		identity[i] = uint8(i)
	}
	for round := range 2000 {
		hs := d.hs
		hs.arena = hs.arena[:0]
		var maps [][]byte
		var jobs []compJob
		size := 0
		for range 1 + r.IntN(24) { // past sha256GroupMin at times, so the lanes run them
			n := 1 + r.IntN(9)
			s := make([]byte, 64*n)
			for j := range s {
				s[j] = byte(r.Uint32())
			}
			switch r.IntN(4) {
			case 0, 1: // one of a few first pairs, as the blocks of a page have
				copy(s, firsts[r.IntN(len(firsts))])
			case 2: // a first pair that differs from a kept one in one bit
				copy(s, firsts[r.IntN(len(firsts))])
				s[r.IntN(64)] ^= 1 << r.IntN(8)
			}
			mid := int8(r.IntN(len(d.mid) + 1)) // len(d.mid): none
			if int(mid) == len(d.mid) {
				mid = -1
			}
			off := len(hs.arena)
			hs.arena = append(hs.arena, s...)
			hs.arena = append(hs.arena, make([]byte, 32)...)
			maps = append(maps, s)
			jobs = append(jobs, compJob{off: uint32(off), n: uint32(n), dst: hashRef(off + len(s)), perm: identity, isMap: true, mid: mid})
			size += len(s)
		}
		hs.msgs = make([]byte, size)
		at := 0
		for i := range jobs {
			at = d.batchComp(&jobs[i], at)
		}
		hs.run()
		for i, s := range maps {
			if got, want := *hs.slot(jobs[i].dst), Hash(sha256.Sum256(s)); got != want {
				t.Fatalf("round %d, map %d (slot %d, %d pairs): %s, want %s", round, i, jobs[i].mid, len(s)/64, got, want)
			}
		}
	}
}

// readableUpTo returns a page of random bytes followed by memory that
// faults when read; the mapping goes at the test's end.
func readableUpTo(t *testing.T, r *rand.Rand) []byte {
	t.Helper()
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	for i := range page {
		mem[i] = byte(r.Uint32())
	}
	return mem[:page:page]
}

// TestSame64 holds the map hash's first-pair compare to the array compare,
// for a difference in every byte and bit position.
func TestSame64(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var a [64]byte
	for i := range a {
		a[i] = byte(r.Uint32())
	}
	b := a
	if !same64(&a, b[:]) {
		t.Fatal("equal pairs compare unequal")
	}
	for i := range 64 {
		for bit := range 8 {
			b := a
			b[i] ^= 1 << bit
			if same64(&a, b[:]) {
				t.Fatalf("a difference in byte %d, bit %d goes unseen", i, bit)
			}
		}
	}
}
