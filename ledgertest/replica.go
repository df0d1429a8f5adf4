package ledgertest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/principal"
	"github.com/fxamacker/cbor/v2"
)

// maxBodyBytes bounds request bodies, like the IC's 4 MiB ingress limit.
const maxBodyBytes = 4 << 20

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v2/status", s.handleStatus)
	mux.HandleFunc("POST /api/{version}/canister/{ecid}/{endpoint}", s.handleCanister)
	mux.HandleFunc("POST /api/{version}/subnet/{sid}/read_state", s.handleSubnetReadState)
	if s.cfg.admin {
		s.adminRoutes(mux)
	}
	return mux
}

func (s *Server) handleStatus(w http.ResponseWriter, _ *http.Request) {
	writeCBOR(w, http.StatusOK, cbor.Tag{Number: selfDescribeTag, Content: map[string]any{
		"root_key":              s.keys.rootDER,
		"impl_version":          "ledgertest",
		"replica_health_status": "healthy",
	}})
}

// endpoint is one of the canister endpoints and the API versions that
// serve it.
type endpoint int

const (
	epQuery endpoint = iota
	epReadState
	epCallAsync  // v2: 202, then poll
	epCallSync   // v4: synchronous, /canister_ranges in the delegation
	epCallSyncV3 // v3 (deprecated): synchronous, /subnet/<id>/canister_ranges
)

func parseEndpoint(version, name string) (endpoint, bool) {
	switch {
	case name == "query" && (version == "v2" || version == "v3"):
		return epQuery, true
	case name == "read_state" && (version == "v2" || version == "v3"):
		return epReadState, true
	case name == "call" && version == "v2":
		return epCallAsync, true
	case name == "call" && version == "v3":
		return epCallSyncV3, true
	case name == "call" && version == "v4":
		return epCallSync, true
	}
	return 0, false
}

var requestTypes = map[endpoint]string{
	epQuery: "query", epReadState: "read_state", epCallAsync: "call", epCallSync: "call", epCallSyncV3: "call",
}

func (s *Server) handleCanister(w http.ResponseWriter, hr *http.Request) {
	ep, ok := parseEndpoint(hr.PathValue("version"), hr.PathValue("endpoint"))
	if !ok {
		http.NotFound(w, hr)
		return
	}
	ecid, err := principal.Decode(hr.PathValue("ecid"))
	if err != nil {
		textError(w, http.StatusBadRequest, "invalid effective canister id %q: %v", hr.PathValue("ecid"), err)
		return
	}
	req, ok := s.readRequest(w, hr)
	if !ok {
		return
	}
	if want := requestTypes[ep]; req.typ != want {
		textError(w, http.StatusBadRequest, "unexpected request type %q on the %s endpoint", req.typ, want)
		return
	}
	if ep != epReadState && !bytes.Equal(req.canisterID.Raw, ecid.Raw) {
		textError(w, http.StatusBadRequest, "Specified CanisterId %s does not match effective canister id in URL %s", req.canisterID, ecid)
		return
	}
	if !req.targetsAllow(ecid) {
		textError(w, http.StatusBadRequest, "Invalid delegation: Canister %s is not one of the delegation targets", ecid)
		return
	}
	s.stats.count(ecid, ep, req.method)

	f := s.Faults(ecid)
	if s.canister(ecid) == nil && !s.hostsRange(ecid) && !f.AnswerOutOfRange {
		// No subnet of this replica is assigned the id: the IC's boundary
		// nodes answer such a request with 400 canister_not_found.
		textError(w, http.StatusBadRequest, "canister_not_found: canister %s is not hosted by any subnet", ecid)
		return
	}
	if !s.applyTransportFaults(w, hr, f) {
		return
	}
	switch ep {
	case epQuery:
		if delay(hr, f) {
			s.query(w, ecid, req, f)
		}
	case epReadState:
		if delay(hr, f) {
			s.readState(w, ecid, req, f, false)
		}
	default:
		if s.dropAcceptedCall(w, ecid) {
			return
		}
		s.call(w, hr, ecid, req, f, ep)
	}
}

// readRequest reads and authenticates a request envelope, answering the
// client itself when it cannot.
func (s *Server) readRequest(w http.ResponseWriter, hr *http.Request) (*request, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, hr.Body, maxBodyBytes))
	if err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		textError(w, status, "could not read request body: %v", err)
		return nil, false
	}
	req, err := decodeRequestAt(body, requestTimes{ledger: s.clock.now(), wall: uint64(time.Now().UnixNano())})
	if err != nil {
		status := http.StatusBadRequest
		if e, ok := asEnvelopeError(err); ok {
			status = e.status
		}
		textError(w, status, "%v", err)
		return nil, false
	}
	return req, true
}

