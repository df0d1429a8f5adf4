package icrc3

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// bothSHA256Paths runs f with the sixteen-lane kernel (where the CPU has
// it) and with the sequential path forced.
func bothSHA256Paths(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	t.Logf("sixteen-lane kernel available: %v", haveBatchSHA)
	for _, lanes := range []bool{true, false} {
		name := "sequential"
		if lanes {
			name = "lanes"
		}
		t.Run(name, func(t *testing.T) {
			saved := useBatchSHA
			useBatchSHA = lanes && haveBatchSHA
			defer func() { useBatchSHA = saved }()
			f(t)
		})
	}
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// batchCase is a set of messages; resume[i] > 0 queues message i with
// addFrom after that many whole blocks compressed with sha256Blocks.
type batchCase struct {
	msgs   [][]byte
	resume []int
}

// check runs the case through b and holds every sum to crypto/sha256.
func (c batchCase) check(t *testing.T, b *sha256Batch) {
	t.Helper()
	got := make([]Hash, len(c.msgs))
	for i, m := range c.msgs {
		if k := c.resume[i]; k > 0 {
			h := sha256IV
			sha256Blocks(&h, m[:64*k])
			b.addFrom(&h, m[64*k:], uint64(len(m)), &got[i])
			h = [8]uint32{} // addFrom copies the state
		} else {
			b.add(m, &got[i])
		}
	}
	if b.len() != len(c.msgs) {
		t.Fatalf("len %d after queueing %d", b.len(), len(c.msgs))
	}
	b.run(t)
	if b.len() != 0 {
		t.Fatalf("len %d after run", b.len())
	}
	for i, m := range c.msgs {
		if want := Hash(sha256.Sum256(m)); got[i] != want {
			t.Fatalf("sum %d of %d (length %d, resumed after %d blocks): %s, want %s",
				i, len(c.msgs), len(m), c.resume[i], got[i], want)
		}
	}
}

// mixedCase has n messages of random lengths up to maxLen; with SHA-NI
// (which produces mid-states) about a quarter of those with whole blocks
// are resumed after one to four of them.
func mixedCase(r *rand.Rand, n, maxLen int) batchCase {
	c := batchCase{msgs: make([][]byte, n), resume: make([]int, n)}
	for i := range n {
		c.msgs[i] = randomBytes(r, r.IntN(maxLen+1))
		if blocks := len(c.msgs[i]) / 64; haveSHANI && blocks > 0 && r.IntN(4) == 0 {
			c.resume[i] = 1 + r.IntN(min(blocks, 4))
		}
	}
	return c
}

// TestSHA256BatchEveryLength holds the batch to crypto/sha256 for every
// length from 0 to 300 and a nil message in one batch, in order and
// shuffled.
func TestSHA256BatchEveryLength(t *testing.T) {
	bothSHA256Paths(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(21, 22))
		c := batchCase{resume: make([]int, 302)}
		for n := range 301 {
			c.msgs = append(c.msgs, randomBytes(r, n))
		}
		c.msgs = append(c.msgs, nil) // no memory at all behind it
		var b sha256Batch
		c.check(t, &b)
		r.Shuffle(len(c.msgs), func(i, j int) { c.msgs[i], c.msgs[j] = c.msgs[j], c.msgs[i] })
		c.check(t, &b)
	})
}

// TestSHA256BatchSizes runs batches of every size around the lane count
// and the sequential threshold, with mixed lengths up to 2000 bytes and
// resumed sums, reusing one batch throughout.
func TestSHA256BatchSizes(t *testing.T) {
	bothSHA256Paths(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(23, 24))
		var b sha256Batch
		sizes := []int{0, 1, 15, 16, 17, sha256GroupMin - 1, sha256GroupMin, sha256GroupMin + 1, 100, 1000}
		for _, n := range sizes {
			for _, maxLen := range []int{55, 130, 2000} {
				mixedCase(r, n, maxLen).check(t, &b)
			}
		}
	})
}

// TestSHA256BatchResumed queues only addFrom sums, after one to four
// blocks, with every tail length from 0 to 130.
func TestSHA256BatchResumed(t *testing.T) {
	if !haveSHANI {
		t.Log("no SHA-NI: sha256Blocks, which makes mid-states, is not available")
		return
	}
	bothSHA256Paths(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(25, 26))
		var c batchCase
		for k := 1; k <= 4; k++ {
			for tail := 0; tail <= 130; tail++ {
				c.msgs = append(c.msgs, randomBytes(r, 64*k+tail))
				c.resume = append(c.resume, k)
			}
		}
		var b sha256Batch
		c.check(t, &b)
	})
}

