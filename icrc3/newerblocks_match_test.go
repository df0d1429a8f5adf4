package icrc3_test

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
)

// Blocks of the newer types never match an intent, not even the ICRC-122
// mints and burns, which move tokens like an ICRC-1 mint or burn: they are
// written by privileged methods, never by the calls intents describe. The
// same block relabelled 1mint / 1burn does match, so only its type keeps it
// apart.
func TestNewerBlockTypesNeverMatch(t *testing.T) {
	minting := icrc3.Account{Owner: principal.Principal{Raw: []byte{0, 0, 0, 0, 0, 0xf0, 0x13, 0x78, 1, 1}}}
	rules := matcher.LedgerRules{MintingAccount: &minting}
	checked := 0
	for _, fb := range icrc3.FixtureBlocks(t) {
		relabel := map[string]string{"122mint": "1mint", "122burn": "1burn"}[fb.BType]
		if relabel == "" {
			continue
		}
		b := parse(t, fb.Value)
		as := parse(t, withBType(fb.Value, relabel))
		if as.CreatedAt == nil {
			continue // no stamp: nothing could match it in any type
		}
		args := map[string]any{"amount": as.Amount.String(), "created_at_time": strconv.FormatUint(*as.CreatedAt, 10)}
		caller := minting.Owner
		if as.Kind == icrc3.BlockMint {
			args["to"] = as.To.String()
		} else {
			caller = as.From.Owner
			args["to"] = minting.String()
			if as.From.Subaccount != nil {
				args["from_subaccount"] = hex.EncodeToString(as.From.Subaccount)
			}
		}
		body, err := json.Marshal(map[string]any{"intent_id": "fixture", "canister_id": "mxzaz-hqaaa-aaaar-qaada-cai",
			"method": "icrc1_transfer", "caller": caller.Encode(), "args": args})
		if err != nil {
			t.Fatal(err)
		}
		in, err := matcher.ParseIntent(body)
		if err != nil {
			t.Fatalf("%s: %v", fb.Name, err)
		}
		if r := matcher.Match(in, &as, rules); !r.Match {
			t.Fatalf("%s relabelled %s: %+v, want a match (the intent describes it)", fb.Name, relabel, r)
		}
		if r := matcher.Match(in, &b, rules); r.Match || r.NearMiss {
			t.Errorf("%s (%s): %+v, want neither a match nor a near miss", fb.Name, fb.BType, r)
		}
		checked++
	}
	if checked != 4 {
		t.Fatalf("%d stamped ICRC-122 blocks checked, want 4", checked)
	}
}

func parse(t *testing.T, v icrc3.Value) icrc3.Block {
	t.Helper()
	b, err := icrc3.ParseBlock(1, v, v.Hash())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func withBType(v icrc3.Value, bt string) icrc3.Value {
	out := icrc3.Value{Kind: icrc3.KindMap}
	for _, f := range v.Map {
		if f.Key == "btype" {
			f = icrc3.F("btype", icrc3.Text(bt))
		}
		out.Map = append(out.Map, f)
	}
	return out
}