// handleSubnetReadState serves read_state addressed to the subnet rather
// than to a canister: the subnet-wide paths only (/time, /subnet,
// /canister_ranges), as the specification asks clients to read them.
func (s *Server) handleSubnetReadState(w http.ResponseWriter, hr *http.Request) {
	if v := hr.PathValue("version"); v != "v2" && v != "v3" {
		http.NotFound(w, hr)
		return
	}
	sid, err := principal.Decode(hr.PathValue("sid"))
	if err != nil {
		textError(w, http.StatusBadRequest, "invalid effective subnet id %q: %v", hr.PathValue("sid"), err)
		return
	}
	if !bytes.Equal(sid.Raw, s.keys.subnetID.Raw) {
		textError(w, http.StatusBadRequest, "Effective subnet id %s is not this replica's subnet %s", sid, s.keys.subnetID)
		return
	}
	req, ok := s.readRequest(w, hr)
	if !ok {
		return
	}
	if req.typ != "read_state" {
		textError(w, http.StatusBadRequest, "unexpected request type %q on the read_state endpoint", req.typ)
		return
	}
	s.readState(w, sid, req, Faults{}, true)
}

// errorCodes are the replica's textual error codes for each reject code
// when a canister gives none.
var errorCodes = map[uint64]string{
	RejectSysFatal:           "IC0101",
	RejectSysTransient:       "IC0201",
	RejectDestinationInvalid: "IC0301",
	RejectCanisterReject:     "IC0406",
	RejectCanisterError:      "IC0503",
}

func normalizeReject(r *Reject) *Reject {
	out := *r
	if out.ErrorCode == "" {
		out.ErrorCode = errorCodes[out.Code]
		if out.ErrorCode == "" {
			out.ErrorCode = "IC0500"
		}
	}
	return &out
}

// hostsRange reports whether id lies in the subnet's canister range (in
// root-subnet mode every id does: the root subnet's range is not checked).
func (s *Server) hostsRange(id principal.Principal) bool {
	if !s.keys.delegated {
		return true
	}
	lo, hi := s.keys.rangeBounds()
	return bytes.Compare(id.Raw, lo.Raw) >= 0 && bytes.Compare(id.Raw, hi.Raw) <= 0
}

func canisterNotFound(id principal.Principal) *Reject {
	return &Reject{Code: RejectDestinationInvalid, Message: fmt.Sprintf("Canister %s not found", id), ErrorCode: "IC0301"}
}

// run executes one message, turning a canister panic into the trap reject
// a real replica would give instead of taking the server down.
func run(fn func(CallContext, string, []byte) ([]byte, *Reject), ctx CallContext, method string, arg []byte) (reply []byte, rej *Reject) {
	defer func() {
		if p := recover(); p != nil {
			reply, rej = nil, &Reject{Code: RejectCanisterError, Message: fmt.Sprintf("Canister trapped: %v", p), ErrorCode: "IC0502"}
		}
	}()
	reply, rej = fn(ctx, method, arg)
	if rej != nil {
		return nil, normalizeReject(rej)
	}
	if reply == nil {
		reply = []byte{}
	}
	return reply, nil
}

func (s *Server) query(w http.ResponseWriter, ecid principal.Principal, req *request, f Faults) {
	var (
		reply []byte
		rej   *Reject
	)
	h := s.canister(ecid)
	switch {
	case f.QueryReject != 0:
		rej = normalizeReject(&Reject{Code: f.QueryReject, Message: fmt.Sprintf("query to %s rejected (injected fault)", ecid)})
	case f.RejectMethod != "" && f.RejectMethod == req.method:
		rej = methodReject(ecid, req.method, f.RejectAs)
	case h == nil:
		rej = canisterNotFound(ecid)
	default:
		ctx := CallContext{
			Caller: req.sender,
			Time:   s.clock.now(),
			DataCertificate: func(data []byte) []byte {
				return s.dataCertificate(ecid, data, f, ^uint64(0))
			},
			DataCertificateAt: func(data []byte, t uint64) []byte {
				return s.dataCertificate(ecid, data, f, t)
			},
		}
		reply, rej = run(h.c.Query, ctx, req.method, req.arg)
	}
	if rej == nil && f.Garbage == "candid" {
		reply = s.garbageBytes(32)
	}
	body, err := s.signedQueryResponse(req.id, reply, rej)
	if err != nil {
		textError(w, http.StatusInternalServerError, "ledgertest: sign query response: %v", err)
		return
	}
	switch f.Garbage {
	case "truncated":
		body = body[:len(body)/2]
	case "cbor":
		body = s.garbageBytes(len(body))
	}
	writeRaw(w, http.StatusOK, body)
}

