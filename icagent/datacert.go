package icagent

import (
	"fmt"
	"math"
	"time"

	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc3"
)

// VerifyDataCertificate checks a data certificate served by canister (BLS
// under rootKey, delegation and canister range) and that its /time is at
// most maxAge older than now. It returns the canister's certified_data as
// the verified tree holds it (empty when the canister never set any) and
// the certified /time.
func VerifyDataCertificate(canister principal.Principal, rootKey, certificate []byte, maxAge time.Duration, now time.Time) (data []byte, certTime uint64, err error) {
	cert, err := ParseCertificate(certificate)
	if err != nil {
		return nil, 0, &icrc3.Error{Kind: icrc3.KindDecode, Canister: canister, Msg: "data certificate", Err: err}
	}
	if err := verifyCertificate(cert, canister, rootKey); err != nil {
		return nil, 0, &icrc3.Error{Kind: icrc3.KindCertificate, Canister: canister, Msg: "data certificate", Err: err}
	}
	t, err := certifiedTime(cert)
	if err != nil {
		return nil, 0, &icrc3.Error{Kind: icrc3.KindCertificate, Canister: canister, Msg: "data certificate /time", Err: err}
	}
	if t <= math.MaxInt64 {
		if age := now.UnixNano() - int64(t); age > int64(maxAge) {
			return nil, 0, &icrc3.Error{Kind: icrc3.KindStale, Canister: canister,
				Msg: fmt.Sprintf("data certificate /time is %s old, more than %s", time.Duration(age), maxAge)}
		}
	}
	// Every canister has certified_data (the empty blob until it sets
	// any): a certificate without this canister's certifies another.
	data, err = cert.Tree.Lookup(hashtree.Label("canister"), hashtree.Label(canister.Raw), hashtree.Label("certified_data"))
	if err != nil {
		return nil, 0, &icrc3.Error{Kind: icrc3.KindCertificate, Canister: canister, Msg: "data certificate holds no certified_data of this canister", Err: err}
	}
	return data, t, nil
}
