package icrc3

import (
	"errors"
	"testing"
)

// testChain builds n linked blocks the way a ledger does: block i's phash
// is the hash of block i-1's Value.
func testChain(n int) []Block {
	bl := make([]Block, n)
	var prev *Hash
	for i := range bl {
		fs := []Field{F("ts", Uint(uint64(1_700_000_000_000_000_000+i))), F("tx", MapValue(F("op", Text("mint")), F("amt", Uint(uint64(i+1)))))}
		if prev != nil {
			fs = append(fs, F("phash", Blob(prev[:])))
		}
		v := MapValue(fs...)
		h := v.Hash()
		bl[i] = Block{Index: uint64(i), Hash: h, PHash: prev, Raw: MarshalValue(v)}
		prev = &h
	}
	return bl
}

func tipOf(bl []Block) Anchor {
	last := bl[len(bl)-1]
	return Anchor{Index: last.Index, Hash: last.Hash}
}

func wantChainBreak(t *testing.T, err error, at uint64) {
	t.Helper()
	var e *Error
	var ce *ChainError
	if !errors.As(err, &e) || e.Kind != KindChain || !errors.As(err, &ce) {
		t.Fatalf("want a chain error at %d, got %v", at, err)
	}
	if ce.Index != at || e.Index == nil || *e.Index != at {
		t.Fatalf("chain error at %d (Error.Index %v), want %d: %v", ce.Index, e.Index, at, err)
	}
	if ReasonCode(err) != "E_CHAIN" {
		t.Fatalf("reason code %q", ReasonCode(err))
	}
}