// signedQueryResponse signs the reply as one node: ed25519 over
// "\x0Bic-response" and the hash of {status, reply|reject…, timestamp,
// request_id}. The timestamp is the ledger clock, the time certificates
// carry: agent-js compares it with its clock synced to /time. agent-go
// hashes it as a signed LEB128, which agrees with the spec's unsigned one
// for values like real timestamps (the ledger clock never runs behind the
// wall clock).
func (s *Server) signedQueryResponse(rid [32]byte, reply []byte, rej *Reject) ([]byte, error) {
	ts := int64(s.clock.now())
	var fields []certification.KeyValuePair
	resp := map[string]any{}
	if rej == nil {
		r := map[string]any{"arg": reply}
		resp["status"], resp["reply"] = "replied", r
		fields = []certification.KeyValuePair{{Key: "status", Value: "replied"}, {Key: "reply", Value: r}}
	} else {
		resp["status"], resp["reject_code"], resp["reject_message"], resp["error_code"] = "rejected", rej.Code, rej.Message, rej.ErrorCode
		fields = []certification.KeyValuePair{
			{Key: "status", Value: "rejected"}, {Key: "reject_code", Value: rej.Code},
			{Key: "reject_message", Value: rej.Message}, {Key: "error_code", Value: rej.ErrorCode},
		}
	}
	fields = append(fields, certification.KeyValuePair{Key: "timestamp", Value: ts}, certification.KeyValuePair{Key: "request_id", Value: rid[:]})
	h, err := certification.RepresentationIndependentHash(fields)
	if err != nil {
		return nil, err
	}
	sig := ed25519.Sign(s.keys.nodeSK, append([]byte("\x0Bic-response"), h[:]...))
	resp["signatures"] = []map[string]any{{"timestamp": uint64(ts), "signature": sig, "identity": s.keys.nodeID.Raw}}
	return cbor.Marshal(resp)
}

// requestStatus is an update's entry under /request_status/<rid>.
type requestStatus struct {
	sender principal.Principal
	expiry uint64 // the request's ingress_expiry
	done   bool
	// finished is closed when done is set.
	finished chan struct{}
	reply    []byte
	reject   *Reject
}

func (st *requestStatus) tree() *stree {
	switch {
	case !st.done:
		return branch(lbl([]byte("status"), leaf([]byte("processing"))))
	case st.reject != nil:
		return branch(
			lbl([]byte("error_code"), leaf([]byte(st.reject.ErrorCode))),
			lbl([]byte("reject_code"), leaf(leb(st.reject.Code))),
			lbl([]byte("reject_message"), leaf([]byte(st.reject.Message))),
			lbl([]byte("status"), leaf([]byte("rejected"))),
		)
	default:
		return branch(lbl([]byte("reply"), leaf(st.reply)), lbl([]byte("status"), leaf([]byte("replied"))))
	}
}

// statusRetention is how long past its ingress expiry a request's status
// stays readable; the IC also forgets statuses some minutes after expiry,
// and a long-running replica must not grow without bound.
const statusRetention = 5 * time.Minute

// pruneStatusesLocked forgets expired statuses, sweeping once per 1024
// insertions so the cost stays amortised.
func (s *Server) pruneStatusesLocked(wallNow uint64) {
	s.statusInserts++
	if s.statusInserts%1024 != 0 {
		return
	}
	for id, st := range s.statuses {
		if st.done && st.expiry+uint64(statusRetention) < wallNow {
			delete(s.statuses, id)
		}
	}
}

// methodReject is the RejectMethod fault's reject of method.
func methodReject(ecid principal.Principal, method, as string) *Reject {
	if as == "stopped" {
		return &Reject{Code: RejectCanisterError, Message: fmt.Sprintf("Canister %s is stopped (injected fault)", ecid), ErrorCode: "IC0508"}
	}
	r := noMethod(method)
	r.Message += " (injected fault)"
	return r
}

