package ledgertest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/leb128"
)

// Each fault is checked from the client's side: what an unmodified
// agent-go observes.
func TestFaultsSeenByAgent(t *testing.T) {
	data := []byte("certified-data")
	setup := func(t *testing.T, fl Faults, opts ...Option) *fixture {
		t.Helper()
		f := newFixture(t, opts...)
		if _, err := f.agent.CallRaw(f.echo.ID(), "set", data); err != nil {
			t.Fatal(err)
		}
		f.s.SetFaults(f.echo.ID(), fl)
		if got := f.s.Faults(f.echo.ID()); got != fl {
			t.Fatalf("Faults() = %+v, want %+v", got, fl)
		}
		return f
	}
	verifyTip := func(f *fixture) error {
		raw, err := f.agent.QueryRaw(f.echo.ID(), "cert", nil)
		if err != nil {
			return err
		}
		cert := decodeCert(t, raw)
		if err := certification.VerifyCertifiedData(cert, f.echo.ID(), f.agent.GetRootKey(), data); err != nil {
			return err
		}
		return cert.VerifyTime(5 * time.Minute)
	}

	t.Run("latency", func(t *testing.T) {
		f := setup(t, Faults{Latency: 30 * time.Millisecond})
		start := time.Now()
		if _, err := f.agent.QueryRaw(f.echo.ID(), "echo", nil); err != nil {
			t.Fatal(err)
		}
		// A verified query is a query plus a read_state: both are delayed.
		if d := time.Since(start); d < 60*time.Millisecond {
			t.Fatalf("query took %v, want >= 60ms", d)
		}
		// Latency honours cancellation.
		f.s.SetFaults(f.echo.ID(), Faults{Latency: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		err := f.agent.QueryWithContext(ctx, f.echo.ID(), "echo", []any{"x"}, []any{new(string)})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cancelled query: %v", err)
		}
		// An update commits before the delayed reply: a client that gives
		// up is left with an unknown outcome.
		ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel2()
		err = f.agent.CallWithContext(ctx2, f.echo.ID(), "set", []any{"late"}, []any{new(string)})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cancelled call: %v", err)
		}
		if f.echo.updateCount() != 2 {
			t.Fatalf("the timed-out update did not execute (updates = %d)", f.echo.updateCount())
		}
	})
	t.Run("lose replies v4", func(t *testing.T) {
		f := setup(t, Faults{LoseReplies: true})
		before := f.echo.updateCount()
		_, err := f.agent.CallRaw(f.echo.ID(), "set", []byte("new"))
		wantErr(t, err, "(503)")
		if f.echo.updateCount() != before+1 || !bytes.Equal(f.echo.CertifiedData(), []byte("new")) {
			t.Fatal("the update did not execute")
		}
	})
	t.Run("lose replies v3", func(t *testing.T) {
		f := setup(t, Faults{LoseReplies: true})
		a, err := f.s.NewAgentWithConfig(agent.Config{Identity: f.id, ClientConfig: []agent.ClientOption{agent.WithLegacyAPI()}})
		if err != nil {
			t.Fatal(err)
		}
		req, err := a.CreateRawAPIRequest(agent.RequestTypeCall, f.echo.ID(), "set", []byte("v3"))
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		wantErr(t, req.CallAndWait(&out), "(503)")
		if !bytes.Equal(f.echo.CertifiedData(), []byte("v3")) {
			t.Fatal("the update did not execute")
		}
		// It executed, but request_status never tells: polling sees the
		// status as absent, as for a request still in flight.
		r := agent.Request{Type: agent.RequestTypeCall, Sender: f.id.Sender(), CanisterID: f.echo.ID(), MethodName: "set", Arguments: []byte("v3b"), IngressExpiry: uint64(time.Now().Add(time.Minute).UnixNano()), Nonce: []byte{1}}
		body, rid := envelope(t, r, f.id.PublicKey(), sign(f.id))
		resp, b := post(t, f.s.URL()+"/api/v3/canister/"+f.echo.ID().Encode()+"/call", body)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("v3 call with lost reply: %d %s", resp.StatusCode, b)
		}
		if !bytes.Equal(f.echo.CertifiedData(), []byte("v3b")) {
			t.Fatal("the update did not execute")
		}
		f.s.SetFaults(f.echo.ID(), Faults{})
		status, _, err := a.RequestStatus(f.echo.ID(), rid)
		if err != nil || status != nil {
			t.Fatalf("request_status of a lost reply = %q, %v; want absent", status, err)
		}
	})
	t.Run("drop calls", func(t *testing.T) {
		f := setup(t, Faults{DropCalls: true})
		before := f.echo.updateCount()
		r := agent.Request{Type: agent.RequestTypeCall, Sender: f.id.Sender(), CanisterID: f.echo.ID(), MethodName: "set", Arguments: []byte("lost"), IngressExpiry: uint64(time.Now().Add(time.Minute).UnixNano()), Nonce: []byte{2}}
		body, rid := envelope(t, r, f.id.PublicKey(), sign(f.id))
		resp, b := post(t, f.s.URL()+"/api/v4/canister/"+f.echo.ID().Encode()+"/call", body)
		if resp.StatusCode != http.StatusAccepted || len(b) != 0 {
			t.Fatalf("dropped call: %d %q, want 202 and no body", resp.StatusCode, b)
		}
		if f.echo.updateCount() != before {
			t.Fatal("a dropped call executed")
		}
		// Never recorded: request_status stays absent, also once the fault is off.
		f.s.SetFaults(f.echo.ID(), Faults{})
		status, _, err := f.agent.RequestStatus(f.echo.ID(), rid)
		if err != nil || status != nil {
			t.Fatalf("request_status of a dropped call = %q, %v; want absent", status, err)
		}
	})
	t.Run("reject method", func(t *testing.T) {
		f := setup(t, Faults{RejectMethod: "echo"})
		_, err := f.agent.QueryRaw(f.echo.ID(), "echo", nil)
		wantErr(t, err, "(3)", "injected", "IC0536")
		_, err = f.agent.CallRaw(f.echo.ID(), "echo", []byte{})
		wantErr(t, err, "(3)", "injected", "IC0536")
		// Other methods run.
		if _, err := f.agent.QueryRaw(f.echo.ID(), "whoami", nil); err != nil {
			t.Fatal(err)
		}
		f.s.SetFaults(f.echo.ID(), Faults{RejectMethod: "echo", RejectAs: "stopped"})
		_, err = f.agent.QueryRaw(f.echo.ID(), "echo", nil)
		wantErr(t, err, "(5)", "stopped", "IC0508")
	})
	t.Run("query reject", func(t *testing.T) {
		f := setup(t, Faults{QueryReject: RejectSysTransient})
		_, err := f.agent.QueryRaw(f.echo.ID(), "echo", nil)
		wantErr(t, err, "(2)", "injected", "IC0201")
		// Updates are unaffected.
		if _, err := f.agent.CallRaw(f.echo.ID(), "whoami", []byte{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("http status", func(t *testing.T) {
		f := setup(t, Faults{HTTPStatus: http.StatusInternalServerError})
		_, err := f.agent.QueryRaw(f.echo.ID(), "echo", nil)
		wantErr(t, err, "(500)")
		_, err = f.agent.CallRaw(f.echo.ID(), "whoami", []byte{})
		wantErr(t, err, "(500)")
		f.s.SetFaults(f.echo.ID(), Faults{HTTPStatus: http.StatusTooManyRequests})
		_, err = f.agent.GetTime(f.echo.ID())
		wantErr(t, err, "(429)")
	})
	t.Run("garbage truncated", func(t *testing.T) {
		f := setup(t, Faults{Garbage: "truncated"})
		_, err := f.agent.QueryRaw(f.echo.ID(), "echo", []byte("hello"))
		wantErr(t, err, "unexpected EOF")
	})
	t.Run("garbage cbor", func(t *testing.T) {
		f := setup(t, Faults{Garbage: "cbor"})
		_, err := f.agent.QueryRaw(f.echo.ID(), "echo", []byte("hello"))
		if err == nil {
			t.Fatal("random bytes accepted as a reply")
		}
	})
	t.Run("garbage candid", func(t *testing.T) {
		f := setup(t, Faults{Garbage: "candid"})
		// The reply is correctly signed, so verification passes and Candid
		// decoding is what fails.
		raw, err := f.agent.QueryRaw(f.echo.ID(), "echo", []byte("DIDL\x00\x00"))
		if err != nil {
			t.Fatalf("signed garbage reply: %v", err)
		}
		if bytes.HasPrefix(raw, []byte("DIDL")) {
			t.Fatalf("garbage looks like Candid: %x", raw)
		}
		var out string
		err = f.agent.Query(f.echo.ID(), "echo", []any{"x"}, []any{&out})
		if err == nil {
			t.Fatal("garbage decoded as Candid")
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		f := setup(t, Faults{Unreachable: true})
		_, err := f.agent.QueryRaw(f.echo.ID(), "echo", nil)
		wantErr(t, err, "EOF")
		_, err = f.agent.CallRaw(f.echo.ID(), "whoami", []byte{})
		wantErr(t, err, "EOF")
		// Other canisters on the replica are still reachable.
		other := newEcho(f.s.NewCanisterID())
		f.s.Install(other)
		if _, err := f.agent.QueryRaw(other.ID(), "echo", nil); err != nil {
			t.Fatal(err)
		}
	})
	for _, m := range modes() {
		t.Run("wrong key/"+m.name, func(t *testing.T) {
			f := setup(t, Faults{WrongKey: true}, m.opts...)
			_, err := f.agent.QueryRaw(f.echo.ID(), "echo", nil)
			wantErr(t, err, "signature verification failed")
			f.s.SetFaults(f.echo.ID(), Faults{})
			if err := verifyTip(f); err != nil {
				t.Fatalf("honest tip: %v", err)
			}
			f.s.SetFaults(f.echo.ID(), Faults{WrongKey: true})
			// Query verification fails before the tip is even seen; skip it
			// to reach the data certificate itself.
			q, _ := f.agent.CreateRawAPIRequest(agent.RequestTypeQuery, f.echo.ID(), "cert", nil)
			var raw []byte
			if err := q.Query(&raw, true); err != nil {
				t.Fatal(err)
			}
			err = certification.VerifyCertifiedData(decodeCert(t, raw), f.echo.ID(), f.agent.GetRootKey(), data)
			wantErr(t, err, "signature verification failed")
		})
	}
	t.Run("foreign certificate", func(t *testing.T) {
		f := setup(t, Faults{ForeignCertificate: true})
		err := verifyTip(f)
		wantErr(t, err, "certified_data")
		// The certificate itself is genuine, for another canister.
		raw, _ := f.agent.QueryRaw(f.echo.ID(), "cert", nil)
		if err := certification.VerifyCertifiedData(decodeCert(t, raw), f.s.foreignID(f.echo.ID()), f.agent.GetRootKey(), data); err != nil {
			t.Fatalf("foreign certificate does not certify the other id: %v", err)
		}
	})
	t.Run("stale time", func(t *testing.T) {
		f := setup(t, Faults{StaleTime: 10 * time.Minute})
		_, err := f.agent.QueryRaw(f.echo.ID(), "echo", nil)
		wantErr(t, err, "certificate outdated")
		_, err = f.agent.GetTime(f.echo.ID())
		wantErr(t, err, "certificate outdated")
	})
	t.Run("time backwards", func(t *testing.T) {
		f := setup(t, Faults{TimeBackwards: time.Minute})
		got, err := f.agent.GetTime(f.echo.ID())
		if err != nil {
			t.Fatal(err)
		}
		raw, err := f.agent.QueryRaw(f.echo.ID(), "time", nil)
		if err != nil {
			t.Fatal(err)
		}
		canisterTime, err := leb128.DecodeUnsigned(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		// The canister's clock runs ahead of the certified time by the fault.
		if lag := canisterTime.Int64() - got.UnixNano(); lag < int64(time.Minute) {
			t.Fatalf("canister time - certified time = %v, want >= 1m", time.Duration(lag))
		}
		if err := verifyTip(f); err != nil {
			t.Fatalf("1 minute behind is still within agent-go's 5 minutes: %v", err)
		}
	})
}
