package e2e_test

import (
	"testing"
	"time"

	"github.com/reconciled/reconciled/icrc3/ledgertest"
)

func TestExploreFuture(t *testing.T) {
	r := newRig(t, rigOpts{})
	l := r.archivedLedger(ledgertest.LedgerConfig{})
	for i, st := range []uint64{r.srv.Now() + uint64(10*365*24*time.Hour), 18446744073709551615, 18446744073709551615 - uint64(24*time.Hour)} {
		p := payment{stamp: st, amount: 1, memo: "f"}
		id := []string{"f10y", "fmax", "fmax24"}[i]
		r.publish(l.ID().Encode(), id, jsonOf(p.intent(id, l.ID())))
		v := r.wait(id, verdictAny)
		t.Logf("%s: %s final=%v window=%+v reason=%+v", id, outcomeOf(v), v.Final, *v.Window, v.Reason)
	}
}
