package icrc3

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/aviate-labs/agent-go/certification/hashtree"
)

// jsonValue is a Value in the vector file: exactly one of the keys
// Blob (hex), Text, Nat (decimal), Int (decimal), Array, Map ([[key, value]...]).
type jsonValue map[string]json.RawMessage

func (j jsonValue) value() (Value, error) {
	if len(j) != 1 {
		return Value{}, fmt.Errorf("value must have exactly one key, has %d", len(j))
	}
	for k, raw := range j {
		switch k {
		case "Blob":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return Value{}, err
			}
			b, err := hex.DecodeString(s)
			return Blob(b), err
		case "Text":
			var s string
			err := json.Unmarshal(raw, &s)
			return Text(s), err
		case "Nat":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return Value{}, err
			}
			n, err := ParseNat(s)
			return NatValue(n), err
		case "Int":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return Value{}, err
			}
			i, ok := new(big.Int).SetString(s, 10)
			if !ok {
				return Value{}, fmt.Errorf("bad Int %q", s)
			}
			return IntValue(i), nil
		case "Array":
			var xs []jsonValue
			if err := json.Unmarshal(raw, &xs); err != nil {
				return Value{}, err
			}
			vs := make([]Value, len(xs))
			for i := range xs {
				v, err := xs[i].value()
				if err != nil {
					return Value{}, err
				}
				vs[i] = v
			}
			return ArrayValue(vs...), nil
		case "Map":
			var kvs [][2]json.RawMessage
			if err := json.Unmarshal(raw, &kvs); err != nil {
				return Value{}, err
			}
			fs := make([]Field, len(kvs))
			for i, kv := range kvs {
				var key string
				if err := json.Unmarshal(kv[0], &key); err != nil {
					return Value{}, err
				}
				var jv jsonValue
				if err := json.Unmarshal(kv[1], &jv); err != nil {
					return Value{}, err
				}
				v, err := jv.value()
				if err != nil {
					return Value{}, err
				}
				fs[i] = F(key, v)
			}
			return MapValue(fs...), nil
		}
		return Value{}, fmt.Errorf("unknown value kind %q", k)
	}
	panic("unreachable")
}

type hashVectors struct {
	Values []struct {
		Source, Name string
		Value        jsonValue
		Hash         string
	}
	Blocks []struct {
		Name, Kind, BType string
		Value             jsonValue
		Hash              string
	}
	LEB128  []struct{ N, Bytes string }
	SLEB128 []struct{ N, Bytes string }
	TipTree []struct {
		LastBlockHash  string `json:"last_block_hash"`
		LastBlockIndex uint64 `json:"last_block_index"`
		IndexLEB128    string `json:"index_leb128"`
		Empty          bool
		Root           string
	} `json:"tip_tree"`
	BlockParseChecks map[string]map[string]string `json:"block_parse_checks"`
}

func loadVectors(t testing.TB) *hashVectors {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "hash-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v hashVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Values) < 35 || len(v.Blocks) != 8 || len(v.LEB128) == 0 || len(v.SLEB128) == 0 || len(v.TipTree) != 2 {
		t.Fatalf("vector file incomplete: %d values, %d blocks", len(v.Values), len(v.Blocks))
	}
	return &v
}

