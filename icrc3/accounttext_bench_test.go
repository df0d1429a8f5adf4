package icrc3

import "testing"

func BenchmarkParseAccount(b *testing.B) {
	s := testOwner + "-dfxgiyy.102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
	for b.Loop() {
		if _, err := ParseAccount(s); err != nil {
			b.Fatal(err)
		}
	}
}
