package queue

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/reconciled/reconciled"
)

func TestSinkCarriesIntentToFollowers(t *testing.T) {
	_, c := setup(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	sink := Sink{C: c}
	// A body a header line could not hold raw: newline, NUL, invalid UTF-8.
	body := []byte("{\"intent_id\":\"s-1\"}\n\x00\xff")
	in := reconciled.IntentHeader{Body: body, Hash: sha256.Sum256(body)}

	if v, err := sink.LastVerdict(ctx, "s-1"); v != nil || err != nil {
		t.Fatalf("LastVerdict before any = %+v, %v; want nil, nil", v, err)
	}
	if err := sink.PublishVerdict(ctx, verdict("s-1", 1, reconciled.StatusNotYet), in); err != nil {
		t.Fatal(err)
	}
	if err := sink.PublishVerdict(ctx, verdict("s-1", 2, reconciled.StatusAbsent), in); err != nil {
		t.Fatal(err)
	}
	if err := sink.PublishVerdict(ctx, verdict("s-1", 1, reconciled.StatusNotYet), in); !errors.Is(err, reconciled.ErrHistory) {
		t.Fatalf("stale verdict through the sink: %v, want ErrHistory", err)
	}
	if v, err := sink.LastVerdict(ctx, "s-1"); err != nil || v == nil || v.Seq != 2 {
		t.Fatalf("LastVerdict = %+v, %v", v, err)
	}

	type got struct {
		seq uint64
		in  *reconciled.IntentHeader
		err error
	}
	ch := make(chan got, 2)
	done := make(chan error, 1)
	go func() {
		done <- c.FollowVerdictMsgs(ctx, FollowConfig{Durable: "sink"}, func(v reconciled.Verdict, h nats.Header) error {
			ih, err := DecodeIntentHeaders(h)
			ch <- got{v.Seq, ih, err}
			return nil
		})
	}()
	for seq := uint64(1); seq <= 2; seq++ {
		g := recv(t, ch, "verdict with headers")
		if g.err != nil || g.seq != seq || g.in == nil || !bytes.Equal(g.in.Body, body) || g.in.Hash != in.Hash {
			t.Fatalf("follower got seq %d, %+v, %v", g.seq, g.in, g.err)
		}
	}
	cancel()
	if err := recv(t, done, "follow end"); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeIntentHeaders(t *testing.T) {
	if in, err := DecodeIntentHeaders(nats.Header{}); in != nil || err != nil {
		t.Fatalf("no headers: %+v, %v", in, err)
	}
	h := IntentHeaders(reconciled.IntentHeader{Body: []byte("x")})
	h.Set(HeaderIntentHash, "abcd")
	if _, err := DecodeIntentHeaders(h); err == nil {
		t.Fatal("short hash accepted")
	}
	h = IntentHeaders(reconciled.IntentHeader{Body: []byte("x")})
	h.Set(HeaderIntent, "not base64!")
	if _, err := DecodeIntentHeaders(h); err == nil {
		t.Fatal("bad base64 accepted")
	}
}

// The largest intent the intake accepts must still fit, base64-encoded, in
// the header of each of its verdicts.
func TestLargestIntentFitsInVerdictHeaders(t *testing.T) {
	_, c := setup(t)
	if _, err := (IntakeConfig{MaxMsgBytes: MaxIntentBytes + 1}).withDefaults(); err == nil {
		t.Fatal("intake accepts intents too large for their verdicts")
	}
	body := bytes.Repeat([]byte{0xfe}, MaxIntentBytes)
	v := verdict("big-1", 1, reconciled.StatusInvalid)
	v.Reason = &reconciled.Reason{Code: "E_BAD_JSON", Message: "x"}
	in := reconciled.IntentHeader{Body: body, Hash: sha256.Sum256(body)}
	if err := (Sink{C: c}).PublishVerdict(testCtx(t), v, in); err != nil {
		t.Fatalf("verdict for a %d-byte intent: %v", len(body), err)
	}
}

// A reject published with the handler's context, which has no deadline,
// is flushed and not reported as failed.
func TestPublishRejectWithoutDeadline(t *testing.T) {
	e := startServer(t, t.TempDir())
	c := connect(t, e)
	if err := c.PublishReject(context.Background(), "rej-1", "E_INTENT_CONFLICT", "another body"); err != nil {
		t.Fatalf("publish reject: %v", err)
	}
}

// An embedded server asked to listen on a port in use says so at once,
// rather than that it was not ready after its timeout.
func TestEmbeddedListenPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	start := time.Now()
	_, err = StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), Listen: ln.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("got %v, want an error saying %s is in use", err, ln.Addr())
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the refusal took %s", took)
	}
}
