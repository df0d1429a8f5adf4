package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/internal/cli"
	"github.com/reconciled/reconciled/ledgertest"
)

func init() {
	register(command{
		Name:    "testledger",
		Summary: "serve a local test replica with ICRC ledgers (for integration tests)",
		Run:     runTestLedger,
	})
}

// balanceFlags collects repeated --initial-balance ACCOUNT=AMOUNT flags.
type balanceFlags []ledgertest.Balance

func (b *balanceFlags) String() string { return fmt.Sprint(len(*b), " balances") }

func (b *balanceFlags) Set(s string) error {
	acct, amount, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want ACCOUNT=AMOUNT, got %q", s)
	}
	a, err := icrc3.ParseAccount(acct)
	if err != nil {
		return err
	}
	n, err := icrc3.ParseNat(amount)
	if err != nil {
		return fmt.Errorf("amount %q: %w", amount, err)
	}
	*b = append(*b, ledgertest.Balance{Account: a, Amount: n})
	return nil
}

type testLedgerOut struct {
	URL      string            `json:"url"`
	RootKey  string            `json:"root_key"`
	SubnetID string            `json:"subnet_id"`
	Ledgers  []testLedgerEntry `json:"ledgers"`
}

type testLedgerEntry struct {
	CanisterID     string              `json:"canister_id"`
	MintingAccount string              `json:"minting_account"`
	Blocks         string              `json:"blocks"`
	Archives       []testLedgerArchive `json:"archives"`
}

type testLedgerArchive struct {
	CanisterID string `json:"canister_id"`
	Start      string `json:"start"`
	End        string `json:"end"`
}

