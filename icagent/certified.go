package icagent

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/aviate-labs/agent-go"
	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/fxamacker/cbor/v2"

	"github.com/reconciled/reconciled/icrc3"
)

// Replies whose content the daemon must not take from a single node are
// read through the subnet's certified state: a replicated call's reply
// under /request_status/<request id>, or /time by read_state. agent-go
// checks no certificate of a synchronous (v4) call reply, so both are
// built, sent and verified here: BLS signature under the root key, the
// delegation and its canister range, then the tree.

// envelopeExpiry is the ingress expiry of the envelopes sent here; the IC
// accepts at most 5 minutes ahead.
const envelopeExpiry = 4 * time.Minute

// Call runs method as a replicated call and returns its reply,
// verified against the subnet's certificate.
func (c *Conn) Call(ctx context.Context, method string, arg []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, Classify(err, c.ledger, method)
	}
	c.enter(c.ledger, "call:"+method)
	defer c.leave()
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, &icrc3.Error{Kind: icrc3.KindTransport, Canister: c.ledger, Method: method, Msg: "nonce", Err: err}
	}
	req := agent.Request{Type: agent.RequestTypeCall, CanisterID: c.ledger, MethodName: method, Arguments: arg, Nonce: nonce}
	rid, data, err := c.envelope(&req, method)
	if err != nil {
		return nil, err
	}
	raw, err := c.agent.Client().Call(ctx, c.ledger, data)
	if err != nil {
		return nil, Classify(err, c.ledger, method)
	}
	path := []hashtree.Label{hashtree.Label("request_status"), rid[:]}
	// 202: accepted, not yet executed; its status is polled by read_state.
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		if raw == nil {
			if raw, err = c.readStateCertificate(ctx, method, [][]hashtree.Label{path}); err != nil {
				return nil, err
			}
		}
		cert, err := c.verifiedCertificate(raw, method)
		if err != nil {
			return nil, err
		}
		reply, done, err := requestReply(cert, path, c.ledger, method)
		if done || err != nil {
			return reply, err
		}
		raw = nil
		select {
		case <-ctx.Done():
			return nil, Classify(ctx.Err(), c.ledger, method)
		case <-poll.C:
		}
	}
}

// CertifiedTime reads the subnet's certified /time with read_state: a
// ledger time no single node can move forward.
func (c *Conn) CertifiedTime(ctx context.Context) (uint64, error) {
	const what = "read_state /time"
	raw, err := c.readStateCertificate(ctx, what, [][]hashtree.Label{{hashtree.Label("time")}})
	if err != nil {
		return 0, err
	}
	cert, err := c.verifiedCertificate(raw, what)
	if err != nil {
		return 0, err
	}
	t, err := certifiedTime(cert)
	if err != nil {
		return 0, &icrc3.Error{Kind: icrc3.KindCertificate, Canister: c.ledger, Method: what, Msg: "certificate /time", Err: err}
	}
	if t <= uint64(1<<63-1) {
		if age := c.now().UnixNano() - int64(t); age > int64(c.maxAge) {
			return 0, &icrc3.Error{Kind: icrc3.KindStale, Canister: c.ledger, Method: what,
				Msg: fmt.Sprintf("certified time is %s old (limit %s)", time.Duration(age), c.maxAge)}
		}
	}
	return t, nil
}

// readStateCertificate sends a read_state of paths and returns the
// certificate of its reply, unverified.
func (c *Conn) readStateCertificate(ctx context.Context, method string, paths [][]hashtree.Label) ([]byte, error) {
	c.enter(c.ledger, "read_state")
	defer c.leave()
	_, data, err := c.envelope(&agent.Request{Type: agent.RequestTypeReadState, Paths: paths}, method)
	if err != nil {
		return nil, err
	}
	body, err := c.agent.Client().ReadState(ctx, c.ledger, data)
	if err != nil {
		return nil, Classify(err, c.ledger, method)
	}
	var resp struct {
		Certificate []byte `cbor:"certificate"`
	}
	if err := cbor.Unmarshal(body, &resp); err != nil || len(resp.Certificate) == 0 {
		return nil, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: method, Msg: "read_state reply without a certificate", Err: err}
	}
	return resp.Certificate, nil
}

// envelope completes req as an anonymous request expiring soon and encodes
// it; the anonymous sender signs nothing.
func (c *Conn) envelope(req *agent.Request, method string) (agent.RequestID, []byte, error) {
	req.Sender, req.IngressExpiry = principal.AnonymousID, uint64(time.Now().Add(envelopeExpiry).UnixNano())
	data, err := cbor.Marshal(agent.Envelope{Content: *req})
	if err != nil {
		return agent.RequestID{}, nil, &icrc3.Error{Kind: icrc3.KindTransport, Canister: c.ledger, Method: method, Msg: "encode envelope", Err: err}
	}
	return agent.NewRequestID(*req), data, nil
}

// verifiedCertificate parses a certificate strictly and verifies it for the
// ledger: signature, delegation, and that the ledger lies in the
// delegated canister range.
func (c *Conn) verifiedCertificate(raw []byte, method string) (*certification.Certificate, error) {
	cert, err := ParseCertificate(raw)
	if err != nil {
		return nil, &icrc3.Error{Kind: icrc3.KindDecode, Canister: c.ledger, Method: method, Msg: "certificate", Err: err}
	}
	if err := verifyCertificate(cert, c.ledger, c.rootKey); err != nil {
		return nil, &icrc3.Error{Kind: icrc3.KindCertificate, Canister: c.ledger, Method: method, Msg: "certificate", Err: err}
	}
	return cert, nil
}

// verifyCertificate is agent-go's verification with a panic on hostile
// CBOR turned into an error (see verifyCertifiedData).
func verifyCertificate(cert *certification.Certificate, canister principal.Principal, rootKey []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("certificate verification panicked: %v", p)
		}
	}()
	return certification.VerifyCertificate(*cert, canister, rootKey)
}

// requestReply reads a request's outcome from a verified certificate; done
// is false while the request is still received or processing.
func requestReply(cert *certification.Certificate, path []hashtree.Label, canister principal.Principal, method string) ([]byte, bool, error) {
	look := func(l string) ([]byte, bool) {
		v, err := cert.Tree.Lookup(append(path[:len(path):len(path)], hashtree.Label(l))...)
		return v, err == nil
	}
	status, ok := look("status")
	if !ok {
		// Not in the certified state yet (or no longer): poll again.
		return nil, false, nil
	}
	switch string(status) {
	case "replied":
		reply, ok := look("reply")
		if !ok {
			return nil, true, &icrc3.Error{Kind: icrc3.KindCertificate, Canister: canister, Method: method, Msg: "replied status without a reply"}
		}
		return reply, true, nil
	case "rejected":
		code, _ := look("reject_code")
		msg, _ := look("reject_message")
		ec, _ := look("error_code")
		n, _ := decodeULEB64(code)
		e := &icrc3.Error{Kind: icrc3.KindReject, Code: fmt.Sprint(n), ICErrorCode: string(ec), Canister: canister, Method: method, Msg: string(msg)}
		return nil, true, withUnknownCanister(e)
	case "done":
		return nil, true, &icrc3.Error{Kind: icrc3.KindTransport, Canister: canister, Method: method, Msg: "the request's reply is no longer held"}
	}
	return nil, false, nil
}
