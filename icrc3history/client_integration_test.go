package icrc3history_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/candid"

	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/icrc3history"
	"github.com/reconciled/reconciled/ledgertest"
	"github.com/reconciled/reconciled/ledgertest/testworld"
)

// testAgentConfig: signed-query verification on, as in production.
var testAgentConfig = agent.Config{}

type env struct {
	w      *testworld.World
	srv    *ledgertest.Server
	ledger *ledgertest.Ledger
	agent  *agent.Agent
}

func newEnv(t testing.TB, cfg ledgertest.LedgerConfig, blocks int, opts ...ledgertest.Option) *env {
	t.Helper()
	w := testworld.New(t, testworld.Options{Seed: 7, Server: opts, Ledger: cfg,
		Blocks: blocks, HistorySeed: 11, HistorySpan: 10 * time.Hour, Agent: testAgentConfig})
	return &env{w: w, srv: w.Server, ledger: w.Ledger, agent: w.Agent}
}

func (e *env) client(t testing.TB, cfg icrc3history.ClientConfig) *icrc3history.Client {
	t.Helper()
	return e.w.NewClient(t, cfg)
}

func archived() ledgertest.LedgerConfig {
	return ledgertest.LedgerConfig{ArchiveThreshold: 2000, ArchiveBatch: 1000, ArchiveCapacity: 3000}
}

// readVerified reads [0, tip] from the top down and verifies it against the
// certified tip; it also checks every block against the ledger's ground
// truth and that the walk covered the whole chain.
func readVerified(t testing.TB, c *icrc3history.Client, l *ledgertest.Ledger) (icrc3.Tip, error) {
	t.Helper()
	ctx := context.Background()
	tip, err := c.Tip(ctx)
	if err != nil {
		return tip, err
	}
	v := icrc3.NewVerifier(tip.Anchor())
	err = c.BlocksDesc(ctx, 0, tip.Len(), func(page []icrc3.Block) error {
		if err := v.PushPage(page); err != nil {
			return err
		}
		for i := range page {
			want, ok := l.Block(page[i].Index)
			if !ok || !bytes.Equal(icrc3.MarshalValue(want), page[i].Raw) {
				t.Errorf("verified block %d differs from the ledger's", page[i].Index)
			}
			// The Verifier trusts the hash the decoder computed while
			// decoding; it must be the hash of the decoded Value.
			if got, err := page[i].Value(); err != nil || page[i].Hash != got.Hash() {
				t.Errorf("block %d: decoder hash differs from Value.Hash()", page[i].Index)
			}
		}
		return nil
	})
	if err != nil {
		return tip, err
	}
	if !v.Done() || v.Checked() != tip.Len() {
		t.Fatalf("walk done %v, %d of %d blocks verified", v.Done(), v.Checked(), tip.Len())
	}
	return tip, nil
}

