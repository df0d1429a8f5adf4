package icrc3

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/aviate-labs/agent-go/principal"
)

const testOwner = "k2t6j-2nvnp-4zjm3-25dtz-6xhaa-c7boj-5gayf-oj3xs-i43lp-teztq-6ae"

func TestParseAccountCanonical(t *testing.T) {
	sub, _ := hex.DecodeString("0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20")
	one := make([]byte, 32)
	one[31] = 1
	for _, tc := range []struct {
		text string
		sub  []byte
	}{
		// The ICRC-1 TextualEncoding examples.
		{testOwner, nil},
		{testOwner + "-6cc627i.1", one},
		{testOwner + "-dfxgiyy.102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20", sub},
		{"2vxsx-fae", nil},
		{"aaaaa-aa", nil},
	} {
		a, err := ParseAccount(tc.text)
		if err != nil {
			t.Fatalf("ParseAccount(%q): %v", tc.text, err)
		}
		if !bytes.Equal(a.Subaccount, tc.sub) || (a.Subaccount == nil) != (tc.sub == nil) {
			t.Errorf("ParseAccount(%q).Subaccount = %x, want %x", tc.text, a.Subaccount, tc.sub)
		}
		if got := a.String(); got != tc.text {
			t.Errorf("String() = %q, want %q", got, tc.text)
		}
	}
}

func TestParseAccountRefusesNonCanonical(t *testing.T) {
	long := strings.Repeat("a", 60) // 30 bytes once decoded: not a principal
	for _, s := range []string{
		"",
		testOwner + "-q6bn32y.",    // empty subaccount
		testOwner + "-6cc627i.01",  // leading zero
		testOwner + "-6cc627i.0",   // explicit default subaccount
		testOwner + ".1",           // no checksum
		testOwner + "-6CC627I.1",   // upper-case checksum
		testOwner + "-6cc627j.1",   // wrong checksum
		testOwner + "-6cc627i.A",   // upper-case hex
		testOwner + "-6cc627i.1.1", // two dots
		testOwner + "-aaaaaaa.1" + strings.Repeat("0", 64),          // 33 bytes
		strings.ToUpper(testOwner),                                  // upper-case principal
		"k2t6j2nvnp4zjm3-25dtz6xhaac7boj5gayfoj3xs-i43lp-teztq-6ae", // wrong grouping
		"2vxsx-fae-", // trailing dash
		"2vxsx-faf",  // principal checksum
		principal.Principal{Raw: []byte(long[:30])}.Encode(), // 30-byte principal
	} {
		if a, err := ParseAccount(s); err == nil {
			t.Errorf("ParseAccount(%q) = %v, want an error", s, a)
		}
	}
}

func TestAccountStringDefaultSubaccount(t *testing.T) {
	p, err := ParsePrincipal(testOwner)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []Account{{Owner: p}, {Owner: p, Subaccount: make([]byte, 32)}} {
		if got := a.String(); got != testOwner {
			t.Errorf("String(%x) = %q, want the bare principal", a.Subaccount, got)
		}
	}
}

// A subaccount whose leading byte is below 0x10 loses a hex digit, the case
// where an encoder and a decoder most easily disagree.
func TestAccountStringRoundTripShortHex(t *testing.T) {
	p, _ := ParsePrincipal(testOwner)
	for i := 0; i < 32; i++ {
		sub := make([]byte, 32)
		sub[i] = 0x0f
		a := Account{Owner: p, Subaccount: sub}
		back, err := ParseAccount(a.String())
		if err != nil {
			t.Fatalf("ParseAccount(%q): %v", a.String(), err)
		}
		if !bytes.Equal(back.Subaccount, sub) {
			t.Fatalf("round trip of %x gave %x", sub, back.Subaccount)
		}
	}
}

func FuzzParseAccount(f *testing.F) {
	f.Add(testOwner)
	f.Add(testOwner + "-6cc627i.1")
	f.Add(testOwner + "-dfxgiyy.102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20")
	f.Add("2vxsx-fae")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAccount(s)
		if err != nil {
			return
		}
		if got := a.String(); got != s {
			t.Fatalf("String(ParseAccount(%q)) = %q", s, got)
		}
		if a.Subaccount != nil && (len(a.Subaccount) != 32 || a.IsDefaultSubaccount()) {
			t.Fatalf("ParseAccount(%q) gave subaccount %x", s, a.Subaccount)
		}
	})
}
