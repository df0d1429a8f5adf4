package icagent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/principal"

	"github.com/reconciled/reconciled/icrc3"
)

// VerifyTipCertificate checks a tip certificate as served by
// icrc3_get_tip_certificate or get_data_certificate: the certificate's BLS
// signature under rootKey (with delegation and canister ranges), that its
// certified_data for ledger is the root hash of hashTree, and that its /time
// is at most maxAge older than now (a certificate from the future is fine:
// the ledger's clock may run ahead of ours). It then reads the tip from the
// tree, in either format.
func VerifyTipCertificate(ledger principal.Principal, rootKey, certificate, hashTree []byte, maxAge time.Duration, now time.Time) (icrc3.Tip, error) {
	fail := func(k icrc3.ErrorKind, msg string, err error) (icrc3.Tip, error) {
		return icrc3.Tip{}, &icrc3.Error{Kind: k, Canister: ledger, Msg: msg, Err: err}
	}
	tree, err := ParseHashTree(hashTree)
	if err != nil {
		return fail(icrc3.KindDecode, "tip hash_tree", err)
	}
	cert, err := ParseCertificate(certificate)
	if err != nil {
		return fail(icrc3.KindDecode, "tip certificate", err)
	}
	root := tree.Reconstruct()
	if err := verifyCertifiedData(cert, ledger, rootKey, root[:]); err != nil {
		return fail(icrc3.KindCertificate, "tip certificate", err)
	}
	certTime, err := certifiedTime(cert)
	if err != nil {
		return fail(icrc3.KindCertificate, "tip certificate /time", err)
	}
	// A certificate from the future is fine (the ledger's clock may run
	// ahead of ours); only age is bounded.
	if certTime <= math.MaxInt64 {
		if age := now.UnixNano() - int64(certTime); age > int64(maxAge) {
			return fail(icrc3.KindStale, fmt.Sprintf("certified time %s is %s old (limit %s)",
				time.Unix(0, int64(certTime)).UTC().Format(time.RFC3339Nano), time.Duration(age), maxAge), nil)
		}
	}
	tip, err := ReadTipTree(tree)
	if err != nil {
		return fail(icrc3.KindDecode, "tip hash_tree", err)
	}
	tip.Time = certTime
	return tip, nil
}

// verifyCertifiedData runs agent-go's verification, which decodes further
// CBOR (canister ranges, keys) from the certificate; a panic there on
// hostile input becomes an error.
func verifyCertifiedData(cert *certification.Certificate, ledger principal.Principal, rootKey, data []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("certificate verification panicked: %v", p)
		}
	}()
	return certification.VerifyCertifiedData(*cert, ledger, rootKey, data)
}

func certifiedTime(cert *certification.Certificate) (uint64, error) {
	raw, err := cert.Tree.Lookup(hashtree.Label("time"))
	if err != nil {
		return 0, err
	}
	return decodeULEB64(raw)
}

// decodeULEB64 decodes a canonical ULEB128 that fills raw exactly and fits
// in 64 bits.
func decodeULEB64(raw []byte) (uint64, error) {
	var v uint64
	for i, c := range raw {
		if i == 9 && c > 1 {
			return 0, fmt.Errorf("LEB128 value overflows 64 bits")
		}
		if i > 9 {
			return 0, fmt.Errorf("LEB128 value overflows 64 bits")
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if i != len(raw)-1 {
				return 0, fmt.Errorf("LEB128 value followed by %d bytes", len(raw)-1-i)
			}
			if c == 0 && i > 0 {
				return 0, fmt.Errorf("non-canonical LEB128")
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("unterminated LEB128 (%d bytes)", len(raw))
}

type lookup struct {
	val     []byte
	found   bool
	unknown bool
}

func lookupLeaf(tree hashtree.Node, label string) (lookup, error) {
	r, err := lookupAt(tree, hashtree.Label(label))
	if err != nil {
		return lookup{}, fmt.Errorf("%s: %w", label, err)
	}
	return r, nil
}

// lookupAt looks path up in tree: found, provably absent (the zero
// lookup), or hidden by pruning (unknown); any other failure (a subtree
// where a leaf belongs) is an error.
func lookupAt(tree hashtree.Node, path ...hashtree.Label) (lookup, error) {
	v, err := hashtree.Lookup(tree, path...)
	if err == nil {
		return lookup{val: v, found: true}, nil
	}
	var le hashtree.LookupError
	if errors.As(err, &le) {
		switch le.Type {
		case hashtree.LookupResultAbsent:
			return lookup{}, nil
		case hashtree.LookupResultUnknown:
			return lookup{unknown: true}, nil
		}
	}
	return lookup{}, err
}

// ReadTipTree reads the tip from a ledger's certified tree. A tip_hash
// label selects the legacy format (8-byte big-endian index); otherwise
// last_block_hash + ULEB128 last_block_index. A tree in which all three
// labels are provably absent (the empty tree) means "no blocks"; a tree
// that hides any of them behind a pruned node proves nothing.
func ReadTipTree(tree hashtree.Node) (icrc3.Tip, error) {
	var ls [3]lookup
	for i, l := range []string{"tip_hash", "last_block_hash", "last_block_index"} {
		r, err := lookupLeaf(tree, l)
		if err != nil {
			return icrc3.Tip{}, err
		}
		if r.unknown {
			return icrc3.Tip{}, fmt.Errorf("%s is pruned from the tip tree", l)
		}
		ls[i] = r
	}
	tipHash, lastHash, lastIndex := ls[0], ls[1], ls[2]
	var t icrc3.Tip
	switch {
	case tipHash.found:
		if lastHash.found {
			return icrc3.Tip{}, fmt.Errorf("tip tree has both tip_hash and last_block_hash")
		}
		if !lastIndex.found || len(lastIndex.val) != 8 {
			return icrc3.Tip{}, fmt.Errorf("legacy tip tree: last_block_index must be 8 bytes, is %d", len(lastIndex.val))
		}
		t.Index = binary.BigEndian.Uint64(lastIndex.val)
		t.Format = icrc3.TipFormatLegacy
		if len(tipHash.val) != len(t.Hash) {
			return icrc3.Tip{}, fmt.Errorf("tip_hash has %d bytes", len(tipHash.val))
		}
		copy(t.Hash[:], tipHash.val)
	case lastHash.found:
		if !lastIndex.found {
			return icrc3.Tip{}, fmt.Errorf("tip tree has last_block_hash but no last_block_index")
		}
		i, err := decodeULEB64(lastIndex.val)
		if err != nil {
			return icrc3.Tip{}, fmt.Errorf("last_block_index: %w", err)
		}
		t.Index = i
		t.Format = icrc3.TipFormatLEB128
		if len(lastHash.val) != len(t.Hash) {
			return icrc3.Tip{}, fmt.Errorf("last_block_hash has %d bytes", len(lastHash.val))
		}
		copy(t.Hash[:], lastHash.val)
	case lastIndex.found:
		return icrc3.Tip{}, fmt.Errorf("tip tree has last_block_index but no block hash")
	default:
		t.Empty = true
		t.Format = icrc3.TipFormatLEB128
	}
	return t, nil
}
