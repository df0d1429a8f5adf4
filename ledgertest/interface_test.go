package ledgertest

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/leb128"
	"github.com/fxamacker/cbor/v2"
)

type queryReply struct {
	Status string `cbor:"status"`
	Reply  struct {
		Arg []byte `cbor:"arg"`
	} `cbor:"reply"`
	Signatures []struct {
		Timestamp uint64 `cbor:"timestamp"`
	} `cbor:"signatures"`
}

// TestV3Query: the current query endpoint answers like the deprecated v2
// one (DFINITY's Rust agent sends queries only to v3).
func TestV3Query(t *testing.T) {
	f := newFixture(t)
	for _, v := range []string{"v2", "v3"} {
		req := agent.Request{Type: agent.RequestTypeQuery, Sender: f.id.Sender(), CanisterID: f.echo.ID(), MethodName: "whoami", Arguments: []byte{}, IngressExpiry: uint64(time.Now().Add(time.Minute).UnixNano())}
		body, _ := envelope(t, req, f.id.PublicKey(), sign(f.id))
		resp, b := post(t, f.s.URL()+"/api/"+v+"/canister/"+f.echo.ID().Encode()+"/query", body)
		var qr queryReply
		if resp.StatusCode != http.StatusOK || cbor.Unmarshal(b, &qr) != nil || qr.Status != "replied" || !bytes.Equal(qr.Reply.Arg, f.id.Sender().Raw) || len(qr.Signatures) != 1 {
			t.Fatalf("%s query: %d %x", v, resp.StatusCode, b)
		}
	}
}

// TestSyncCallV3: v3 call is synchronous (200 with a certificate), as v4.
func TestSyncCallV3(t *testing.T) {
	f := newFixture(t)
	req := agent.Request{Type: agent.RequestTypeCall, Sender: f.id.Sender(), CanisterID: f.echo.ID(), MethodName: "whoami", Arguments: []byte{}, IngressExpiry: uint64(time.Now().Add(time.Minute).UnixNano())}
	body, rid := envelope(t, req, f.id.PublicKey(), sign(f.id))
	resp, b := post(t, f.s.URL()+"/api/v3/canister/"+f.echo.ID().Encode()+"/call", body)
	var out struct {
		Status      string `cbor:"status"`
		Certificate []byte `cbor:"certificate"`
	}
	if resp.StatusCode != http.StatusOK || cbor.Unmarshal(b, &out) != nil || out.Status != "replied" {
		t.Fatalf("v3 call: %d %x", resp.StatusCode, b)
	}
	var cert certification.Certificate
	if err := cbor.Unmarshal(out.Certificate, &cert); err != nil {
		t.Fatal(err)
	}
	if err := certification.VerifyCertificate(cert, f.echo.ID(), f.s.RootKey()); err != nil {
		t.Fatalf("v3 call certificate: %v", err)
	}
	reply, err := hashtree.NewHashTree(cert.Tree.Root).Lookup(hashtree.Label("request_status"), rid[:], hashtree.Label("reply"))
	if err != nil || !bytes.Equal(reply, f.id.Sender().Raw) {
		t.Fatalf("certified reply %x, %v", reply, err)
	}
}

// TestOneClock: after an Advance the certified /time, the query signature
// timestamps and the ingress-expiry check all follow the ledger clock, and
// agent-go (whose expiries come from the wall clock) keeps working.
func TestOneClock(t *testing.T) {
	f := newFixture(t)
	f.s.Advance(25 * time.Hour)
	ledgerNow := f.s.Now()

	// The same agent, expiries from its wall clock: accepted as before.
	if who, err := f.agent.QueryRaw(f.echo.ID(), "whoami", nil); err != nil || !bytes.Equal(who, f.id.Sender().Raw) {
		t.Fatalf("query after advance: %x, %v", who, err)
	}
	if _, err := f.agent.CallRaw(f.echo.ID(), "whoami", []byte{}); err != nil {
		t.Fatalf("call after advance: %v", err)
	}
	got, err := f.agent.GetTime(f.echo.ID())
	if err != nil || uint64(got.UnixNano()) < ledgerNow {
		t.Fatalf("certified /time %v (%v), want >= the ledger clock %d", got, err, ledgerNow)
	}

	// A client synced to the certificate stamps expiries from the ledger clock.
	exp := ledgerNow + uint64(2*time.Minute)
	req := agent.Request{Type: agent.RequestTypeQuery, Sender: f.id.Sender(), CanisterID: f.echo.ID(), MethodName: "whoami", Arguments: []byte{}, IngressExpiry: exp}
	body, _ := envelope(t, req, f.id.PublicKey(), sign(f.id))
	resp, b := post(t, f.s.URL()+"/api/v3/canister/"+f.echo.ID().Encode()+"/query", body)
	var qr queryReply
	if resp.StatusCode != http.StatusOK || cbor.Unmarshal(b, &qr) != nil || len(qr.Signatures) != 1 {
		t.Fatalf("query with a ledger-clock expiry: %d %s", resp.StatusCode, b)
	}
	if ts := qr.Signatures[0].Timestamp; ts < ledgerNow || ts > f.s.Now() {
		t.Fatalf("query signed at %d, want the ledger clock in [%d, %d]", ts, ledgerNow, f.s.Now())
	}

	// Valid against neither clock: refused with the IC's text.
	req.IngressExpiry = uint64(time.Now().Add(3 * time.Hour).UnixNano())
	body, _ = envelope(t, req, f.id.PublicKey(), sign(f.id))
	resp, b = post(t, f.s.URL()+"/api/v3/canister/"+f.echo.ID().Encode()+"/query", body)
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(string(b), "Invalid request expiry: Specified ingress_expiry not within expected range: Minimum allowed expiry: ") {
		t.Fatalf("expiry valid against neither clock: %d %s", resp.StatusCode, b)
	}
}

