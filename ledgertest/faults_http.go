package ledgertest

import (
	"net/http"
	"time"
)

// applyTransportFaults applies the faults that act before a request reaches
// the canister: an unreachable host and a forced HTTP status. It reports
// whether the request should go on.
func (s *Server) applyTransportFaults(w http.ResponseWriter, r *http.Request, f Faults) bool {
	if f.Unreachable {
		// Drop the connection without a byte of reply, as a host that is
		// down would after accepting.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return false
			}
		}
		panic(http.ErrAbortHandler) // net/http closes the connection without a reply
	}
	if f.HTTPStatus != 0 {
		textError(w, f.HTTPStatus, "%s (injected fault)", http.StatusText(f.HTTPStatus))
		return false
	}
	return true
}

// delay holds a reply back by the Latency fault. Updates call it after
// executing, so a client that gives up while waiting leaves a committed
// update behind, the unknown outcome this package exists to produce. It
// reports false when the client went away meanwhile.
func delay(r *http.Request, f Faults) bool {
	if f.Latency <= 0 {
		return true
	}
	t := time.NewTimer(f.Latency)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}
