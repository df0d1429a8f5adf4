package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

const ledgerA = "mxzaz-hqaaa-aaaar-qaada-cai"

// intent builds a record whose canonical hash depends on variant, so two
// variants of one id conflict.
func intent(id string, variant int) reconciled.IntentRecord {
	body := fmt.Sprintf(`{"intent_id":%q,"method":"icrc1_transfer","args":{"amount":"%d"}}`, id, 100+variant)
	return reconciled.IntentRecord{
		IntentID:   id,
		CanisterID: ledgerA,
		Caller:     "2vxsx-fae",
		Method:     "icrc1_transfer",
		Body:       json.RawMessage(body),
		Hash:       sha256.Sum256([]byte(body)),
	}
}

func TestPutIntentFirstWriterWins(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	first := intent("p1-3f2a", 1)
	first.FirstSeen = time.Date(2026, 11, 29, 14, 0, 0, 123, time.UTC)
	if r, err := s.PutIntent(ctx, first); err != nil || r != reconciled.PutCreated {
		t.Fatalf("first put: %v %v", r, err)
	}
	if err := s.AppendVerdict(ctx, verdict("p1-3f2a", 1, reconciled.StatusNotYet), nil); err != nil {
		t.Fatal(err)
	}
	stored, err := s.Intent(ctx, "p1-3f2a")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored, first) {
		t.Fatalf("stored %+v\nwant %+v", stored, first)
	}

	same := first
	same.FirstSeen = time.Time{}
	same.Caller = "someone-else" // only the canonical hash decides identity
	if r, err := s.PutIntent(ctx, same); err != nil || r != reconciled.PutExisting {
		t.Fatalf("same hash: %v %v, want existing", r, err)
	}

	other := intent("p1-3f2a", 2)
	if r, err := s.PutIntent(ctx, other); err != nil || r != reconciled.PutConflict {
		t.Fatalf("different hash: %v %v, want conflict", r, err)
	}
	after, err := s.Intent(ctx, "p1-3f2a")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, first) {
		t.Fatalf("conflict changed the intent: %+v", after)
	}
	vs, err := s.Verdicts(ctx, "p1-3f2a")
	if err != nil || len(vs) != 1 || vs[0].Status != reconciled.StatusNotYet {
		t.Fatalf("conflict changed the verdicts: %+v %v", vs, err)
	}
}

func TestPutIntentRejectsMalformed(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	for name, mut := range map[string]func(*reconciled.IntentRecord){
		"bad id":        func(r *reconciled.IntentRecord) { r.IntentID = "a b" },
		"long id":       func(r *reconciled.IntentRecord) { r.IntentID = strings.Repeat("a", 129) },
		"no canister":   func(r *reconciled.IntentRecord) { r.CanisterID = "" },
		"no method":     func(r *reconciled.IntentRecord) { r.Method = "" },
		"zero hash":     func(r *reconciled.IntentRecord) { r.Hash = [32]byte{} },
		"body not JSON": func(r *reconciled.IntentRecord) { r.Body = json.RawMessage("{") },
	} {
		rec := intent("ok", 1)
		mut(&rec)
		if _, err := s.PutIntent(ctx, rec); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.Intent(ctx, "ok"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a malformed record was stored: %v", err)
	}
}

func TestIntentKnownOnlyFromVerdicts(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	// Another sidecar decided this intent; only its verdict arrives here.
	if err := s.AppendVerdict(ctx, verdict("remote", 1, reconciled.StatusFound), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Intent(ctx, "remote"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("body-less intent: %v, want ErrNotFound", err)
	}
	list, _, err := s.ListIntents(ctx, ListFilter{})
	if err != nil || len(list) != 1 || list[0].HasBody || list[0].Status != reconciled.StatusFound || !list[0].Final {
		t.Fatalf("listing: %+v %v", list, err)
	}
	seen := list[0].FirstSeen

	rec := intent("remote", 1)
	if r, err := s.PutIntent(ctx, rec); err != nil || r != reconciled.PutAdopted {
		t.Fatalf("put over verdicts: %v %v, want adopted", r, err)
	}
	got, err := s.Intent(ctx, "remote")
	if err != nil || got.Hash != rec.Hash || !got.FirstSeen.Equal(seen) {
		t.Fatalf("adopted intent %+v %v (first seen must stay %v)", got, err, seen)
	}
	if r, err := s.PutIntent(ctx, intent("remote", 2)); err != nil || r != reconciled.PutConflict {
		t.Fatalf("after adoption: %v %v, want conflict", r, err)
	}
}
