package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/support/supporttest"
)

var (
	timeRE    = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	secondsRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
)

// TestListFitsAHundredColumns: list's rows fit 100 characters, for intent
// ids as long as the TypeScript client derives (preview id, "-", 32 hex
// digits), with times to the second as a daemon really records them (to
// the nanosecond); --wide adds the caller and the update time.
func TestListFitsAHundredColumns(t *testing.T) {
	st, srv := supportServer(t)
	const longID = "p1-5686f6bfeeb6f07a3a88b83b10544f63"
	const longCaller = "k2t6j-2nvnp-4zjm3-25dtz-6xhaa-c7boj-5gayf-oj3xs-i43lp-teztq-6ae"
	seen := supporttest.Base.Add(6*time.Minute + 123456789*time.Nanosecond)
	supporttest.PutIntent(t, st, longID, supporttest.Ledger, longCaller, supporttest.Payee, "7", seen)
	supporttest.Append(t, st, reconciled.Verdict{IntentID: longID, Seq: 1, Status: reconciled.StatusUnreadable,
		Reason: &reconciled.Reason{Code: "E_TRANSPORT", Message: "reset"}, DecidedAt: seen.Add(987654321)})

	for _, wide := range []bool{false, true} {
		args := []string{"list", "--server", srv.URL}
		if wide {
			args = append(args, "--wide")
		}
		code, out, errOut := runCLI(t, tokenEnv, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if !strings.Contains(out, longID) {
			t.Errorf("%v: the long intent id is not shown whole:\n%s", args, out)
		}
		for _, l := range lines {
			if n := utf8.RuneCountInString(l); !wide && n > 100 {
				t.Errorf("list: a row is %d characters wide:\n%s", n, out)
				break
			}
		}
		for _, tm := range timeRE.FindAllString(out, -1) {
			if !secondsRE.MatchString(tm) {
				t.Errorf("%v: time %s is not to the second:\n%s", args, tm, out)
				break
			}
		}
		if wide != strings.Contains(out, longCaller) {
			t.Errorf("%v: caller shown = %t:\n%s", args, !wide, out)
		}
	}
}