func mustValue(t testing.TB, j jsonValue) Value {
	t.Helper()
	v, err := j.value()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestHashVectors(t *testing.T) {
	vs := loadVectors(t)
	for _, tc := range vs.Values {
		t.Run(tc.Source+"/"+tc.Name, func(t *testing.T) {
			v := mustValue(t, tc.Value)
			if got := v.Hash().String(); got != tc.Hash {
				t.Errorf("hash = %s, want %s", got, tc.Hash)
			}
			// The Candid decoder hashes on its own path; hold it to the same vectors.
			got, h := roundTripCandid(t, v)
			if !got.Equal(v) || h.String() != tc.Hash {
				t.Errorf("candid decoder: hash %s, want %s (equal %v)", h, tc.Hash, got.Equal(v))
			}
		})
	}
	for _, tc := range vs.Blocks {
		t.Run("block/"+tc.Name, func(t *testing.T) {
			v := mustValue(t, tc.Value)
			if got := v.Hash().String(); got != tc.Hash {
				t.Errorf("hash = %s, want %s", got, tc.Hash)
			}
		})
	}
}

func TestLEB128Vectors(t *testing.T) {
	vs := loadVectors(t)
	for _, tc := range vs.LEB128 {
		n, err := ParseNat(tc.N)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(n.AppendLEB128(nil)); got != tc.Bytes {
			t.Errorf("LEB128(%s) = %s, want %s", tc.N, got, tc.Bytes)
		}
		raw, _ := hex.DecodeString(tc.Bytes)
		if back := natFromLEB(raw); !back.Equal(n) {
			t.Errorf("natFromLEB(%s) = %s, want %s", tc.Bytes, back, tc.N)
		}
	}
	for _, tc := range vs.SLEB128 {
		i, _ := new(big.Int).SetString(tc.N, 10)
		if got := hex.EncodeToString(AppendSLEB128(nil, i)); got != tc.Bytes {
			t.Errorf("SLEB128(%s) = %s, want %s", tc.N, got, tc.Bytes)
		}
		raw, _ := hex.DecodeString(tc.Bytes)
		d := &decoder{buf: raw}
		back, err := d.int()
		if err != nil || back.Cmp(i) != 0 {
			t.Errorf("decode SLEB128 %s = %v, %v; want %s", tc.Bytes, back, err, tc.N)
		}
	}
	// Big values exercise the multi-word paths of both encoders.
	big1 := new(big.Int).Lsh(big.NewInt(1), 200)
	n, _ := NatFromBig(big1)
	if back := natFromLEB(n.AppendLEB128(nil)); !back.Equal(n) {
		t.Errorf("LEB128 round trip of 2^200 = %s", back)
	}
	for _, x := range []*big.Int{new(big.Int).Neg(big1), big1, big.NewInt(-1 << 62), new(big.Int).Lsh(big.NewInt(-1), 63)} {
		d := &decoder{buf: AppendSLEB128(nil, x)}
		if back, err := d.int(); err != nil || back.Cmp(x) != 0 {
			t.Errorf("SLEB128 round trip of %s = %v, %v", x, back, err)
		}
	}
}

func TestTipTreeVectors(t *testing.T) {
	vs := loadVectors(t)
	for _, tc := range vs.TipTree {
		var root [32]byte
		if tc.Empty {
			root = hashtree.Empty{}.Reconstruct()
		} else {
			h, _ := hex.DecodeString(tc.LastBlockHash)
			idx := AppendUvarint(nil, tc.LastBlockIndex)
			if hex.EncodeToString(idx) != tc.IndexLEB128 {
				t.Errorf("LEB128(%d) = %x, want %s", tc.LastBlockIndex, idx, tc.IndexLEB128)
			}
			root = hashtree.Fork{
				LeftTree:  hashtree.Labeled{Label: hashtree.Label("last_block_hash"), Tree: hashtree.Leaf(h)},
				RightTree: hashtree.Labeled{Label: hashtree.Label("last_block_index"), Tree: hashtree.Leaf(idx)},
			}.Reconstruct()
		}
		if got := hex.EncodeToString(root[:]); got != tc.Root {
			t.Errorf("tip tree root = %s, want %s", got, tc.Root)
		}
	}
}

func TestSpecExampleBlocksParse(t *testing.T) {
	vs := loadVectors(t)
	checks := vs.BlockParseChecks
	for i, tc := range vs.Blocks {
		t.Run(tc.Name, func(t *testing.T) {
			v := mustValue(t, tc.Value)
			var h Hash
			if err := h.UnmarshalText([]byte(tc.Hash)); err != nil {
				t.Fatal(err)
			}
			b, err := ParseBlock(uint64(i), v, h)
			if err != nil {
				t.Fatal(err)
			}
			if string(b.Kind) != tc.Kind || b.BType != tc.BType || b.Hash != h || b.Index != uint64(i) {
				t.Fatalf("kind %q btype %q, want %q %q", b.Kind, b.BType, tc.Kind, tc.BType)
			}
			if b.Amount == nil || b.TS == 0 {
				t.Fatalf("amount %v ts %d", b.Amount, b.TS)
			}
			hexOf := func(p []byte) string { return hex.EncodeToString(p) }
			switch b.Kind {
			case BlockBurn:
				c := checks["burn"]
				if b.PHash.String() != c["phash"] || hexOf(b.From.Owner.Raw) != c["from_owner"] ||
					hexOf(b.From.Subaccount) != c["from_subaccount"] || !b.HasMemo || hexOf(b.Memo) != c["memo"] {
					t.Errorf("burn fields: %+v", b)
				}
				if b.Amount.String() != "1228990" || b.TS != 1701108969851098255 || b.EffectiveFee() != nil {
					t.Errorf("burn amount %s ts %d", b.Amount, b.TS)
				}
			case BlockMint:
				if b.PHash != nil || hexOf(b.To.Owner.Raw) != checks["mint"]["to_owner"] || b.To.Subaccount != nil || b.From != nil {
					t.Errorf("mint fields: %+v", b)
				}
			case BlockTransfer:
				c := checks["xfer"]
				if b.PHash.String() != c["phash"] || hexOf(b.From.Owner.Raw) != c["from_owner"] || hexOf(b.To.Owner.Raw) != c["to_owner"] ||
					!bytes.Equal(b.From.Subaccount, make([]byte, 32)) || b.Fee != nil || b.BlockFee.String() != "10" || b.HasMemo || b.CreatedAt != nil {
					t.Errorf("xfer fields: %+v", b)
				}
			case BlockApprove:
				c := checks["approve"]
				if b.PHash.String() != c["phash"] || hexOf(b.From.Owner.Raw) != c["from_owner"] || hexOf(b.Spender.Owner.Raw) != c["spender_owner"] ||
					b.Amount.String() != c["amt"] || b.EffectiveFee().String() != "10" {
					t.Errorf("approve fields: %+v", b)
				}
			default:
				t.Errorf("unexpected kind %q", b.Kind)
			}
		})
	}
}
