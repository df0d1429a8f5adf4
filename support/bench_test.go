package support

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/support/supporttest"
)

// benchIntents is the store size of the benchmarks: every intent found,
// intent i in block 10000+i.
const benchIntents = 2000

func benchHandler(b *testing.B) http.Handler {
	b.Helper()
	st := supporttest.Open(b)
	for i := range benchIntents {
		id := fmt.Sprintf("bench-%05d", i)
		supporttest.PutIntent(b, st, id, supporttest.Ledger, supporttest.Caller, supporttest.Payee, "100",
			supporttest.Base.Add(time.Duration(i)*time.Second))
		supporttest.Append(b, st, reconciled.Verdict{IntentID: id, Seq: 1, Status: reconciled.StatusFound,
			Block:  &reconciled.BlockRef{Index: reconciled.U64(10000 + i), TS: 1, Hash: "aa", Kind: "xfer"},
			Window: supporttest.Window(), Evidence: supporttest.Evidence(supporttest.Base), DecidedAt: supporttest.Base})
	}
	return NewHandler(Config{Store: st, Token: []byte(testToken), Ledgers: supporttest.Ledgers})
}

func benchGet(b *testing.B, h http.Handler, target string) {
	req := httptest.NewRequest("GET", target, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%s: %d %s", target, rec.Code, rec.Body)
		}
	}
}

func BenchmarkAPI(b *testing.B) {
	h := benchHandler(b)
	b.Run("detail", func(b *testing.B) { benchGet(b, h, "/api/v1/intents/bench-01000") })
	b.Run("list100", func(b *testing.B) { benchGet(b, h, "/api/v1/intents?limit=100&order=newest") })
	b.Run("counts", func(b *testing.B) { benchGet(b, h, "/api/v1/counts") })
	b.Run("search-id", func(b *testing.B) { benchGet(b, h, "/api/v1/search?q=bench-01000") })
	// The oldest intent's block: the scan reads all 2000 latest verdicts.
	b.Run("search-block-scan2000", func(b *testing.B) { benchGet(b, h, "/api/v1/search?q=10000") })
	// Every body names Payee: each of the 2000 is parsed.
	b.Run("search-account-scan2000", func(b *testing.B) { benchGet(b, h, "/api/v1/search?q="+supporttest.PayeeSub) })
	// No body names OtherCaller: the text check skips every parse.
	other := icrc3.Account{Owner: principal.MustDecode(supporttest.OtherCaller), Subaccount: append(make([]byte, 31), 5)}
	b.Run("search-account-miss-scan2000", func(b *testing.B) { benchGet(b, h, "/api/v1/search?q="+other.String()) })
}
