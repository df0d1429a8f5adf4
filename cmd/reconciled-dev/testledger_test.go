package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/candid/idl"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc1"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/ledgertest"
)

func TestTestLedgerPrintsReadyLineAndServes(t *testing.T) {
	owner := principal.NewSelfAuthenticating([]byte("testledger-owner"))
	out, stop := startTestLedger(t,
		"--listen", "127.0.0.1:0", "--blocks", "40", "--seed", "5", "--ledgers", "2",
		"--initial-balance", owner.Encode()+"=123456789", "--archive-threshold", "20",
		"--block-style", "spec", "--tip-format", "legacy", "--admin",
	)
	if !strings.HasPrefix(out.URL, "http://127.0.0.1:") || len(out.Ledgers) != 2 {
		t.Fatalf("ready line %+v", out)
	}
	if k, err := hex.DecodeString(out.RootKey); err != nil || len(k) != 133 {
		t.Fatalf("root_key %q", out.RootKey)
	}
	for _, l := range out.Ledgers {
		if l.Blocks != "41" || len(l.Archives) == 0 || l.Archives[0].Start != "0" {
			t.Fatalf("ledger %+v: want 1 mint + 40 blocks and archives from block 0", l)
		}
		if _, err := icrc3.ParseAccount(l.MintingAccount); err != nil {
			t.Fatal(err)
		}
	}

	// The replica serves while the context lives: read the minted balance
	// with a verified query through an unmodified agent.
	u, _ := url.Parse(out.URL)
	a, err := agent.New(agent.Config{FetchRootKey: true, ClientConfig: []agent.ClientOption{
		agent.WithHostURL(u), agent.WithHttpClient(ledgertest.LoopbackHTTPClient()),
	}})
	if err != nil {
		t.Fatal(err)
	}
	ledger := principal.MustDecode(out.Ledgers[0].CanisterID)
	var bal idl.Nat
	if err := a.Query(ledger, "icrc1_balance_of", []any{icrc3.CandidAccount{Owner: owner}}, []any{&bal}); err != nil {
		t.Fatal(err)
	}
	if bal.BigInt().Sign() <= 0 {
		t.Fatalf("balance of the initial holder = %s", bal.BigInt())
	}

	if err := stop(); err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
}

func TestTestLedgerCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	if err := runTestLedger(ctx, []string{"--listen", "127.0.0.1:0", "--root-subnet"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	var out testLedgerOut
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Ledgers) != 1 || out.Ledgers[0].Blocks != "0" {
		t.Fatalf("stdout %q: %v", stdout.String(), err)
	}
	if strings.Count(stdout.String(), "\n") != 1 {
		t.Fatalf("want exactly one line, got %q", stdout.String())
	}
}

func TestTestLedgerUsageErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{
		{"--listen", "0.0.0.0:0"},
		{"--listen", "192.168.1.1:8080"},
		{"--listen", "nonsense"},
		{"--ledgers", "0"},
		{"--blocks", "-1"},
		{"--block-style", "fancy"},
		{"--tip-format", "be64"},
		{"--initial-balance", "nobody"},
		{"--initial-balance", "aaaaa-aa=-5"},
		{"--fund", "nobody"},
		{"--transaction-window", "0s"},
		{"--permitted-drift", "-1s"},
		{"--no-such-flag"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		err := runTestLedger(ctx, args, &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Fatalf("%q: error %v, want a usage error", args, err)
		}
		if stdout.Len() != 0 {
			t.Fatalf("%q printed %q", args, stdout.String())
		}
	}
}

// TestTestLedgerWindowAndFunding: --transaction-window and --permitted-drift
// reach the ledgers, --fund credits accounts at creation and the admin mint
// endpoint funds them later with an ordinary mint block.
func TestTestLedgerWindowAndFunding(t *testing.T) {
	alice := principal.NewSelfAuthenticating([]byte("testledger-alice"))
	bob := principal.NewSelfAuthenticating([]byte("testledger-bob"))
	envFile := filepath.Join(t.TempDir(), "testledger.env")
	out, stop := startTestLedger(t,
		"--listen", "127.0.0.1:0", "--admin", "--fund", alice.Encode()+"=5000000",
		"--transaction-window", "1h", "--permitted-drift", "5s", "--env-file", envFile,
	)
	ledger := principal.MustDecode(out.Ledgers[0].CanisterID)
	env, err := os.ReadFile(envFile)
	if want := "TESTLEDGER_URL=" + out.URL + "\nTESTLEDGER_ROOT_KEY=" + out.RootKey + "\nTESTLEDGER_LEDGER=" + ledger.Encode() + "\n"; err != nil || string(env) != want {
		t.Fatalf("--env-file holds %q (%v), want %q", env, err, want)
	}
	resp, err := ledgertest.LoopbackHTTPClient().Post(out.URL+"/admin/ledgers/"+ledger.Encode()+"/mint", "application/json",
		strings.NewReader(`{"to":"`+bob.Encode()+`","amount":"777"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"block":"1"`) {
		t.Fatalf("admin mint: %d %s", resp.StatusCode, body)
	}
	u, _ := url.Parse(out.URL)
	a, err := agent.New(agent.Config{FetchRootKey: true, ClientConfig: []agent.ClientOption{
		agent.WithHostURL(u), agent.WithHttpClient(ledgertest.LoopbackHTTPClient()),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var bal idl.Nat
	if err := a.Query(ledger, "icrc1_balance_of", []any{icrc3.CandidAccount{Owner: bob}}, []any{&bal}); err != nil || bal.BigInt().Int64() != 777 {
		t.Fatalf("minted balance %v, %v", bal.BigInt(), err)
	}
	// The ledger's clock is the replica's; read it from the admin endpoint.
	resp, err = ledgertest.LoopbackHTTPClient().Get(out.URL + "/admin/time")
	if err != nil {
		t.Fatal(err)
	}
	var now struct {
		NowNS string `json:"now_ns"`
	}
	err = json.NewDecoder(resp.Body).Decode(&now)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := icrc3.ParseNat(now.NowNS)
	ns := n.Big().Uint64()
	for _, c := range []struct {
		created uint64
		want    string
	}{
		{ns - uint64(61*time.Minute), "TooOld"},          // older than the 1 h window
		{ns + uint64(10*time.Second), "CreatedInFuture"}, // beyond the 5 s drift
	} {
		var tr icrc1.TransferResult
		created := c.created
		arg := icrc1.TransferArg{To: icrc3.CandidAccount{Owner: alice}, Amount: idl.NewNat(uint64(1)), CreatedAtTime: &created}
		if err := a.Call(ledger, "icrc1_transfer", []any{arg}, []any{&tr}); err != nil {
			t.Fatal(err)
		}
		got := ""
		switch {
		case tr.Err != nil && tr.Err.TooOld != nil:
			got = "TooOld"
		case tr.Err != nil && tr.Err.CreatedInFuture != nil:
			got = "CreatedInFuture"
		}
		if got != c.want {
			t.Fatalf("created_at_time %d: %+v, want %s", c.created, tr, c.want)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// startTestLedger runs the testledger command until stop, which cancels it
// and returns its error, and returns its ready line.
func startTestLedger(t *testing.T, args ...string) (out testLedgerOut, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runTestLedger(ctx, args, pw, &stderr)
		pw.Close()
	}()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		stop()
		t.Fatalf("no ready line: %v (stderr %q)", err, stderr.String())
	}
	if err := json.Unmarshal([]byte(line), &out); err != nil {
		stop()
		t.Fatalf("ready line %q: %v", line, err)
	}
	return out, stop
}
