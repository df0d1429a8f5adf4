package matcher

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func FuzzParseIntent(f *testing.F) {
	paths, _ := filepath.Glob("../testdata/intents/*.json")
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseIntent(data)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("refusal %T is not *Error: %v", err, err)
			}
			return
		}
		c := in.Canonical()
		again, err := ParseIntent(c)
		if err != nil {
			t.Fatalf("canonical form refused: %v\n%s", err, c)
		}
		if !bytes.Equal(again.Canonical(), c) || again.Hash() != in.Hash() {
			t.Fatalf("canonical form is not stable:\n%s\n%s", c, again.Canonical())
		}
		w := in.Window(LedgerRules{})
		if !w.Contains(in.Args.CreatedAt) && in.IngressExpiry == nil {
			t.Fatalf("window %+v excludes its own stamp %d", w, in.Args.CreatedAt)
		}
	})
}

// FuzzDecodeArgHex feeds raw bytes to the Candid reader: it must refuse or
// decode, never panic, loop or allocate what a length prefix claims.
func FuzzDecodeArgHex(f *testing.F) {
	for _, m := range []Method{MethodTransfer, MethodTransferFrom, MethodApprove} {
		f.Add(byte(len(m)), []byte("DIDL\x00\x00"))
	}
	f.Add(byte(0), hugePrincipal())
	f.Fuzz(func(t *testing.T, which byte, data []byte) {
		m := []Method{MethodTransfer, MethodTransferFrom, MethodApprove}[int(which)%3]
		fields, err := decodeArgHex(m, data)
		if err != nil {
			return
		}
		for name, d := range fields {
			if _, ok := argShapes[m].lookup(candidHash(name)); !ok {
				t.Fatalf("decoded unknown field %s", name)
			}
			if (name == "from_subaccount" || name == "spender_subaccount") && d.present && len(d.blob) != 32 {
				t.Fatalf("%s of %d bytes accepted", name, len(d.blob))
			}
		}
	})
}
