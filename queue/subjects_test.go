package queue

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reconciled/reconciled"
	"github.com/reconciled/reconciled/matcher"
)

var badTokens = []string{"", "a.b", "a*", "*", ">", "a>", "a b", "a\tb", "a\nb", "a\x00b", "\u00a0", strings.Repeat("x", 257), "\xff"}

func TestBadTokensRefused(t *testing.T) {
	_, c := setup(t)
	ctx := testCtx(t)
	for _, tok := range badTokens {
		if _, err := c.PublishIntent(ctx, tok, "ok-id", []byte("{}"), matcher.IntentHash([]byte("{}"))); err == nil {
			t.Errorf("PublishIntent accepted canister %q", tok)
		}
		if _, err := c.PublishIntent(ctx, canister, tok, []byte("{}"), matcher.IntentHash([]byte("{}"))); err == nil {
			t.Errorf("PublishIntent accepted intent id %q", tok)
		}
		if err := c.PublishVerdict(ctx, reconciled.Verdict{IntentID: tok, Seq: 1, Status: reconciled.StatusNotYet}); err == nil {
			t.Errorf("PublishVerdict accepted intent id %q", tok)
		}
		if err := c.PublishReject(ctx, tok, "E_INTENT_CONFLICT", "x"); err == nil {
			t.Errorf("PublishReject accepted intent id %q", tok)
		}
		if _, err := c.LastVerdict(ctx, tok); err == nil {
			t.Errorf("LastVerdict accepted intent id %q", tok)
		}
		if err := c.WatchIntent(ctx, tok, func(reconciled.Verdict) error { return nil }); err == nil {
			t.Errorf("WatchIntent accepted intent id %q", tok)
		}
	}
	if _, err := c.PublishIntent(ctx, canister, "too-big", make([]byte, MaxIntentBytes+1), matcher.IntentHash(make([]byte, MaxIntentBytes+1))); err == nil {
		t.Error("PublishIntent accepted an intent too large for its verdicts")
	}
	if m := streamInfo(t, c, IntentsStream).State.Msgs + streamInfo(t, c, VerdictsStream).State.Msgs; m != 0 {
		t.Fatalf("%d messages stored from refused publishes", m)
	}
	for _, p := range []string{"a..b", "a.*", ">", "a b", ".a"} {
		if _, err := NewSubjects(p); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
	for _, tok := range []string{"p1-3f2a", "mxzaz-hqaaa-aaaar-qaada-cai", "A_b-9", strings.Repeat("x", 128)} {
		if err := ValidToken(tok); err != nil {
			t.Errorf("ValidToken(%q) = %v", tok, err)
		}
	}
}

func TestCustomPrefix(t *testing.T) {
	e := startServer(t, t.TempDir())
	c := connect(t, e, func(cfg *ConnConfig) { cfg.Prefix = "prod.reconcile" })
	ctx := testCtx(t)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	if got := streamInfo(t, c, IntentsStream).Config.Subjects; len(got) != 1 || got[0] != "prod.reconcile.intents.>" {
		t.Fatalf("subjects %v", got)
	}
	if err := c.PublishVerdict(ctx, verdict("x-1", 1, reconciled.StatusAbsent)); err != nil {
		t.Fatal(err)
	}
	if v, err := c.LastVerdict(ctx, "x-1"); err != nil || v.Seq != 1 {
		t.Fatalf("LastVerdict %+v %v", v, err)
	}
}

func TestRejectRoundTrip(t *testing.T) {
	_, c := setup(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	got := make(chan Reject, 1)
	if err := c.SubscribeRejects(ctx, "rj-1", func(r Reject) { got <- r }); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishReject(ctx, "rj-1", "E_INTENT_CONFLICT", "same id, different body"); err != nil {
		t.Fatal(err)
	}
	r := recv(t, got, "reject")
	if r != (Reject{IntentID: "rj-1", Code: "E_INTENT_CONFLICT", Message: "same id, different body"}) {
		t.Fatalf("reject %+v", r)
	}
}

func TestEmbeddedListenLoopbackOnly(t *testing.T) {
	for _, l := range []string{"0.0.0.0:0", "10.1.2.3:0", ":0", "localhost:0", "[::]:0", "127.0.0.1"} {
		if e, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), Listen: l}); err == nil {
			e.Shutdown()
			t.Errorf("listen %q accepted", l)
		}
	}
	e, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	url := e.ClientURL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":-1") {
		t.Fatalf("client url %q", url)
	}
	c := connect(t, nil, func(cfg *ConnConfig) { cfg.Embedded, cfg.URL = nil, url })
	if err := c.EnsureStreams(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if inproc := startServer(t, t.TempDir()); inproc.ClientURL() != "" {
		t.Fatalf("in-process server has client url %q", inproc.ClientURL())
	}
}

func TestConnectGivesUpWithContext(t *testing.T) {
	// A loopback port nothing listens on: start a server, note its port,
	// stop it.
	e, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	url := e.ClientURL()
	e.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 300*1e6)
	defer cancel()
	if c, err := Connect(ctx, ConnConfig{URL: url}); err == nil {
		c.Close()
		t.Fatal("connected to a stopped server")
	}
}

func TestEmbeddedDurabilitySettings(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	e := startServer(t, dir)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("data dir mode %o, want 700", perm)
	}
	js := e.Server().JetStreamConfig()
	if js == nil || !js.SyncAlways || !strings.HasPrefix(js.StoreDir, dir) {
		t.Fatalf("jetstream config %+v", js)
	}
}