func TestVerifierWholeChain(t *testing.T) {
	bl := testChain(50)
	v := NewVerifier(tipOf(bl))
	for i := len(bl) - 1; i >= 0; i-- {
		if v.Done() {
			t.Fatalf("done before block %d", i)
		}
		if v.Next() != uint64(i) {
			t.Fatalf("next %d, want %d", v.Next(), i)
		}
		if err := v.Push(&bl[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !v.Done() || v.Checked() != 50 {
		t.Fatalf("done %v checked %d", v.Done(), v.Checked())
	}
	if low, ok := v.Lowest(); !ok || low.Index != 0 || low.Hash != bl[0].Hash {
		t.Fatalf("lowest %+v %v", low, ok)
	}
	if err := v.Push(&bl[0]); err == nil {
		t.Fatal("a block after block 0 was accepted")
	}
}

// Every single-block forgery is caught, at the forged block or (for a
// forged phash) at the block the phash points to.
func TestVerifierBreakAtEachPosition(t *testing.T) {
	const n = 20
	for pos := 0; pos < n; pos++ {
		t.Run("alter", func(t *testing.T) {
			bl := testChain(n)
			tip := tipOf(bl)
			// A forged amount changes the hash; the block above still
			// names the genuine hash.
			v := MapValue(append(append([]Field{}, bl[pos].tree().Map...), F("x", Uint(1)))...)
			bl[pos].Raw, bl[pos].Hash = MarshalValue(v), v.Hash()
			err := NewVerifier(tip).PushPage(bl)
			wantChainBreak(t, err, uint64(pos))
			var ce *ChainError
			errors.As(err, &ce)
			if ce.Got != bl[pos].Hash {
				t.Fatalf("Got %s, want the forged hash %s", ce.Got, bl[pos].Hash)
			}
			if err := VerifyRange(tip, bl); err == nil {
				t.Fatal("VerifyRange accepted a forged block")
			}
		})
		t.Run("omit", func(t *testing.T) {
			if pos == n-1 {
				return // dropping the tip is a short page, covered by the client
			}
			bl := testChain(n)
			tip := tipOf(bl)
			short := append(append([]Block{}, bl[:pos]...), bl[pos+1:]...)
			v := NewVerifier(tip)
			err := v.PushPage(short)
			if pos == 0 {
				// Nothing is wrong with blocks 1..n-1; the walk is just not done.
				if err != nil || v.Done() {
					t.Fatalf("done %v err %v", v.Done(), err)
				}
				return
			}
			wantChainBreak(t, err, uint64(pos))
			if err := VerifyRange(tip, short); err == nil {
				t.Fatal("VerifyRange accepted a gap")
			}
		})
		t.Run("renumbered", func(t *testing.T) {
			if pos == n-1 || pos == 0 {
				return
			}
			// A lying node drops block pos and renumbers the ones below it
			// so that indexes stay contiguous: the hashes give it away.
			bl := testChain(n)
			tip := tipOf(bl)
			forged := append([]Block{}, bl...)
			for i := pos; i > 0; i-- {
				forged[i] = bl[i-1]
				forged[i].Index = uint64(i)
			}
			forged = forged[1:]
			if err := NewVerifier(tip).PushPage(forged); err == nil {
				t.Fatal("renumbered chain accepted")
			} else {
				wantChainBreak(t, err, uint64(pos))
			}
		})
	}
}

func TestVerifierTipMismatch(t *testing.T) {
	bl := testChain(5)
	tip := tipOf(bl)
	tip.Hash[0] ^= 1
	wantChainBreak(t, NewVerifier(tip).PushPage(bl), 4)
}

func TestVerifierBlockZeroRules(t *testing.T) {
	bl := testChain(3)
	// Block 0 carrying a phash is not a genesis block.
	fake := Hash{7}
	v0 := MapValue(append(append([]Field{}, bl[0].tree().Map...), F("phash", Blob(fake[:])))...)
	b0 := Block{Index: 0, Hash: v0.Hash(), PHash: &fake, Raw: MarshalValue(v0)}
	err := NewVerifier(Anchor{Index: 0, Hash: b0.Hash}).Push(&b0)
	wantChainBreak(t, err, 0)

	// A block above 0 without phash cannot be linked.
	b1 := bl[1]
	b1.PHash = nil
	wantChainBreak(t, NewVerifier(Anchor{Index: 1, Hash: b1.Hash}).Push(&b1), 1)

	// A single-block chain verifies.
	if err := VerifyRange(Anchor{Index: 0, Hash: bl[0].Hash}, bl[:1]); err != nil {
		t.Fatal(err)
	}
}

func TestVerifierWrongIndex(t *testing.T) {
	bl := testChain(4)
	v := NewVerifier(tipOf(bl))
	if err := v.Push(&bl[2]); err == nil {
		t.Fatal("block 2 accepted where block 3 was due")
	} else {
		wantChainBreak(t, err, 3)
	}
}

func TestIncrementalVerifier(t *testing.T) {
	bl := testChain(30)
	verified := Anchor{Index: 9, Hash: bl[9].Hash}
	v, err := NewIncrementalVerifier(tipOf(bl), verified)
	if err != nil {
		t.Fatal(err)
	}
	// Pages below the anchor are ignored once the walk reaches it.
	if err := v.PushPage(bl[20:]); err != nil {
		t.Fatal(err)
	}
	if err := v.PushPage(bl[5:20]); err != nil {
		t.Fatal(err)
	}
	if !v.Done() || v.Checked() != 20 {
		t.Fatalf("done %v checked %d, want 20 new blocks", v.Done(), v.Checked())
	}
	if low, _ := v.Lowest(); low.Index != 10 || low.Hash != bl[10].Hash {
		t.Fatalf("lowest %+v", low)
	}

	// The new blocks must attach to the verified anchor: a different history
	// above the anchor (a fork) is a break at the anchor.
	other := Anchor{Index: 9, Hash: Hash{1}}
	v, _ = NewIncrementalVerifier(tipOf(bl), other)
	wantChainBreak(t, v.PushPage(bl[10:]), 9)

	// A tip equal to the anchor needs no blocks; a different hash there is a fork.
	v, err = NewIncrementalVerifier(tipOf(bl), tipOf(bl))
	if err != nil || !v.Done() {
		t.Fatalf("same tip: done %v err %v", v.Done(), err)
	}
	forked := tipOf(bl)
	forked.Hash[3] ^= 0x80
	_, err = NewIncrementalVerifier(tipOf(bl), forked)
	wantChainBreak(t, err, 29)

	// A certified tip below what was verified is a lagging replica.
	_, err = NewIncrementalVerifier(Anchor{Index: 5, Hash: bl[5].Hash}, verified)
	if !IsKind(err, KindLagging) || ReasonCode(err) != "E_LAGGING" {
		t.Fatalf("want E_LAGGING, got %v", err)
	}
}

func TestVerifyRangeShape(t *testing.T) {
	bl := testChain(10)
	if err := VerifyRange(tipOf(bl), bl[3:]); err != nil {
		t.Fatal(err)
	}
	if err := VerifyRange(Anchor{Index: 8, Hash: bl[8].Hash}, bl[3:]); err == nil {
		t.Fatal("range not ending at the anchor accepted")
	}
	if err := VerifyRange(tipOf(bl), nil); err != nil {
		t.Fatal(err)
	}
}
