package ledgertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aviate-labs/agent-go/principal"
	"github.com/reconciled/reconciled/icrc3"
)

// adminRoutes serves the clock and the fault switches over HTTP for tests
// that run the replica out of process.
func (s *Server) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/time", s.adminGetTime)
	mux.HandleFunc("POST /admin/time", s.adminAdvance)
	mux.HandleFunc("GET /admin/faults/{id}", s.adminGetFaults)
	mux.HandleFunc("POST /admin/faults/{id}", s.adminSetFaults)
	mux.HandleFunc("POST /admin/ledgers/{id}/mint", s.adminMint)
}

// adminMint funds an account: an icrc1_transfer from the ledger's minting
// account, so the ledger records an ordinary mint block.
func (s *Server) adminMint(w http.ResponseWriter, r *http.Request) {
	id, err := principal.Decode(r.PathValue("id"))
	if err != nil {
		textError(w, http.StatusBadRequest, "admin mint: canister id %q: %v", r.PathValue("id"), err)
		return
	}
	var ledger interface {
		Mint(icrc3.Account, icrc3.Nat) (uint64, error)
	}
	if h := s.canister(id); h != nil {
		switch l := h.c.(type) {
		case *Ledger:
			ledger = l
		case *ICPLedger:
			ledger = l
		}
	}
	if ledger == nil {
		textError(w, http.StatusNotFound, "admin mint: %s is not a ledger on this replica", id)
		return
	}
	var in struct {
		To     string `json:"to"`
		Amount string `json:"amount"`
	}
	if err := decodeJSON(r, &in); err != nil {
		textError(w, http.StatusBadRequest, "admin mint: %v", err)
		return
	}
	to, err := icrc3.ParseAccount(in.To)
	if err != nil {
		textError(w, http.StatusBadRequest, "admin mint: to %q: %v", in.To, err)
		return
	}
	amount, err := icrc3.ParseNat(in.Amount)
	if err != nil {
		textError(w, http.StatusBadRequest, "admin mint: amount %q: %v", in.Amount, err)
		return
	}
	idx, err := ledger.Mint(to, amount)
	if err != nil {
		textError(w, http.StatusConflict, "admin mint: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Block string `json:"block"`
	}{strconv.FormatUint(idx, 10)})
}

type adminTime struct {
	NowNS string `json:"now_ns"`
}

func (s *Server) adminGetTime(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, adminTime{NowNS: strconv.FormatUint(s.Now(), 10)})
}

func (s *Server) adminAdvance(w http.ResponseWriter, r *http.Request) {
	var in struct {
		AdvanceNS string `json:"advance_ns"`
	}
	if err := decodeJSON(r, &in); err != nil {
		textError(w, http.StatusBadRequest, "admin time: %v", err)
		return
	}
	ns, err := strconv.ParseInt(in.AdvanceNS, 10, 64)
	if err != nil || ns < 0 {
		textError(w, http.StatusBadRequest, "admin time: advance_ns must be a non-negative decimal string of ns, got %q", in.AdvanceNS)
		return
	}
	s.Advance(time.Duration(ns))
	writeJSON(w, http.StatusOK, adminTime{NowNS: strconv.FormatUint(s.Now(), 10)})
}

func (s *Server) adminGetFaults(w http.ResponseWriter, r *http.Request) {
	id, err := principal.Decode(r.PathValue("id"))
	if err != nil {
		textError(w, http.StatusBadRequest, "admin faults: canister id %q: %v", r.PathValue("id"), err)
		return
	}
	writeJSON(w, http.StatusOK, s.Faults(id))
}

func (s *Server) adminSetFaults(w http.ResponseWriter, r *http.Request) {
	id, err := principal.Decode(r.PathValue("id"))
	if err != nil {
		textError(w, http.StatusBadRequest, "admin faults: canister id %q: %v", r.PathValue("id"), err)
		return
	}
	var f Faults
	if err := decodeJSON(r, &f); err != nil {
		textError(w, http.StatusBadRequest, "admin faults: %v", err)
		return
	}
	if err := validateFaults(f); err != nil {
		textError(w, http.StatusBadRequest, "admin faults: %v", err)
		return
	}
	s.SetFaults(id, f)
	writeJSON(w, http.StatusOK, s.Faults(id))
}

func validateFaults(f Faults) error {
	switch f.Garbage {
	case "", "truncated", "cbor", "candid":
	default:
		return fmt.Errorf("garbage must be one of truncated, cbor, candid; got %q", f.Garbage)
	}
	switch f.RejectAs {
	case "", "missing", "stopped":
	default:
		return fmt.Errorf("reject_as must be missing or stopped, got %q", f.RejectAs)
	}
	if f.QueryReject > 5 {
		return fmt.Errorf("query_reject must be a reject code 1..5, got %d", f.QueryReject)
	}
	if f.HTTPStatus != 0 && (f.HTTPStatus < 100 || f.HTTPStatus > 599) {
		return fmt.Errorf("http_status %d is not an HTTP status", f.HTTPStatus)
	}
	if f.Latency < 0 || f.StaleTime < 0 || f.TimeBackwards < 0 {
		return fmt.Errorf("durations must not be negative")
	}
	return nil
}

func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode JSON body: %w", err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