// TestDelegationRefresh: a subnet delegation older than a week of ledger
// time is remade, since agent-js refuses delegations older than 30 days.
func TestDelegationRefresh(t *testing.T) {
	f := newFixture(t)
	f.s.Advance(40 * 24 * time.Hour)
	if _, err := f.agent.GetTime(f.echo.ID()); err != nil {
		t.Fatal(err)
	}
	d := f.s.keys.delegation.Load()
	if d == nil || d.time < f.s.Now()-uint64(time.Hour) {
		t.Fatalf("delegation time %v, ledger clock %d", d, f.s.Now())
	}
	var inner certification.Certificate
	var del struct {
		Certificate []byte `cbor:"certificate"`
	}
	if err := cbor.Unmarshal(d.cbor, &del); err != nil || cbor.Unmarshal(del.Certificate, &inner) != nil {
		t.Fatal("delegation does not decode")
	}
	tv, err := hashtree.NewHashTree(inner.Tree.Root).Lookup(hashtree.Label("time"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := leb128.DecodeUnsigned(bytes.NewReader(tv)); v.Uint64() != d.time {
		t.Fatalf("delegation /time %v, recorded %d", v, d.time)
	}
}

// TestCandidServiceMetadata: ledgers and archives publish their interface
// as public metadata in the certified state.
func TestCandidServiceMetadata(t *testing.T) {
	s, err := NewServer(WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	l, err := s.NewLedger(LedgerConfig{ArchiveThreshold: 4, ArchiveBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.GenerateHistory(6, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	a, err := s.NewAgent(testIdentity(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	did, err := a.GetCanisterMetadata(l.ID(), "candid:service")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"icrc1_transfer : (TransferArg) -> (TransferResult);", "icrc2_transfer_from :", "icrc3_get_blocks : (GetBlocksArgs) -> (GetBlocksResult) query;", "icrc3_get_tip_certificate", "get_data_certificate"} {
		if !strings.Contains(string(did), m) {
			t.Fatalf("ledger candid:service lacks %q", m)
		}
	}
	if len(l.Archives()) == 0 {
		t.Fatal("no archive")
	}
	adid, err := a.GetCanisterMetadata(l.Archives()[0].ID, "candid:service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(adid), "get_blocks : (LegacyGetBlocksArgs) -> (BlockRange) query;") || strings.Contains(string(adid), "icrc1_transfer") {
		t.Fatalf("archive candid:service:\n%s", adid)
	}
}

// TestSubnetReadState: the subnet-addressed read_state serves the subnet's
// paths (agent-go lists the subnets through it) and refuses canister paths.
func TestSubnetReadState(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			f := newFixture(t, m.opts...)
			subnets, err := f.agent.GetSubnets()
			if m.name == "root-subnet" {
				// agent-go asks its hard-coded root subnet, which this replica is.
				if err != nil || len(subnets) != 1 || !subnets[0].Equal(f.s.SubnetID()) {
					t.Fatalf("subnets %v, %v", subnets, err)
				}
			}
			for _, v := range []string{"v2", "v3"} {
				url := f.s.URL() + "/api/" + v + "/subnet/" + f.s.SubnetID().Encode() + "/read_state"
				for _, c := range []struct {
					path []hashtree.Label
					want int
				}{
					{[]hashtree.Label{hashtree.Label("time")}, http.StatusOK},
					{[]hashtree.Label{hashtree.Label("subnet"), f.s.SubnetID().Raw, hashtree.Label("public_key")}, http.StatusOK},
					{[]hashtree.Label{hashtree.Label("canister"), f.echo.ID().Raw, hashtree.Label("module_hash")}, http.StatusNotFound},
				} {
					req := agent.Request{Type: agent.RequestTypeReadState, Sender: f.id.Sender(), Paths: [][]hashtree.Label{c.path}, IngressExpiry: uint64(time.Now().Add(time.Minute).UnixNano())}
					body, _ := envelope(t, req, f.id.PublicKey(), sign(f.id))
					resp, b := post(t, url, body)
					if resp.StatusCode != c.want {
						t.Fatalf("%s %s: %d %s", v, c.path, resp.StatusCode, b)
					}
				}
			}
			other := f.s.NewCanisterID()
			resp, _ := post(t, f.s.URL()+"/api/v3/subnet/"+other.Encode()+"/read_state", nil)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("another subnet: %d", resp.StatusCode)
			}
		})
	}
}
