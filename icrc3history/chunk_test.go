package icrc3history

import (
	"testing"

	"github.com/reconciled/reconciled/icrc3"
)

func blockRun(lo, hi uint64, ts uint64) []icrc3.Block {
	var bl []icrc3.Block
	for i := lo; i < hi; i++ {
		bl = append(bl, icrc3.Block{Index: i, TS: ts})
	}
	return bl
}

// TestChunkCollectsReplies: a reply that is the whole chunk becomes it;
// replies that are parts (a prefix, an overlapping archive range, blocks
// outside the chunk) fill it in, the first copy of an index winning.
func TestChunkCollectsReplies(t *testing.T) {
	whole := blockRun(10, 20, 1)
	ch := newChunk(10, 20)
	ch.putAll(whole)
	if ch.missing != 0 || ch.firstMissing() != 20 || &ch.blocks[0] != &whole[0] {
		t.Fatalf("whole reply: missing %d, first missing %d, copied %v", ch.missing, ch.firstMissing(), &ch.blocks[0] != &whole[0])
	}
	ch.putAll(blockRun(10, 20, 2)) // a later copy changes nothing
	if ch.blocks[5].TS != 1 {
		t.Fatal("a later copy replaced the first")
	}

	ch = newChunk(10, 20)
	if ch.firstMissing() != 10 || ch.has(10) {
		t.Fatal("empty chunk")
	}
	ch.putAll(blockRun(5, 14, 1)) // a prefix, starting below the chunk
	if ch.missing != 6 || ch.firstMissing() != 14 || !ch.has(13) || ch.has(14) {
		t.Fatalf("after a prefix: missing %d, first missing %d", ch.missing, ch.firstMissing())
	}
	ch.putAll(blockRun(12, 25, 2)) // overlaps the prefix, runs past the chunk
	if ch.missing != 0 || ch.firstMissing() != 20 || len(ch.blocks) != 10 {
		t.Fatalf("after the rest: missing %d, first missing %d, %d blocks", ch.missing, ch.firstMissing(), len(ch.blocks))
	}
	for i, b := range ch.blocks {
		want := uint64(1)
		if b.Index >= 14 {
			want = 2
		}
		if b.Index != 10+uint64(i) || b.TS != want {
			t.Fatalf("block %d: index %d ts %d, want ts %d", i, b.Index, b.TS, want)
		}
	}
}
