package icagent

import (
	"context"
	"crypto/rand"
	"errors"
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

// defaultIngressExpiry is the ingress expiry of the envelopes sent here;
// the IC accepts at most 5 minutes ahead.
const defaultIngressExpiry = 4 * time.Minute

// pollEvery is how often a call's status is read while it is not known.
const pollEvery = 50 * time.Millisecond

// Call runs method as a replicated call and returns its reply, verified
// against the subnet's certificate. It ends by the call's ingress expiry:
// once a certificate shows the subnet's time past the expiry with no
// status for the request, the IC can never execute it, and the call
// fails with a transient error (KindTransport); without such a
// certificate it gives up ClockSkew after the expiry by the local clock.
// Every HTTP request it sends ends by its own envelope's expiry. A reject
// it returns is certified (Certified) only when read from the certified
// state.
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
	rid, data, expiry, err := c.envelope(&req, method)
	if err != nil {
		return nil, err
	}
	// Past expiry plus the skew nothing can come of the call.
	callCtx, cancel := context.WithDeadline(ctx, expiry.Add(c.skew))
	defer cancel()
	sendCtx, cancelSend := context.WithDeadline(callCtx, expiry)
	raw, err := c.agent.Client().Call(sendCtx, c.ledger, data)
	cancelSend()
	if err != nil {
		return nil, Classify(err, c.ledger, method)
	}
	path := []hashtree.Label{hashtree.Label("request_status"), rid[:]}
	// 202: accepted, not yet executed; its status is polled by read_state.
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	for {
		if raw == nil {
			if raw, err = c.readStateCertificate(callCtx, method, [][]hashtree.Label{path}); err != nil {
				return nil, c.callFailed(ctx, err, method, rid, expiry)
			}
		}
		cert, err := c.verifiedCertificate(raw, method)
		if err != nil {
			return nil, err
		}
		reply, st, err := requestReply(cert, path, c.ledger, method)
		if st == statusDone || err != nil {
			return reply, err
		}
		if t, err := certifiedTime(cert); st == statusAbsent && err == nil && t > uint64(expiry.UnixNano()) {
			return nil, &icrc3.Error{Kind: icrc3.KindTransport, Canister: c.ledger, Method: method,
				Msg: fmt.Sprintf("call %x expired unexecuted: the subnet's certified time passed its ingress expiry with no status for it", rid[:])}
		}
		raw = nil
		select {
		case <-callCtx.Done():
			return nil, c.callFailed(ctx, callCtx.Err(), method, rid, expiry)
		case <-poll.C:
		}
	}
}

// callFailed classifies a failure while a call's status is polled; past
// the call's own deadline (and not the caller's) the call is given up:
// transient, as every failure of a call whose outcome was not read.
func (c *Conn) callFailed(ctx context.Context, err error, method string, rid agent.RequestID, expiry time.Time) error {
	if ctx.Err() == nil && !time.Now().Before(expiry) && errors.Is(err, context.DeadlineExceeded) {
		return &icrc3.Error{Kind: icrc3.KindTransport, Canister: c.ledger, Method: method,
			Msg: fmt.Sprintf("call %x given up: no certified status by its ingress expiry and the allowed clock skew (%s)", rid[:], c.skew)}
	}
	return Classify(err, c.ledger, method)
}

// certifiedError marks an error read from the subnet's certified state: a
// replicated call's reject under /request_status. A reject of a query, or
// a call's 200 non_replicated_rejection, is one node's word and is not one.
type certifiedError struct{ e *icrc3.Error }

func (c *certifiedError) Error() string { return c.e.Error() }
func (c *certifiedError) Unwrap() error { return c.e }

// Certified reports whether err is a reject the subnet certified: only
// such an answer may settle a fact for good.
func Certified(err error) bool {
	var c *certifiedError
	return errors.As(err, &c)
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
// certificate of its reply, unverified. The request ends by its
// envelope's expiry: the IC refuses it afterwards.
func (c *Conn) readStateCertificate(ctx context.Context, method string, paths [][]hashtree.Label) ([]byte, error) {
	c.enter(c.ledger, "read_state")
	defer c.leave()
	_, data, expiry, err := c.envelope(&agent.Request{Type: agent.RequestTypeReadState, Paths: paths}, method)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(ctx, expiry)
	defer cancel()
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

// envelope completes req as an anonymous request expiring IngressExpiry
// from now by the local clock (the IC checks it against its own) and
// encodes it; the anonymous sender signs nothing.
func (c *Conn) envelope(req *agent.Request, method string) (agent.RequestID, []byte, time.Time, error) {
	expiry := time.Now().Add(c.expiry)
	req.Sender, req.IngressExpiry = principal.AnonymousID, uint64(expiry.UnixNano())
	data, err := cbor.Marshal(agent.Envelope{Content: *req})
	if err != nil {
		return agent.RequestID{}, nil, time.Time{}, &icrc3.Error{Kind: icrc3.KindTransport, Canister: c.ledger, Method: method, Msg: "encode envelope", Err: err}
	}
	return agent.NewRequestID(*req), data, expiry, nil
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

// A request's state in a certificate, as far as Call needs it.
type requestState int

const (
	statusAbsent  requestState = iota // the certificate proves no status for it
	statusPending                     // received or processing, or not provably absent
	statusDone                        // replied or rejected (or its reply dropped)
)

// requestReply reads a request's outcome from a verified certificate.
func requestReply(cert *certification.Certificate, path []hashtree.Label, canister principal.Principal, method string) ([]byte, requestState, error) {
	look := func(l string) ([]byte, error) {
		return cert.Tree.Lookup(append(path[:len(path):len(path)], hashtree.Label(l))...)
	}
	status, err := look("status")
	if err != nil {
		// Not in the certified state yet (or no longer): poll again.
		var le hashtree.LookupError
		if errors.As(err, &le) && le.Type == hashtree.LookupResultAbsent {
			return nil, statusAbsent, nil
		}
		return nil, statusPending, nil
	}
	switch string(status) {
	case "replied":
		reply, err := look("reply")
		if err != nil {
			return nil, statusDone, &icrc3.Error{Kind: icrc3.KindCertificate, Canister: canister, Method: method, Msg: "replied status without a reply"}
		}
		return reply, statusDone, nil
	case "rejected":
		code, _ := look("reject_code")
		msg, _ := look("reject_message")
		ec, _ := look("error_code")
		n, _ := decodeULEB64(code)
		e := &icrc3.Error{Kind: icrc3.KindReject, Code: fmt.Sprint(n), ICErrorCode: string(ec), Canister: canister, Method: method, Msg: string(msg)}
		return nil, statusDone, &certifiedError{withUnknownCanister(e)}
	case "done":
		return nil, statusDone, &icrc3.Error{Kind: icrc3.KindTransport, Canister: canister, Method: method, Msg: "the request's reply is no longer held"}
	}
	return nil, statusPending, nil
}