func (s *Server) call(w http.ResponseWriter, hr *http.Request, ecid principal.Principal, req *request, f Faults, ep endpoint) {
	sync := ep != epCallAsync
	h := s.canister(ecid)
	if f.DropCalls {
		// Accepted by one node and lost before any block held it: no
		// status is recorded, nothing runs.
		if delay(hr, f) {
			w.WriteHeader(http.StatusAccepted)
		}
		return
	}
	var rej *Reject
	switch {
	case h == nil:
		rej = canisterNotFound(ecid)
	case f.RejectMethod != "" && f.RejectMethod == req.method:
		rej = methodReject(ecid, req.method, f.RejectAs)
	}
	if rej != nil {
		if !delay(hr, f) {
			return
		}
		writeCBOR(w, http.StatusOK, map[string]any{
			"status": "non_replicated_rejection", "reject_code": rej.Code,
			"reject_message": rej.Message, "error_code": rej.ErrorCode,
		})
		return
	}
	// A replayed envelope is answered from the ingress history instead of
	// executing twice, as on the IC.
	s.statusMu.Lock()
	st, seen := s.statuses[req.id]
	if !seen {
		st = &requestStatus{sender: req.sender, expiry: req.ingressExpiry, finished: make(chan struct{})}
		// A lost reply on the v2 and v3 endpoints also loses the status, so
		// pollers see the request as unknown; on v4 it stays certified.
		if !(f.LoseReplies && ep != epCallSync) {
			s.statuses[req.id] = st
			// By the wall clock, which never runs ahead of the ledger clock:
			// an expiry stays acceptable until both have passed it, and so
			// must its status, or a replay would execute again.
			s.pruneStatusesLocked(uint64(time.Now().UnixNano()))
		}
	}
	s.statusMu.Unlock()

	if !seen {
		exec := func() {
			h.mu.Lock()
			ctx := CallContext{Caller: req.sender, Time: s.clock.now(), Replicated: true}
			reply, rej := run(h.c.Update, ctx, req.method, req.arg)
			h.mu.Unlock()
			s.statusMu.Lock()
			st.reply, st.reject, st.done = reply, rej, true
			s.statusMu.Unlock()
			close(st.finished)
		}
		if f.LoseReplies {
			exec()
		} else {
			// Execution runs apart from the HTTP exchange, as on the IC:
			// the asynchronous endpoint acknowledges at once and pollers see
			// the request as processing; a synchronous one waits for it up to
			// a timeout.
			if !s.work.enter() {
				textError(w, http.StatusServiceUnavailable, "replica is shutting down")
				return
			}
			go func() {
				defer s.work.leave()
				exec()
			}()
		}
	}
	if !delay(hr, f) {
		return
	}
	if f.LoseReplies {
		textError(w, http.StatusServiceUnavailable, "connection to the replica lost before the reply (injected fault)")
		return
	}
	if !sync {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	timeout := time.NewTimer(s.cfg.syncCallTimeout)
	defer timeout.Stop()
	select {
	case <-st.finished:
	case <-timeout.C:
		// The specification's fallback: 202 with an empty body, and the
		// client polls read_state.
		w.WriteHeader(http.StatusAccepted)
		return
	case <-hr.Context().Done():
		return
	}
	cert, err := s.stateCertificate(ecid, [][][]byte{{[]byte("request_status"), req.id[:]}, {[]byte("time")}}, f)
	if err != nil {
		textError(w, http.StatusInternalServerError, "ledgertest: certify call: %v", err)
		return
	}
	writeCBOR(w, http.StatusOK, map[string]any{"status": "replied", "certificate": cert})
}

// readState answers a read_state addressed to canister ecid, or with
// subnet to the subnet ecid, which serves only the subnet-wide paths.
func (s *Server) readState(w http.ResponseWriter, ecid principal.Principal, req *request, f Faults, subnet bool) {
	if len(req.paths) == 0 {
		textError(w, http.StatusBadRequest, "read_state request has no paths")
		return
	}
	for _, p := range req.paths {
		if len(p) == 0 {
			textError(w, http.StatusBadRequest, "read_state path is empty")
			return
		}
		if subnet && string(p[0]) != "time" && string(p[0]) != "subnet" && string(p[0]) != "canister_ranges" {
			textError(w, http.StatusNotFound, "invalid path requested: /%s is not a subnet path", p[0])
			return
		}
		switch string(p[0]) {
		case "time", "subnet", "canister_ranges":
		case "canister":
			if len(p) > 1 && !bytes.Equal(p[1], ecid.Raw) {
				textError(w, http.StatusBadRequest, "effective canister id %s does not match the canister in path /canister/%x", ecid, p[1])
				return
			}
		case "request_status":
			if len(p) < 2 {
				textError(w, http.StatusBadRequest, "request_status path without a request id")
				return
			}
			if len(p[1]) == 32 {
				s.statusMu.Lock()
				st := s.statuses[[32]byte(p[1])]
				s.statusMu.Unlock()
				if st != nil && !bytes.Equal(st.sender.Raw, req.sender.Raw) {
					textError(w, http.StatusForbidden, "request %x was not signed by %s", p[1], req.sender)
					return
				}
			}
		default:
			textError(w, http.StatusNotFound, "invalid path requested: /%s", p[0])
			return
		}
	}
	cert, err := s.stateCertificate(ecid, req.paths, f)
	if err != nil {
		textError(w, http.StatusInternalServerError, "ledgertest: certify read_state: %v", err)
		return
	}
	writeCBOR(w, http.StatusOK, map[string][]byte{"certificate": cert})
}

// certTime is the certified /time under the canister's faults.
func (s *Server) certTime(f Faults) uint64 {
	t := s.clock.now()
	back := uint64(max(f.StaleTime, 0) + max(f.TimeBackwards, 0))
	if back > t {
		return 0
	}
	return t - back
}

// stateCertificate certifies the given paths of the replica state. The
// state holds the time, the subnet, every hosted canister's certified
// data and the request statuses the paths name; the rest of the ingress
// history is left out, which a client cannot tell from pruning.
func (s *Server) stateCertificate(ecid principal.Principal, paths [][][]byte, f Faults) ([]byte, error) {
	var statuses []skid
	seen := map[[32]byte]bool{}
	s.statusMu.Lock()
	for _, p := range paths {
		if len(p) >= 2 && string(p[0]) == "request_status" && len(p[1]) == 32 {
			rid := [32]byte(p[1])
			if st := s.statuses[rid]; st != nil && !seen[rid] {
				seen[rid] = true
				statuses = append(statuses, lbl(p[1], st.tree()))
			}
		}
	}
	s.statusMu.Unlock()

	s.mu.RLock()
	hostedNow := make([]Canister, 0, len(s.canisters))
	for _, h := range s.canisters {
		hostedNow = append(hostedNow, h.c)
	}
	var empty []skid
	for id := range s.empty {
		// A canister without code: its controllers, nothing else.
		empty = append(empty, lbl([]byte(id), branch(lbl([]byte("controllers"), leaf(s.keys.controllersCBOR())))))
	}
	s.mu.RUnlock()
	cans := empty
	for _, c := range hostedNow {
		// Every installed canister has controllers and a module hash, as
		// on the IC; the hash names the canister's Go type, which stands
		// for its code.
		mh := sha256.Sum256(fmt.Appendf(nil, "ledgertest module %T", c))
		kids := []skid{
			lbl([]byte("controllers"), leaf(s.keys.controllersCBOR())),
			lbl([]byte("module_hash"), leaf(mh[:])),
		}
		if d := c.CertifiedData(); d != nil {
			kids = append(kids, lbl([]byte("certified_data"), leaf(d)))
		}
		if pm, ok := c.(publicMetadata); ok {
			var sections []skid
			for name, v := range pm.PublicMetadata() {
				sections = append(sections, lbl([]byte(name), leaf(v)))
			}
			kids = append(kids, lbl([]byte("metadata"), branch(sections...)))
		}
		cans = append(cans, lbl(c.ID().Raw, branch(kids...)))
	}
	top := []skid{
		lbl([]byte("canister"), branch(cans...)),
		lbl([]byte("canister_ranges"), s.keys.shardedRanges()),
		lbl([]byte("subnet"), s.keys.subnetTree()),
		lbl([]byte("time"), leaf(leb(s.certTime(f)))),
	}
	if len(statuses) > 0 {
		top = append(top, lbl([]byte("request_status"), branch(statuses...)))
	}
	if f.PruneCanisters {
		kept := make([][][]byte, 0, len(paths))
		for _, p := range paths {
			if string(p[0]) != "canister" {
				kept = append(kept, p)
			}
		}
		paths = kept
	}
	// Every certificate reveals /time, requested or not, as on the IC.
	paths = append(paths[:len(paths):len(paths)], [][]byte{[]byte("time")})
	return s.keys.certify(branch(top...).witness(paths, false), f.WrongKey)
}

// dataCertificate is what ic0.data_certificate() returns to a query of
// cid: /canister/<cid>/certified_data = data and /time revealed, the subnet
// pruned. Other canisters are left out of the state so that building it
// never calls into another canister while this one is executing.
func (s *Server) dataCertificate(cid principal.Principal, data []byte, f Faults, notAfter uint64) []byte {
	if f.ForeignCertificate {
		cid = s.foreignID(cid)
	}
	state := branch(
		lbl([]byte("canister"), branch(lbl(cid.Raw, branch(lbl([]byte("certified_data"), leaf(data)))))),
		lbl([]byte("subnet"), s.keys.subnetTree()),
		lbl([]byte("time"), leaf(leb(min(s.certTime(f), notAfter)))),
	)
	cert, err := s.keys.certify(state.witness([][][]byte{{[]byte("canister"), cid.Raw, []byte("certified_data")}, {[]byte("time")}}, false), f.WrongKey)
	if err != nil {
		// Signing only fails on a broken key, which newKeys rules out.
		panic(fmt.Sprintf("ledgertest: data certificate: %v", err))
	}
	return cert
}

// foreignID is a valid canister id in the subnet's range other than cid.
func (s *Server) foreignID(cid principal.Principal) principal.Principal {
	lo, hi := s.keys.rangeBounds()
	if bytes.Equal(cid.Raw, hi.Raw) {
		return lo
	}
	return hi
}

func (s *Server) garbageBytes(n int) []byte {
	if n < 1 {
		n = 1
	}
	s.garbageMu.Lock()
	defer s.garbageMu.Unlock()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(s.garbage.Uint32())
	}
	// Never start like Candid ("DIDL") or a CBOR map, so garbage is garbage.
	b[0] = 0xff
	return b
}

