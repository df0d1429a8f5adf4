package icrc3

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// blockLikeSums is the SHA-256 work of n blocks' hashes: per block 13
// leaves of 8 to 40 bytes, two arrays of two hashes (64 bytes) and maps of
// 384 and 320 bytes. It returns the messages and their compressions.
func blockLikeSums(r *rand.Rand, n int) ([][]byte, int) {
	var msgs [][]byte
	compressions := 0
	for range n {
		lens := []int{64, 64, 384, 320}
		for range 13 {
			lens = append(lens, 8+r.IntN(33))
		}
		r.Shuffle(len(lens), func(i, j int) { lens[i], lens[j] = lens[j], lens[i] })
		for _, l := range lens {
			msgs = append(msgs, randomBytes(r, l))
			compressions += (l+8)/64 + 1
		}
	}
	return msgs, compressions
}

// sumMode is how benchSums computes its sums.
type sumMode int

const (
	sumEach  sumMode = iota // sum256To one by one
	sumBatch                // queued in a sha256Batch
)

func benchSums(b *testing.B, msgs [][]byte, compressions int, mode sumMode) {
	dst := make([]Hash, len(msgs))
	var q sha256Batch
	b.ResetTimer()
	for range b.N {
		switch mode {
		case sumBatch:
			for i, m := range msgs {
				q.add(m, &dst[i])
			}
			q.run(nil)
		default:
			for i, m := range msgs {
				sum256To(&dst[i], m)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(compressions), "ns/compression")
}

// BenchmarkSHA256Batch compares the sums of 64 blocks' hashes one by one
// (seq) with the same sums queued in one batch, which also copies them
// into its buffer on every run.
func BenchmarkSHA256Batch(b *testing.B) {
	msgs, compressions := blockLikeSums(rand.New(rand.NewPCG(31, 32)), 64)
	b.Run("seq", func(b *testing.B) { benchSums(b, msgs, compressions, sumEach) })
	b.Run("batch", func(b *testing.B) { benchSums(b, msgs, compressions, sumBatch) })
}

// BenchmarkSHA256BatchSize measures groups short of sixteen sums of one
// shape (leaves of 8 to 40 bytes, arrays of two hashes, maps of six
// pairs), the lanes forced on at every size, to place sha256GroupMin.
func BenchmarkSHA256BatchSize(b *testing.B) {
	r := rand.New(rand.NewPCG(33, 34))
	for _, shape := range []struct {
		name string
		min  int
		max  int
	}{{"leaf", 8, 40}, {"pair", 64, 64}, {"map", 384, 384}} {
		for _, n := range []int{2, 4, 6, 7, 8, 9, 10, 12, 16} {
			msgs := make([][]byte, n)
			compressions := 0
			for i := range msgs {
				msgs[i] = randomBytes(r, shape.min+r.IntN(shape.max-shape.min+1))
				compressions += (len(msgs[i])+8)/64 + 1
			}
			b.Run(fmt.Sprintf("%s/n=%d/seq", shape.name, n), func(b *testing.B) { benchSums(b, msgs, compressions, sumEach) })
			b.Run(fmt.Sprintf("%s/n=%d/batch", shape.name, n), func(b *testing.B) {
				saved := sha256GroupMinFor
				sha256GroupMinFor = 1
				defer func() { sha256GroupMinFor = saved }()
				benchSums(b, msgs, compressions, sumBatch)
			})
		}
	}
}