// TestSHA256BatchShapesApart queues messages of 0 to 15 whole blocks with
// tails on either side of the padding boundary, interleaved with short
// and long ones, so that groups of every shape fill at different times,
// the last of each is short of sixteen (idle lanes, or summed one by one)
// and groups are reused from run to run with other messages: a lane given
// another's state, block, rest or length shows up as a wrong sum.
func TestSHA256BatchShapesApart(t *testing.T) {
	bothSHA256Paths(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(27, 28))
		var b sha256Batch
		for round := range 20 {
			c := batchCase{}
			for i := range 16 {
				c.msgs = append(c.msgs, randomBytes(r, 64*i+[]int{0, 30, 55, 56, 63}[(i+round)%5]))
			}
			for range 100 + 20*round {
				c.msgs = append(c.msgs, randomBytes(r, []int{0, 8, 40, 64, 120, 320, 384, 1000}[r.IntN(8)]))
			}
			r.Shuffle(len(c.msgs), func(i, j int) { c.msgs[i], c.msgs[j] = c.msgs[j], c.msgs[i] })
			c.resume = make([]int, len(c.msgs))
			c.check(t, &b)
		}
	})
}

// TestSHA256BatchAtTheEdgeOfMemory ends every message of up to 200 bytes
// exactly where readable memory ends: the kernel's loads of the last bytes
// must neither read nor fault past the message.
func TestSHA256BatchAtTheEdgeOfMemory(t *testing.T) {
	mem := readableUpTo(t, rand.New(rand.NewPCG(29, 30)))
	page := len(mem)
	bothSHA256Paths(t, func(t *testing.T) {
		c := batchCase{}
		for n := 0; n <= 200; n++ {
			// Sixteen of each length fill a group of every shape.
			for range 16 {
				c.msgs = append(c.msgs, mem[page-n:page:page])
			}
		}
		c.resume = make([]int, len(c.msgs))
		b := sha256Batch{within: mem}
		c.check(t, &b)
	})
}

// TestSHA256BatchLeavesInputAndNeighbours checks that run writes only the
// 32 bytes at each destination, at any alignment (the batch's slots put
// them so, among guard bytes): not the bytes after each message (the
// padding is made in registers), which are read in place from one buffer.
func TestSHA256BatchLeavesInputAndNeighbours(t *testing.T) {
	bothSHA256Paths(t, func(t *testing.T) {
		var buf []byte
		var at []int
		for n := range 200 {
			at = append(at, len(buf))
			buf = append(buf, bytes.Repeat([]byte{0xa5}, n+128)...)
		}
		want := bytes.Clone(buf)
		b := sha256Batch{within: buf}
		out := make([]Hash, len(at))
		for n, off := range at {
			b.add(buf[off:off+n], &out[n])
		}
		b.run(t)
		if !bytes.Equal(buf, want) {
			t.Fatalf("run wrote into the messages' buffer")
		}
		for n, off := range at {
			if out[n] != Hash(sha256.Sum256(buf[off:off+n])) {
				t.Fatalf("length %d: wrong sum", n)
			}
		}
	})
}

// TestSHA256GroupLayout holds sha256Group to the offsets sha256x16 reads
// it at (G_H to G_SAVED in its assembly).
func TestSHA256GroupLayout(t *testing.T) {
	var g sha256Group
	got := []uintptr{unsafe.Offsetof(g.h), unsafe.Offsetof(g.full), unsafe.Offsetof(g.rest),
		unsafe.Offsetof(g.bits), unsafe.Offsetof(g.dst), unsafe.Offsetof(g.saved)}
	want := []uintptr{0, 128, 256, 384, 512, 640}
	if !slices.Equal(got, want) {
		t.Fatalf("sha256Group offsets %v, the kernel reads %v", got, want)
	}
}

// TestSHA256BatchReuseAllocatesNothing holds a reused batch to no
// allocation once it has seen a page's worth of sums.
func TestSHA256BatchReuseAllocatesNothing(t *testing.T) {
	bothSHA256Paths(t, func(t *testing.T) {
		c := mixedCase(rand.New(rand.NewPCG(35, 36)), 500, 400)
		dst := make([]Hash, len(c.msgs))
		mids := make([][8]uint32, len(c.msgs))
		for i, m := range c.msgs {
			mids[i] = sha256IV
			if k := c.resume[i]; k > 0 {
				sha256Blocks(&mids[i], m[:64*k])
			}
		}
		var b sha256Batch
		queue := func() {
			for i, m := range c.msgs {
				if k := c.resume[i]; k > 0 {
					b.addFrom(&mids[i], m[64*k:], uint64(len(m)), &dst[i])
				} else {
					b.add(m, &dst[i])
				}
			}
			b.run(nil)
		}
		queue()
		if n := testing.AllocsPerRun(10, queue); n != 0 {
			t.Fatalf("%v allocations a run of a reused batch", n)
		}
		for i, m := range c.msgs {
			if dst[i] != Hash(sha256.Sum256(m)) {
				t.Fatalf("sum %d (length %d) wrong", i, len(m))
			}
		}
	})
}
