package support

import (
	"strings"
	"testing"
	"time"

	"github.com/reconciled/reconciled"
)

func TestWatchViewTimes(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	h := &handler{cfg: Config{FollowUpEvery: 5 * time.Second}}
	decided := &reconciled.Verdict{DecidedAt: now.Add(-time.Hour)}
	// A not_yet intent due at every round: next is one interval after the
	// last check, not the long-past scheduled time.
	w := h.watchView(0, now.Add(-time.Hour), now.Add(-2*time.Second), decided, now)
	if w.LastCheck == nil || !w.LastCheck.Equal(now.Add(-2*time.Second)) || !w.NextCheck.Equal(now.Add(3*time.Second)) || w.Late {
		t.Errorf("due every round: %+v", w)
	}
	// Backing off: the scheduled retry stands.
	w = h.watchView(3, now.Add(time.Minute), now.Add(-time.Second), decided, now)
	if !w.NextCheck.Equal(now.Add(time.Minute)) || w.Late {
		t.Errorf("backing off: %+v", w)
	}
	// No check recorded: the latest verdict is the last check known, and
	// a round long missed is late.
	w = h.watchView(0, now.Add(-time.Hour), time.Time{}, decided, now)
	if w.LastCheck == nil || !w.LastCheck.Equal(decided.DecidedAt) || !w.Late {
		t.Errorf("no check recorded: %+v", w)
	}
	// Not told the interval: due at the next round.
	w = (&handler{}).watchView(0, now.Add(-time.Hour), now.Add(-time.Second), decided, now)
	if !w.AtNextRound || w.Late {
		t.Errorf("no interval: %+v", w)
	}
}

func TestCustomerForms(t *testing.T) {
	for q, want := range map[string]string{"hczxw": "hczxw", "HCZXWabc": "hczxw-abc", "hczxw-abc": "hczxw-abc", "hczxw-": "hczxw"} {
		if got, ok := principalBeginning(q); !ok || got != want {
			t.Errorf("principalBeginning(%q) = %q %t, want %q", q, got, ok, want)
		}
	}
	for _, q := range []string{"hcz", "hc-zxwab", "40.25", "ab1cd"} {
		if got, ok := principalBeginning(q); ok {
			t.Errorf("principalBeginning(%q) = %q", q, got)
		}
	}
	for q, want := range map[string]string{"2,5": "2,5|2.5", "1,000": "1,000|1.000|1000", "1,000.5 ICP": "1,000.5 ICP|1000.5 ICP", "2.5": "2.5"} {
		if got := strings.Join(amountReadings(q), "|"); got != want {
			t.Errorf("amountReadings(%q) = %s, want %s", q, got, want)
		}
	}
}

func TestBodyTextBounded(t *testing.T) {
	small := []byte(`{"a":[1,2]}`)
	if got, cut := bodyText(small); cut || got != "{\n  \"a\": [\n    1,\n    2\n  ]\n}" {
		t.Errorf("small body: %q %t", got, cut)
	}
	deep := []byte(`{"x":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`)
	if got, cut := bodyText(deep); cut || got != string(deep) {
		t.Errorf("deep body reshaped: %d bytes, cut %t", len(got), cut)
	}
	big := []byte(`{"x":"` + strings.Repeat("é", 40000) + `"}`)
	if got, cut := bodyText(big); !cut || len(got) > bodyShown || !strings.HasPrefix(string(big), got) || !strings.HasSuffix(got, "é") {
		t.Errorf("big body: %d bytes, cut %t", len(got), cut)
	}
}
