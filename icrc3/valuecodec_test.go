package icrc3

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestValueCodecRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	vals := []Value{Blob(nil), Blob([]byte{}), Text(""), Uint(0), ArrayValue(), MapValue()}
	for range 500 {
		vals = append(vals, randValue(r, 0))
	}
	vals = append(vals, randChain(r, 5, 20)...)
	for _, v := range vals {
		b := MarshalValue(v)
		got, err := UnmarshalValue(b)
		if err != nil {
			t.Fatalf("unmarshal %x: %v", b, err)
		}
		if !got.Equal(v) || got.Hash() != v.Hash() {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, v)
		}
		if !bytes.Equal(MarshalValue(got), b) {
			t.Fatalf("re-encoding differs")
		}
		// Every strict prefix is rejected, never misread.
		for i := range len(b) {
			if _, err := UnmarshalValue(b[:i]); err == nil {
				t.Fatalf("prefix %x of %x accepted", b[:i], b)
			}
		}
	}
}

func TestValueCodecRejects(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":          nil,
		"version":        {2, byte(KindNat), 0},
		"kind":           {1, 9},
		"zero kind":      {1, 0},
		"trailing":       {1, byte(KindNat), 0, 0},
		"huge array":     {1, byte(KindArray), 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge blob":      {1, byte(KindBlob), 0x80, 0x01, 1},
		"truncated leb":  {1, byte(KindNat), 0x80},
		"truncated sleb": {1, byte(KindInt), 0xff},
	} {
		if _, err := UnmarshalValue(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	deep := []byte{1}
	for range MaxValueDepth + 1 {
		deep = append(deep, byte(KindArray), 1)
	}
	deep = append(deep, byte(KindNat), 0)
	if _, err := UnmarshalValue(deep); err == nil {
		t.Error("too deep: accepted")
	}
}

func TestValueCodecDoesNotAlias(t *testing.T) {
	b := MarshalValue(Blob([]byte{1, 2, 3}))
	v, err := UnmarshalValue(b)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] = 9
	if v.Bytes[2] != 3 {
		t.Fatal("decoded value aliases the input")
	}
}

func FuzzUnmarshalValue(f *testing.F) {
	r := rand.New(rand.NewPCG(31, 32))
	for range 8 {
		f.Add(MarshalValue(randValue(r, 0)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := UnmarshalValue(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a form that decodes to the same value.
		w, err := UnmarshalValue(MarshalValue(v))
		if err != nil || !w.Equal(v) || w.Hash() != v.Hash() {
			t.Fatalf("re-encoding does not round-trip: %v", err)
		}
	})
}
