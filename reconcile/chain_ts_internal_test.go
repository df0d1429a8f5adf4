package reconcile

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/reconciled/reconciled/icrc3"
)

// listHistory serves a list of blocks as a ledger's whole history, its last
// block being the certified tip.
type listHistory struct{ blocks []icrc3.Block }

// add appends a block at ts chained to the last one; ts 0 makes it a block
// of an unknown kind, without a timestamp.
func (h *listHistory) add(t *testing.T, ts uint64) {
	t.Helper()
	i := uint64(len(h.blocks))
	tx := icrc3.MapValue(icrc3.F("op", icrc3.Text("mint")),
		icrc3.F("to", icrc3.ArrayValue(icrc3.Blob([]byte{4}))), icrc3.F("amt", icrc3.Uint(1)))
	var fs []icrc3.Field
	if i > 0 {
		fs = append(fs, icrc3.F("phash", icrc3.Blob(h.blocks[i-1].Hash[:])))
	}
	if ts == 0 {
		fs = append(fs, icrc3.F("btype", icrc3.Text("9test")))
	} else {
		fs = append(fs, icrc3.F("ts", icrc3.Uint(ts)))
	}
	v := icrc3.MapValue(append(fs, icrc3.F("tx", tx))...)
	b, err := icrc3.ParseBlock(i, v, v.Hash())
	if err != nil {
		t.Fatal(err)
	}
	if b.TS != ts {
		t.Fatalf("block %d: ts %d, want %d", i, b.TS, ts)
	}
	h.blocks = append(h.blocks, b)
}

func (h *listHistory) Tip(context.Context) (icrc3.Tip, error) {
	b := h.blocks[len(h.blocks)-1]
	return icrc3.Tip{Index: b.Index, Hash: b.Hash, Time: 1_000_000 + b.Index}, nil
}

func (h *listHistory) Blocks(_ context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	return fn(slices.Clone(h.blocks[start:end]))
}

// BlocksDesc gives one block a page, so that a walk meets untimed pages
// above timed ones.
func (h *listHistory) BlocksDesc(_ context.Context, start, end uint64, fn func([]icrc3.Block) error) error {
	for i := end; i > start; i-- {
		if err := fn(slices.Clone(h.blocks[i-1 : i])); err != nil {
			return err
		}
	}
	return nil
}

// BlocksDescAbove reads the floor once, at the start.
func (h *listHistory) BlocksDescAbove(ctx context.Context, start, end uint64, floor func() uint64, fn func([]icrc3.Block) error) error {
	return h.BlocksDesc(ctx, max(start, floor()), end, fn)
}

func (h *listHistory) Detect(context.Context) (icrc3.Features, error) {
	return icrc3.Features{PageSize: 2000}, nil
}
func (h *listHistory) NetworkKey() string     { return "test" }
func (h *listHistory) Mode() icrc3.VerifyMode { return icrc3.VerifyChain }
func (h *listHistory) Forget()                {}

// Timestamps never decrease along a verified chain: windows are found by
// them, and a walk down stops at the first block older than a window. A
// refresh checks its new blocks against the highest timestamp below them,
// and must still do so after a refresh whose new blocks carry none.
func TestTimestampOrderHoldsAcrossARefreshOfUntimedBlocks(t *testing.T) {
	ctx := context.Background()
	h := &listHistory{}
	h.add(t, 100)
	c := &chain{ledger: "x", hist: h, cache: NewMemCache(), now: time.Now}
	c.w = newPageWriter(c)
	refresh := func() error {
		_, _, err := c.refresh(ctx, nil)
		return err
	}
	if err := refresh(); err != nil {
		t.Fatal(err)
	}
	h.add(t, 300)
	if err := refresh(); err != nil {
		t.Fatal(err)
	}
	h.add(t, 0)
	if err := refresh(); err != nil {
		t.Fatal(err)
	}
	if c.r.HiTS != 300 {
		t.Errorf("after a refresh of an untimed block the range's highest timestamp is %d, want 300", c.r.HiTS)
	}
	// A window open at 300 ends at block 1, the highest with a timestamp.
	if i, ts, ok := c.topBlock(); !ok || i != 1 || ts != 300 {
		t.Errorf("highest timestamped block %d at %d (%t), want 1 at 300", i, ts, ok)
	}
	h.add(t, 250)
	var cf *chainFault
	if err := refresh(); !errors.As(err, &cf) {
		t.Fatalf("a block stamped 250 above one stamped 300: refresh returned %v, want a chain fault", err)
	}
}

// The same holds when the range's top blocks carry no timestamp and a walk
// down meets the first timestamped one below them.
func TestTimestampOrderHoldsBelowUntimedTopBlocks(t *testing.T) {
	ctx := context.Background()
	h := &listHistory{}
	h.add(t, 100)
	h.add(t, 300)
	h.add(t, 0)
	h.add(t, 0)
	c := &chain{ledger: "x", hist: h, cache: NewMemCache(), now: time.Now}
	c.w = newPageWriter(c)
	if _, _, err := c.refresh(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.extendDown(ctx, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.w.flush(); err != nil {
		t.Fatal(err)
	}
	if c.r.Lo != 0 || c.r.HiTS != 300 || c.r.LoTS != 100 {
		t.Errorf("after a walk to block 0 the range is %d..%d, timestamps %d..%d; want 0..3, 100..300", c.r.Lo, c.r.Hi, c.r.LoTS, c.r.HiTS)
	}
	// The walk met its first timestamp below untimed blocks, which a
	// range loaded from the cache may hide timestamped blocks among: the
	// top is not claimed, and windows are looked up whole.
	if i, ts, ok := c.topBlock(); ok {
		t.Errorf("highest timestamped block claimed after a walk below untimed blocks: %d at %d", i, ts)
	}
	h.add(t, 250)
	var cf *chainFault
	if _, _, err := c.refresh(ctx, nil); !errors.As(err, &cf) {
		t.Fatalf("a block stamped 250 above one stamped 300: refresh returned %v, want a chain fault", err)
	}
}