func TestClientReadsAndVerifiesArchivedHistory(t *testing.T) {
	const n = 10_000
	for _, style := range []ledgertest.BlockStyle{ledgertest.StyleDFINITY, ledgertest.StyleSpec} {
		for _, tf := range []ledgertest.TipFormat{ledgertest.TipLEB128, ledgertest.TipLegacy} {
			cfg := archived()
			cfg.BlockStyle, cfg.TipFormat = style, tf
			cfg.Overlap = tf == ledgertest.TipLegacy
			e := newEnv(t, cfg, n)
			if len(e.ledger.Archives()) < 2 {
				t.Fatalf("want several archives, got %v", e.ledger.Archives())
			}
			for _, ep := range []icrc3.Endpoint{icrc3.EndpointICRC3, icrc3.EndpointLegacy} {
				t.Run(fmt.Sprintf("style%d/tip%d/%s", style, tf, ep), func(t *testing.T) {
					c := e.client(t, icrc3history.ClientConfig{Endpoint: ep})
					f, err := c.Detect(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					// Only the endpoint the client reads is probed, and the
					// legacy certificate only when the ICRC-3 one is missing.
					readsICRC3 := ep == icrc3.EndpointICRC3
					if f.ICRC3Blocks != readsICRC3 || f.LegacyBlocks == readsICRC3 || !f.ICRC3Tip || f.LegacyTip || f.Endpoint != ep {
						t.Fatalf("features %+v", f)
					}
					if f.MintingAccount == nil || !f.MintingAccount.Equal(e.ledger.MintingAccount()) {
						t.Fatalf("minting account %v, want %v", f.MintingAccount, e.ledger.MintingAccount())
					}
					tip, err := readVerified(t, c, e.ledger)
					if err != nil {
						t.Fatal(err)
					}
					wantFormat := icrc3.TipFormatLEB128
					if tf == ledgertest.TipLegacy {
						wantFormat = icrc3.TipFormatLegacy
					}
					if tip.Len() != n || tip.Hash != e.ledger.TipHash() || tip.Format != wantFormat {
						t.Fatalf("tip %+v, ledger has %d blocks, tip hash %s", tip, e.ledger.Len(), e.ledger.TipHash())
					}
					s := c.Stats()
					t.Logf("%s: %d queries %v", ep, s.Total, s.Queries)
				})
			}
		}
	}
}

func TestClientAscendingAndIncremental(t *testing.T) {
	e := newEnv(t, archived(), 5000)
	c := e.client(t, icrc3history.ClientConfig{Concurrency: 3})
	ctx := context.Background()
	tip, err := c.Tip(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := uint64(1234)
	var all []icrc3.Block
	err = c.Blocks(ctx, 1234, tip.Len(), func(page []icrc3.Block) error {
		if page[0].Index != next {
			t.Fatalf("page starts at %d, want %d", page[0].Index, next)
		}
		next = page[len(page)-1].Index + 1
		all = append(all, page...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := icrc3.VerifyRange(tip.Anchor(), all); err != nil {
		t.Fatal(err)
	}

	// The ledger grows; only the new blocks are read and linked to the
	// anchor verified before.
	old := tip.Anchor()
	if err := e.ledger.GenerateHistory(700, 12, time.Minute); err != nil {
		t.Fatal(err)
	}
	tip2, err := c.Tip(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := icrc3.NewIncrementalVerifier(tip2.Anchor(), old)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.BlocksDesc(ctx, old.Index+1, tip2.Len(), func(p []icrc3.Block) error { return v.PushPage(p) }); err != nil {
		t.Fatal(err)
	}
	if !v.Done() || v.Checked() != 700 {
		t.Fatalf("done %v checked %d", v.Done(), v.Checked())
	}
}

func TestClientSingleEndpointLedgers(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ledgertest.LedgerConfig
		want icrc3.Endpoint
	}{
		{"icrc3 only", ledgertest.LedgerConfig{DisableLegacy: true, ArchiveThreshold: 500}, icrc3.EndpointICRC3},
		{"legacy only", ledgertest.LedgerConfig{DisableICRC3: true, ArchiveThreshold: 500}, icrc3.EndpointLegacy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.cfg, 1500)
			c := e.client(t, icrc3history.ClientConfig{})
			f, err := c.Detect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if f.Endpoint != tc.want {
				t.Fatalf("endpoint %s, want %s (%+v)", f.Endpoint, tc.want, f)
			}
			if _, err := readVerified(t, c, e.ledger); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("neither", func(t *testing.T) {
		e := newEnv(t, ledgertest.LedgerConfig{}, 10)
		e.srv.Install(override{e.ledger, func(method string) ([]byte, *ledgertest.Reject, bool) {
			if method == "icrc3_get_blocks" || method == "get_blocks" {
				return nil, &ledgertest.Reject{Code: ledgertest.RejectDestinationInvalid,
					Message: "Canister has no query method '" + method + "'", ErrorCode: "IC0536"}, true
			}
			return nil, nil, false
		}})
		c := e.client(t, icrc3history.ClientConfig{})
		_, err := c.Detect(context.Background())
		wantCode(t, err, "E_UNSUPPORTED")
	})
}

// Non-delegated mode: certificates signed by the root key itself, as for
// canisters on the NNS subnet.
func TestClientRootSubnet(t *testing.T) {
	e := newEnv(t, archived(), 2500, ledgertest.WithRootSubnet())
	c := e.client(t, icrc3history.ClientConfig{})
	tip, err := readVerified(t, c, e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	if tip.Len() != 2500 || tip.Hash != e.ledger.TipHash() {
		t.Fatalf("tip %+v", tip)
	}
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{WrongKey: true})
	_, err = c.Tip(context.Background())
	wantCode(t, err, "E_CERTIFICATE")
}

func TestClientEmptyLedger(t *testing.T) {
	e := newEnv(t, ledgertest.LedgerConfig{}, 0)
	c := e.client(t, icrc3history.ClientConfig{})
	tip, err := c.Tip(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !tip.Empty || tip.Len() != 0 {
		t.Fatalf("tip %+v", tip)
	}
	// Features are probed once. The minting account is read by the first
	// Detect (a tip does not wait for it) and kept once certified.
	before := c.Stats()
	if _, err := c.Detect(context.Background()); err != nil || c.Stats().Total != before.Total+1 || c.Stats().Queries["ledger:call:icrc1_minting_account"] != 1 {
		t.Fatalf("first Detect after a tip: %v, %v", err, c.Stats().Queries)
	}
	before = c.Stats()
	if _, err := c.Detect(context.Background()); err != nil || c.Stats().Total != before.Total {
		t.Fatalf("second Detect: %v, %d queries", err, c.Stats().Total-before.Total)
	}
}

func wantCode(t testing.TB, err error, code string) *icrc3.Error {
	t.Helper()
	var e *icrc3.Error
	if !errors.As(err, &e) || e.Kind.Code() != code {
		t.Fatalf("want %s, got %v", code, err)
	}
	return e
}

// A reading that fails must fail before any verified page holds a forged or
// missing block: pages that reach the caller are checked here against the
// ledger's ground truth.
func readUntilError(t *testing.T, c *icrc3history.Client, l *ledgertest.Ledger, tip icrc3.Tip) error {
	t.Helper()
	v := icrc3.NewVerifier(tip.Anchor())
	return c.BlocksDesc(context.Background(), 0, tip.Len(), func(page []icrc3.Block) error {
		if err := v.PushPage(page); err != nil {
			return err
		}
		for i := range page {
			if want, _ := l.Block(page[i].Index); !bytes.Equal(icrc3.MarshalValue(want), page[i].Raw) {
				t.Fatalf("block %d verified but forged", page[i].Index)
			}
		}
		return nil
	})
}

func TestClientFaults(t *testing.T) {
	const n = 3000
	for _, ep := range []icrc3.Endpoint{icrc3.EndpointICRC3, icrc3.EndpointLegacy} {
		e := newEnv(t, archived(), n)
		arch := e.ledger.Archives()[0]
		ledgerBlock := e.ledger.Len() - 10
		archBlock := arch.Start + 17

		cases := []struct {
			name  string
			id    func() icrcID
			f     ledgertest.Faults
			code  string
			index *uint64
			omit  bool
		}{
			{"omit ledger block", ledgerID, ledgertest.Faults{OmitBlock: ledgerBlock + 1}, "E_CHAIN", &ledgerBlock, true},
			{"alter ledger block", ledgerID, ledgertest.Faults{AlterBlock: ledgerBlock + 1}, "E_CHAIN", &ledgerBlock, false},
			{"omit archived block", archiveID, ledgertest.Faults{OmitBlock: archBlock + 1}, "E_CHAIN", &archBlock, true},
			{"alter archived block", archiveID, ledgertest.Faults{AlterBlock: archBlock + 1}, "E_CHAIN", &archBlock, false},
			{"archive down", archiveID, ledgertest.Faults{Unreachable: true}, "E_ARCHIVE_UNREACHABLE", nil, false},
			{"archive 500", archiveID, ledgertest.Faults{HTTPStatus: 500}, "E_ARCHIVE_UNREACHABLE", nil, false},
			{"archive rejects", archiveID, ledgertest.Faults{QueryReject: 5}, "E_ARCHIVE_UNREACHABLE", nil, false},
			{"ledger garbage cbor", ledgerID, ledgertest.Faults{Garbage: "cbor"}, "E_DECODE", nil, false},
			{"ledger garbage candid", ledgerID, ledgertest.Faults{Garbage: "candid"}, "E_DECODE", nil, false},
			{"ledger truncated", ledgerID, ledgertest.Faults{Garbage: "truncated"}, "E_DECODE", nil, false},
		}
		for _, tc := range cases {
			t.Run(string(ep)+"/"+tc.name, func(t *testing.T) {
				c := e.client(t, icrc3history.ClientConfig{Endpoint: ep})
				tip, err := c.Tip(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				id := e.ledger.ID()
				if tc.id().archive {
					id = arch.ID
				}
				e.srv.SetFaults(id, tc.f)
				defer e.srv.SetFaults(id, ledgertest.Faults{})
				err = readUntilError(t, c, e.ledger, tip)
				got := wantCode(t, err, tc.code)
				t.Log(err)
				if tc.index == nil {
					return
				}
				// An altered block breaks the chain at itself. A dropped
				// block is seen where it is missing, or, in legacy replies
				// that number blocks by position, where the shifted blocks
				// above it stop linking.
				if got.Index == nil || *got.Index < *tc.index || (!tc.omit && *got.Index != *tc.index) {
					t.Fatalf("error at block %v, want block %d: %v", got.Index, *tc.index, err)
				}
			})
		}
	}
}

type icrcID struct{ archive bool }

func ledgerID() icrcID  { return icrcID{} }
func archiveID() icrcID { return icrcID{archive: true} }

func TestClientCertificateFaults(t *testing.T) {
	e := newEnv(t, ledgertest.LedgerConfig{}, 100)
	for _, tc := range []struct {
		name string
		f    ledgertest.Faults
		code string
	}{
		{"wrong key", ledgertest.Faults{WrongKey: true}, "E_CERTIFICATE"},
		{"foreign certificate", ledgertest.Faults{ForeignCertificate: true}, "E_CERTIFICATE"},
		{"stale", ledgertest.Faults{StaleTime: 10 * time.Minute}, "E_STALE_CERTIFICATE"},
		{"query reject", ledgertest.Faults{QueryReject: 4}, "E_REJECT"},
		{"http 503", ledgertest.Faults{HTTPStatus: 503}, "E_TRANSPORT"},
		{"unreachable", ledgertest.Faults{Unreachable: true}, "E_TRANSPORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.client(t, icrc3history.ClientConfig{})
			// The first tip after detection may be detection's own reply:
			// take it before the fault is set.
			if _, err := c.Tip(context.Background()); err != nil {
				t.Fatal(err)
			}
			e.srv.SetFaults(e.ledger.ID(), tc.f)
			defer e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{})
			_, err := c.Tip(context.Background())
			wantCode(t, err, tc.code)
		})
	}
}

func TestClientLaggingReplica(t *testing.T) {
	for _, ep := range []icrc3.Endpoint{icrc3.EndpointICRC3, icrc3.EndpointLegacy} {
		t.Run(string(ep), func(t *testing.T) {
			e := newEnv(t, archived(), 2500)
			// A lagging state's certified time precedes the blocks it lacks;
			// generated history is stamped in the past, so allow old ones.
			c := e.client(t, icrc3history.ClientConfig{Endpoint: ep, MaxCertAge: 365 * 24 * time.Hour})
			tip, err := c.Tip(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{LagBlocks: 50})
			// The lagging replica certifies an older tip: authentic, lower.
			old, err := c.Tip(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if old.Index != tip.Index-50 {
				t.Fatalf("lagging tip %d, want %d", old.Index, tip.Index-50)
			}
			// Blocks the newer tip proved exist are never reported missing.
			err = c.BlocksDesc(context.Background(), 0, tip.Len(), func([]icrc3.Block) error { return nil })
			le := wantCode(t, err, "E_LAGGING")
			if le.Index == nil || *le.Index < old.Len() {
				t.Fatalf("lagging at %v", le.Index)
			}
			if c.KnownLength() != tip.Len() {
				t.Fatalf("known length shrank to %d", c.KnownLength())
			}
		})
	}
}

// override hosts a ledger with some query methods answered differently.
type override struct {
	*ledgertest.Ledger
	query func(method string) ([]byte, *ledgertest.Reject, bool)
}

func (o override) Query(ctx ledgertest.CallContext, method string, arg []byte) ([]byte, *ledgertest.Reject) {
	if out, rej, ok := o.query(method); ok {
		return out, rej
	}
	return o.Ledger.Query(ctx, method, arg)
}

// uncertified answers the tip endpoints without a certificate, as a ledger
// does when called in replicated mode.
func uncertified(method string) ([]byte, *ledgertest.Reject, bool) {
	var v any
	switch method {
	case "icrc3_get_tip_certificate":
		v = (*struct {
			Certificate []byte `ic:"certificate"`
			HashTree    []byte `ic:"hash_tree"`
		})(nil)
	case "get_data_certificate":
		v = struct {
			Certificate *[]byte `ic:"certificate,omitempty"`
			HashTree    []byte  `ic:"hash_tree"`
		}{HashTree: []byte{}}
	default:
		return nil, nil, false
	}
	b, err := candid.Marshal([]any{v})
	if err != nil {
		panic(err)
	}
	return b, nil, true
}

func TestClientUncertified(t *testing.T) {
	e := newEnv(t, archived(), 2100)
	e.srv.Install(override{e.ledger, uncertified})
	c := e.client(t, icrc3history.ClientConfig{})
	_, err := c.Tip(context.Background())
	wantCode(t, err, "E_UNCERTIFIED")

	// An operator may accept signed queries for such a ledger: the tip
	// then comes from a verified query and the chain still links to it.
	for _, ep := range []icrc3.Endpoint{icrc3.EndpointICRC3, icrc3.EndpointLegacy} {
		c = e.client(t, icrc3history.ClientConfig{Verify: icrc3.VerifyQueries, Endpoint: ep})
		tip, err := readVerified(t, c, e.ledger)
		if err != nil {
			t.Fatal(err)
		}
		if tip.Format != icrc3.TipFormatQueries || tip.Hash != e.ledger.TipHash() {
			t.Fatalf("tip %+v", tip)
		}
	}
}

func TestClientBoundedConcurrencyAndCancel(t *testing.T) {
	e := newEnv(t, archived(), 4000)
	c := e.client(t, icrc3history.ClientConfig{Concurrency: 3, Endpoint: icrc3.EndpointICRC3})
	ctx := context.Background()
	tip, err := c.Tip(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Slow replies keep every allowed page in flight at once.
	for _, a := range e.ledger.Archives() {
		e.srv.SetFaults(a.ID, ledgertest.Faults{Latency: 20 * time.Millisecond})
	}
	e.srv.SetFaults(e.ledger.ID(), ledgertest.Faults{Latency: 20 * time.Millisecond})
	pages := 0
	err = c.BlocksDesc(ctx, 0, tip.Len(), func([]icrc3.Block) error { pages++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.MaxInFlight > 3 || s.MaxInFlight < 2 || pages != 40 {
		t.Fatalf("max in flight %d (limit 3), %d pages", s.MaxInFlight, pages)
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages = 0
	err = c.Blocks(cctx, 0, tip.Len(), func([]icrc3.Block) error {
		pages++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || pages != 1 {
		t.Fatalf("after cancel: %d pages, %v", pages, err)
	}
	stop := errors.New("enough")
	if err := c.Blocks(ctx, 0, tip.Len(), func([]icrc3.Block) error { return stop }); err != stop {
		t.Fatalf("callback error not returned as is: %v", err)
	}
}

// TestPageRequestGoesOutWhileDecoding: a reply gives its request slot back
// before it is decoded, so with one request in flight the next page is
// asked for while the previous reply still waits to be decoded, instead of
// every decoding adding to the round trips in series.
func TestPageRequestGoesOutWhileDecoding(t *testing.T) {
	e := newEnv(t, archived(), 7000)
	c := e.client(t, icrc3history.ClientConfig{Concurrency: 1, Endpoint: icrc3.EndpointLegacy})
	ctx := context.Background()
	tip, err := c.Tip(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Page requests the replica has seen, on the ledger and its archives.
	pageCalls := func() (n uint64) {
		for m, k := range e.ledger.Counters().Calls {
			if strings.HasSuffix(m, "get_blocks") {
				n += k
			}
		}
		return n
	}
	// With one request in flight the second page's request can only go
	// out once the first page's reply is in; it may reach the replica
	// before the hook below runs, so what is counted is page requests
	// since the walk began, not since the hook.
	n0 := pageCalls()
	var once sync.Once
	waited := false
	defer icrc3history.SetAfterPageReply(func() {
		once.Do(func() {
			// Hold the first reply back from decoding until the replica has
			// seen the next page's request, or give up.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if pageCalls() >= n0+2 {
					waited = true
					return
				}
			}
		})
	})()
	pages := 0
	if err := c.BlocksDesc(ctx, 0, tip.Len(), func([]icrc3.Block) error { pages++; return nil }); err != nil {
		t.Fatal(err)
	}
	if !waited {
		t.Fatal("no further page was requested while a reply waited to be decoded")
	}
	if pages < 4 {
		t.Fatalf("%d pages, want the whole chain's", pages)
	}
}
