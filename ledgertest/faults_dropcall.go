package ledgertest

import (
	"net/http"
	"sync"

	"github.com/aviate-labs/agent-go/principal"
)

// Calls answered 202 and then dropped: the boundary accepts an update call
// and the subnet loses it before it reaches the ingress queue. The call is
// never executed and its request id never appears under /request_status,
// so a client polling read_state for it sees "unknown" until it gives up
// by itself: only the envelope's ingress expiry tells it the call can no
// longer run.
//
// The switch lives beside Faults rather than in it, so that the JSON fault
// API stays as it is.

type dropKey struct {
	s  *Server
	id string
}

var droppedCalls sync.Map // dropKey -> struct{}

// DropAcceptedCalls turns the 202-then-dropped fault on or off for update
// calls (every call endpoint) to canister id.
func (s *Server) DropAcceptedCalls(id principal.Principal, on bool) {
	k := dropKey{s, id.String()}
	if on {
		droppedCalls.Store(k, struct{}{})
	} else {
		droppedCalls.Delete(k)
	}
}

// dropAcceptedCall answers a call to ecid 202 Accepted and forgets it when
// the fault is on; it reports whether it did.
func (s *Server) dropAcceptedCall(w http.ResponseWriter, ecid principal.Principal) bool {
	if _, ok := droppedCalls.Load(dropKey{s, ecid.String()}); !ok {
		return false
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}
