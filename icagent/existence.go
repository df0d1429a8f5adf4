package icagent

import (
	"context"
	"fmt"
	"time"

	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/certification/hashtree"

	"github.com/reconciled/reconciled/icrc3"
)

// Existence is what the IC's certified state says of a canister id.
type Existence int

const (
	// ExistenceUnknown: nothing certified was learnt (always with an error).
	ExistenceUnknown Existence = iota
	// CanisterMissing: the subnet responsible for the id certifies that no
	// canister has it.
	CanisterMissing
	// CanisterEmpty: the canister exists (its controllers are certified)
	// and has no code installed (its module_hash is certified absent).
	CanisterEmpty
	// CanisterInstalled: the canister has code (a certified module_hash).
	CanisterInstalled
)

func (e Existence) String() string {
	switch e {
	case CanisterMissing:
		return "missing"
	case CanisterEmpty:
		return "empty"
	case CanisterInstalled:
		return "installed"
	}
	return "unknown"
}

// CanisterExistence reads /canister/<id>/module_hash and
// /canister/<id>/controllers of the conn's canister by read_state and says
// what the certificate proves. Absence is taken only from a certificate
// that is valid under the root key, carries a delegation whose
// canister_ranges cover the id (the signing subnet is the one that would
// host it: any other subnet's state lacks the id truthfully), is fresh by
// MaxCertAge (an id absent an hour ago may be a canister created since),
// and whose tree proves the paths absent: a pruned subtree proves nothing.
// A root-subnet certificate (no delegation) proves presence but never
// absence, since its own canister range is not in it. Every other answer
// (an HTTP error, a boundary node's canister_not_found, a reject, a bad
// signature, a stale time) is ExistenceUnknown with an error: one node's
// word, to retry later.
func (c *Conn) CanisterExistence(ctx context.Context) (Existence, error) {
	const what = "read_state /canister/<id>/module_hash"
	id := c.ledger.Raw
	paths := [][]hashtree.Label{
		{hashtree.Label("canister"), id, hashtree.Label("module_hash")},
		{hashtree.Label("canister"), id, hashtree.Label("controllers")},
	}
	raw, err := c.readStateCertificate(ctx, what, paths)
	if err != nil {
		return ExistenceUnknown, err
	}
	cert, err := c.verifiedCertificate(raw, what)
	if err != nil {
		return ExistenceUnknown, err
	}
	fail := func(msg string, err error) (Existence, error) {
		return ExistenceUnknown, &icrc3.Error{Kind: icrc3.KindCertificate, Canister: c.ledger, Method: what, Msg: msg, Err: err}
	}
	module, err := lookupPathLeaf(cert, paths[0])
	if err != nil {
		return fail("module_hash", err)
	}
	if module.found {
		return CanisterInstalled, nil
	}
	if cert.Delegation == nil {
		return fail("absence of module_hash under the root subnet's certificate, which does not certify its own canister range", nil)
	}
	t, err := certifiedTime(cert)
	if err != nil {
		return fail("certificate /time", err)
	}
	if age := c.now().Sub(time.Unix(0, int64(min(t, uint64(1<<63-1))))); age > c.maxAge {
		return ExistenceUnknown, &icrc3.Error{Kind: icrc3.KindStale, Canister: c.ledger, Method: what,
			Msg: fmt.Sprintf("certified time is %s old (limit %s)", age, c.maxAge)}
	}
	controllers, err := lookupPathLeaf(cert, paths[1])
	if err != nil {
		return fail("controllers", err)
	}
	if controllers.found {
		return CanisterEmpty, nil
	}
	return CanisterMissing, nil
}

// lookupPathLeaf looks path up in a verified certificate's tree: found,
// provably absent (the zero lookup), or an error when pruning hides it or
// the tree holds something other than a leaf there.
func lookupPathLeaf(cert *certification.Certificate, path []hashtree.Label) (lookup, error) {
	r, err := lookupAt(cert.Tree.Root, path...)
	if err == nil && r.unknown {
		return lookup{}, fmt.Errorf("the certificate prunes the path: it proves neither presence nor absence")
	}
	return r, err
}
