package icrc3

import (
	"errors"
	"testing"
)

// A type the caller names that the reply's table does not hold reads as
// a type mismatch (or as no such type), never as an index out of the table.
func TestCandidReaderUndefinedType(t *testing.T) {
	// record { start : nat64 } holding 7.
	reply := append([]byte("DIDL\x01\x6c\x01"), AppendUvarint(nil, uint64(fieldID("start")))...)
	reply = append(reply, 0x78, 1, 0, 7, 0, 0, 0, 0, 0, 0, 0)
	r := NewCandidReader(reply)
	ref, err := r.Header()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []CandidType{ref + 1, 1 << 40, -100} {
		if _, err := r.Record(bad, "x"); !errors.Is(err, errWireType) {
			t.Fatalf("record %d: %v", bad, err)
		}
		if _, err := r.VecOf(bad, "x"); !errors.Is(err, errWireType) {
			t.Fatalf("vec %d: %v", bad, err)
		}
		if _, err := r.Variant(bad, "x"); !errors.Is(err, errWireType) {
			t.Fatalf("variant %d: %v", bad, err)
		}
		if _, err := r.OptBlob(bad); !errors.Is(err, errWireType) {
			t.Fatalf("opt blob %d: %v", bad, err)
		}
		if err := r.Skip(bad, 0); !errors.Is(err, errWireType) {
			t.Fatalf("skip %d: %v", bad, err)
		}
		if r.IsBlob(bad) || r.IsFunc(bad) {
			t.Fatalf("type %d reads as a blob or func", bad)
		}
	}
	fs, err := r.Record(ref, "args", "start")
	if err != nil || len(fs) != 1 || fs[0].ID != CandidFieldID("start") || !r.IsNat64(fs[0].Type) {
		t.Fatalf("record: %+v %v", fs, err)
	}
	if n, err := r.Nat64(); err != nil || n != 7 {
		t.Fatalf("nat64: %d %v", n, err)
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
}