func writeCBOR(w http.ResponseWriter, status int, v any) {
	b, err := cbor.Marshal(v)
	if err != nil {
		textError(w, http.StatusInternalServerError, "ledgertest: encode response: %v", err)
		return
	}
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/cbor")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func textError(w http.ResponseWriter, status int, format string, a ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, format, a...)
}

// Stats counts requests per canister: queries and calls per method, and
// read_states.
type Stats struct {
	Canisters map[string]CanisterStats // by textual canister id
}

// CanisterStats are the counters of one canister.
type CanisterStats struct {
	Queries    map[string]uint64 // by method
	Calls      map[string]uint64 // by method
	ReadStates uint64
}

// Queries is the number of queries to method of id ("" = all methods).
func (s Stats) Queries(id principal.Principal, method string) uint64 {
	return sumMethod(s.Canisters[id.Encode()].Queries, method)
}

// Calls is the number of update calls to method of id ("" = all methods).
func (s Stats) Calls(id principal.Principal, method string) uint64 {
	return sumMethod(s.Canisters[id.Encode()].Calls, method)
}

// ReadStates is the number of read_state requests addressed to id.
func (s Stats) ReadStates(id principal.Principal) uint64 {
	return s.Canisters[id.Encode()].ReadStates
}

func sumMethod(m map[string]uint64, method string) uint64 {
	if method != "" {
		return m[method]
	}
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// Stats returns a snapshot of the request counters.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

type statKey struct {
	canister string
	ep       endpoint
	method   string
}

type statsTable struct{ m sync.Map } // statKey → *atomic.Uint64

func (t *statsTable) count(id principal.Principal, ep endpoint, method string) {
	if ep == epCallSync || ep == epCallSyncV3 {
		ep = epCallAsync
	}
	if ep == epReadState {
		method = ""
	}
	k := statKey{canister: id.Encode(), ep: ep, method: method}
	v, ok := t.m.Load(k)
	if !ok {
		v, _ = t.m.LoadOrStore(k, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
}

func (t *statsTable) snapshot() Stats {
	out := Stats{Canisters: map[string]CanisterStats{}}
	t.m.Range(func(key, value any) bool {
		k, n := key.(statKey), value.(*atomic.Uint64).Load()
		cs := out.Canisters[k.canister]
		switch k.ep {
		case epQuery:
			if cs.Queries == nil {
				cs.Queries = map[string]uint64{}
			}
			cs.Queries[k.method] += n
		case epCallAsync:
			if cs.Calls == nil {
				cs.Calls = map[string]uint64{}
			}
			cs.Calls[k.method] += n
		case epReadState:
			cs.ReadStates += n
		}
		out.Canisters[k.canister] = cs
		return true
	})
	return out
}