func runTestLedger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("testledger", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on")
	blocks := fs.Int("blocks", 0, "deterministic history blocks to generate per ledger")
	span := fs.Duration("history-span", time.Hour, "the generated blocks' timestamps spread over this much time before now")
	seed := fs.Int64("seed", 1, "seed for keys, canister ids and history")
	ledgers := fs.Int("ledgers", 1, "number of ledgers")
	threshold := fs.Uint64("archive-threshold", 0, "archive when the ledger holds this many blocks (0: never)")
	admin := fs.Bool("admin", false, "enable the /admin/time, /admin/faults and /admin/ledgers/ID/mint endpoints")
	rootSubnet := fs.Bool("root-subnet", false, "serve as the root subnet (no delegation), like the ICP ledger")
	style := fs.String("block-style", "dfinity", "block style: dfinity (tx.op) or spec (btype)")
	tip := fs.String("tip-format", "leb128", "certified tip layout: leb128 or legacy")
	window := fs.Duration("transaction-window", 24*time.Hour, "the ledgers' transaction window (dedup and TooOld)")
	drift := fs.Duration("permitted-drift", time.Minute, "the ledgers' permitted drift (CreatedInFuture)")
	kind := fs.String("ledger-kind", "icrc", "ledger kind: icrc (ICRC-1/2/3) or icp (the ICP ledger's protobuf blocks, query_encoded_blocks and archives, no ICRC-3)")
	envFile := fs.String("env-file", "", "once serving, write the URL, root key and first ledger id to this file as shell variables (TESTLEDGER_URL, TESTLEDGER_ROOT_KEY, TESTLEDGER_LEDGER)")
	var balances balanceFlags
	fs.Var(&balances, "initial-balance", "ACCOUNT=AMOUNT minted at creation on every ledger (repeatable)")
	fs.Var(&balances, "fund", "ACCOUNT=AMOUNT: the same as --initial-balance (an account is a principal, or principal.subaccount)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	// The test replica's keys derive from a public seed: it must not be
	// reachable from beyond this machine.
	if err := cli.LoopbackOnly(*listen); err != nil {
		return fmt.Errorf("%w: --listen: %v", errUsage, err)
	}
	if *ledgers < 1 || *ledgers > 100 {
		return fmt.Errorf("%w: --ledgers must be 1..100, got %d", errUsage, *ledgers)
	}
	if *blocks < 0 {
		return fmt.Errorf("%w: --blocks must not be negative, got %d", errUsage, *blocks)
	}
	if *window <= 0 || *drift <= 0 {
		return fmt.Errorf("%w: --transaction-window and --permitted-drift must be positive", errUsage)
	}
	cfg := ledgertest.LedgerConfig{ArchiveThreshold: *threshold, InitialBalances: balances, TransactionWindow: *window, PermittedDrift: *drift}
	switch *style {
	case "dfinity":
		cfg.BlockStyle = ledgertest.StyleDFINITY
	case "spec":
		cfg.BlockStyle = ledgertest.StyleSpec
	default:
		return fmt.Errorf("%w: --block-style must be dfinity or spec, got %q", errUsage, *style)
	}
	switch *tip {
	case "leb128":
		cfg.TipFormat = ledgertest.TipLEB128
	case "legacy":
		cfg.TipFormat = ledgertest.TipLegacy
	default:
		return fmt.Errorf("%w: --tip-format must be leb128 or legacy, got %q", errUsage, *tip)
	}

	if *kind != "icrc" && *kind != "icp" {
		return fmt.Errorf("%w: --ledger-kind must be icrc or icp, got %q", errUsage, *kind)
	}

	opts := []ledgertest.Option{ledgertest.WithListenAddr(*listen), ledgertest.WithSeed(*seed)}
	if *admin {
		opts = append(opts, ledgertest.WithAdmin())
	}
	if *rootSubnet {
		opts = append(opts, ledgertest.WithRootSubnet())
	}
	s, err := ledgertest.NewServer(opts...)
	if err != nil {
		return err
	}
	out := testLedgerOut{URL: s.URL(), RootKey: hex.EncodeToString(s.RootKey()), SubnetID: s.SubnetID().Encode()}
	for i := 0; i < *ledgers; i++ {
		l, err := newTestLedger(s, cfg, *kind, *blocks, *seed+int64(i), *span)
		if err != nil {
			s.Close()
			return fmt.Errorf("ledger %d: %w", i, err)
		}
		e := testLedgerEntry{
			CanisterID:     l.ID().Encode(),
			MintingAccount: l.MintingAccount().String(),
			Blocks:         strconv.FormatUint(l.Len(), 10),
			Archives:       []testLedgerArchive{},
		}
		for _, a := range l.Archives() {
			e.Archives = append(e.Archives, testLedgerArchive{
				CanisterID: a.ID.Encode(),
				Start:      strconv.FormatUint(a.Start, 10),
				End:        strconv.FormatUint(a.End, 10),
			})
		}
		out.Ledgers = append(out.Ledgers, e)
	}
	line, err := json.Marshal(out)
	if err != nil {
		s.Close()
		return fmt.Errorf("encode ready line: %w", err)
	}
	if *envFile != "" {
		if err := writeEnvFile(*envFile, out); err != nil {
			s.Close()
			return err
		}
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		s.Close()
		return fmt.Errorf("write ready line: %w", err)
	}
	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// servedLedger is what the ready line reports of a test ledger.
type servedLedger interface {
	ID() principal.Principal
	MintingAccount() icrc3.Account
	Len() uint64
	Archives() []ledgertest.ArchiveInfo
}

// newTestLedger creates a ledger of kind and its generated history.
func newTestLedger(s *ledgertest.Server, cfg ledgertest.LedgerConfig, kind string, blocks int, seed int64, span time.Duration) (servedLedger, error) {
	if kind == "icp" {
		l, err := s.NewICPLedger(cfg)
		if err != nil {
			return nil, err
		}
		if blocks > 0 {
			if err := l.Inner().GenerateHistory(blocks, seed, span); err != nil {
				return nil, fmt.Errorf("generate %d blocks: %w", blocks, err)
			}
		}
		return l, l.Sync()
	}
	l, err := s.NewLedger(cfg)
	if err != nil {
		return nil, err
	}
	if blocks > 0 {
		if err := l.GenerateHistory(blocks, seed, span); err != nil {
			return nil, fmt.Errorf("generate %d blocks: %w", blocks, err)
		}
	}
	return l, nil
}

// writeEnvFile writes the ready line's essentials as a file a shell can
// source. It appears whole (written aside, then renamed), so a script may
// wait for it to exist.
func writeEnvFile(path string, out testLedgerOut) error {
	body := fmt.Sprintf("TESTLEDGER_URL=%s\nTESTLEDGER_ROOT_KEY=%s\nTESTLEDGER_LEDGER=%s\n", out.URL, out.RootKey, out.Ledgers[0].CanisterID)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		return fmt.Errorf("--env-file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("--env-file: %w", err)
	}
	return nil
}
