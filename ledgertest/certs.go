package ledgertest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/certification/bls"
	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/leb128"
	"github.com/aviate-labs/agent-go/principal"
	bls12381 "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
	"github.com/fxamacker/cbor/v2"
)

// selfDescribeTag is CBOR tag 55799, which the IC puts in front of every
// certificate it emits.
const selfDescribeTag = 55799

// canisterRangeSize is how many canister ids one subnet range spans.
const canisterRangeSize = 1 << 20

// keys is the key material of one replica: the root (NNS) key, the key of
// the subnet that hosts the canisters, a node key signing query replies and
// an unrelated key for the WrongKey fault.
type keys struct {
	delegated bool

	rootSK   *bls.SecretKey
	rootDER  []byte
	subnetSK *bls.SecretKey // == rootSK in root-subnet mode
	subDER   []byte
	wrongSK  *bls.SecretKey
	subnetID principal.Principal

	nodeSK  ed25519.PrivateKey
	nodeDER []byte
	nodeID  principal.Principal

	// Canister ids are 8-byte big-endian counters followed by 0x01 0x01, as
	// on mainnet; the subnet owns counters [rangeLo, rangeLo+canisterRangeSize).
	rangeLo uint64

	// delegation is the CBOR of {subnet_id, certificate}. A real replica
	// reuses its delegation for days, so it is remade only when the ledger
	// clock has moved more than delegationMaxAge past its /time: agent-js
	// refuses delegations older than 30 days (agent-go ignores their time).
	delegation atomic.Pointer[delegation]
}

type delegation struct {
	cbor cbor.RawMessage
	time uint64
}

const delegationMaxAge = uint64(7 * 24 * time.Hour)

// refreshDelegation remakes the delegation when it is too old for now.
func (k *keys) refreshDelegation(now uint64) error {
	if !k.delegated {
		return nil
	}
	if d := k.delegation.Load(); d != nil && now-d.time <= delegationMaxAge {
		return nil
	}
	return k.makeDelegation(now)
}

// derive returns 32 deterministic bytes for one purpose of one seed.
func derive(seed int64, purpose string) []byte {
	h := sha256.Sum256(fmt.Appendf(nil, "ledgertest/%d/%s", seed, purpose))
	return h[:]
}

func blsKey(seed int64, purpose string) *bls.SecretKey {
	var e fr.Element
	e.SetBytes(derive(seed, purpose))
	if e.IsZero() {
		e.SetOne()
	}
	sk := bls.SecretKey(e)
	return &sk
}

func blsDER(sk *bls.SecretKey) ([]byte, error) {
	b := (*bls12381.G2Affine)(sk.PublicKey()).Bytes()
	return certification.PublicBLSKeyToDER(b[:])
}

func newKeys(seed int64, delegated bool, now uint64) (*keys, error) {
	k := &keys{delegated: delegated}
	k.rootSK = blsKey(seed, "root")
	k.wrongSK = blsKey(seed, "wrong")
	var err error
	if k.rootDER, err = blsDER(k.rootSK); err != nil {
		return nil, fmt.Errorf("ledgertest: root key: %w", err)
	}
	if delegated {
		k.subnetSK = blsKey(seed, "subnet")
		if k.subDER, err = blsDER(k.subnetSK); err != nil {
			return nil, fmt.Errorf("ledgertest: subnet key: %w", err)
		}
		k.subnetID = principal.NewSelfAuthenticating(k.subDER)
	} else {
		// agent-go looks node keys up under its hard-coded root subnet id
		// whenever a certificate has no delegation.
		k.subnetSK, k.subDER = k.rootSK, k.rootDER
		k.subnetID = principal.MustDecode(certification.RootSubnetID)
	}
	k.nodeSK = ed25519.NewKeyFromSeed(derive(seed, "node"))
	if k.nodeDER, err = x509.MarshalPKIXPublicKey(k.nodeSK.Public()); err != nil {
		return nil, fmt.Errorf("ledgertest: node key: %w", err)
	}
	k.nodeID = principal.NewSelfAuthenticating(k.nodeDER)
	// Leave room below the range so tests can name an id outside it.
	k.rangeLo = (1 + uint64(binary.BigEndian.Uint16(derive(seed, "range")))) * canisterRangeSize
	if delegated {
		if err := k.makeDelegation(now); err != nil {
			return nil, err
		}
	}
	return k, nil
}

func canisterIDFromCounter(n uint64) principal.Principal {
	raw := make([]byte, 10)
	binary.BigEndian.PutUint64(raw, n)
	raw[8], raw[9] = 0x01, 0x01
	return principal.Principal{Raw: raw}
}

func (k *keys) rangeBounds() (lo, hi principal.Principal) {
	return canisterIDFromCounter(k.rangeLo), canisterIDFromCounter(k.rangeLo + canisterRangeSize - 1)
}

// controllersCBOR is every canister's /canister/<id>/controllers: a CBOR
// array of principals (one, derived from the node key, for all).
func (k *keys) controllersCBOR() []byte {
	b, err := cbor.Marshal(cbor.Tag{Number: selfDescribeTag, Content: [][]byte{k.nodeID.Raw}})
	if err != nil {
		panic(err) // a fixed shape of byte strings always encodes
	}
	return b
}

func (k *keys) rangesCBOR() []byte {
	lo, hi := k.rangeBounds()
	b, err := cbor.Marshal([][][]byte{{lo.Raw, hi.Raw}})
	if err != nil {
		panic(err) // a fixed shape of byte strings always encodes
	}
	return b
}

// subnetTree is /subnet/<sid>/{canister_ranges, node/<nid>/public_key, public_key}.
func (k *keys) subnetTree() *stree {
	return branch(lbl(k.subnetID.Raw, branch(
		lbl([]byte("canister_ranges"), leaf(k.rangesCBOR())),
		lbl([]byte("node"), branch(lbl(k.nodeID.Raw, branch(lbl([]byte("public_key"), leaf(k.nodeDER)))))),
		lbl([]byte("public_key"), leaf(k.subDER)),
	)))
}

// shardedRanges is /canister_ranges/<sid>/<first id of the shard>, the
// layout that v3 read_state and v4 call certificates use.
func (k *keys) shardedRanges() *stree {
	lo, _ := k.rangeBounds()
	return branch(lbl(k.subnetID.Raw, branch(lbl(lo.Raw, leaf(k.rangesCBOR())))))
}

func (k *keys) makeDelegation(now uint64) error {
	state := branch(
		lbl([]byte("canister_ranges"), k.shardedRanges()),
		lbl([]byte("subnet"), k.subnetTree()),
		lbl([]byte("time"), leaf(leb(now))),
	)
	inner, err := encodeCertificate(state.witness(nil, true), k.rootSK, nil)
	if err != nil {
		return fmt.Errorf("ledgertest: delegation: %w", err)
	}
	// agent-go decodes the delegation as map[string][]byte, so the nested
	// certificate is a byte string, not an embedded map.
	d, err := cbor.Marshal(map[string][]byte{"subnet_id": k.subnetID.Raw, "certificate": inner})
	if err != nil {
		return fmt.Errorf("ledgertest: delegation: %w", err)
	}
	k.delegation.Store(&delegation{cbor: d, time: now})
	return nil
}

// certify signs a witness with the subnet key (or the wrong key) and
// attaches the delegation in delegated mode.
func (k *keys) certify(witness hashtree.Node, wrongKey bool) ([]byte, error) {
	sk := k.subnetSK
	if wrongKey {
		sk = k.wrongSK
	}
	var d cbor.RawMessage
	if cur := k.delegation.Load(); cur != nil {
		d = cur.cbor
	}
	return encodeCertificate(witness, sk, d)
}

func encodeCertificate(tree hashtree.Node, sk *bls.SecretKey, delegation cbor.RawMessage) ([]byte, error) {
	root := tree.Reconstruct()
	sig, err := sk.Sign(append(hashtree.DomainSeparator("ic-state-root"), root[:]...))
	if err != nil {
		return nil, fmt.Errorf("sign state root: %w", err)
	}
	ser, err := hashtree.Serialize(tree)
	if err != nil {
		return nil, fmt.Errorf("serialize tree: %w", err)
	}
	sb := (*bls12381.G1Affine)(sig).Bytes()
	m := map[string]any{"tree": cbor.RawMessage(ser), "signature": sb[:]}
	if delegation != nil {
		m["delegation"] = delegation
	}
	return cbor.Marshal(cbor.Tag{Number: selfDescribeTag, Content: m})
}

func leb(v uint64) []byte { return leb128.AppendUnsignedUint64(nil, v) }

// stree is a labeled state tree from which witnesses are cut. A node is
// either a leaf or a sorted list of labeled children.
type stree struct {
	isLeaf bool
	value  []byte
	kids   []skid
}

type skid struct {
	label []byte
	t     *stree
}

func leaf(v []byte) *stree { return &stree{isLeaf: true, value: v} }

// lbl clips the label's capacity: agent-go's Labeled.Reconstruct appends
// the subtree hash to the label slice, which would otherwise write into a
// shared backing array (such as a principal's Raw) under concurrent use.
func lbl(label []byte, t *stree) skid { return skid{label: label[:len(label):len(label)], t: t} }

// branch sorts the children: hashtree lookups rely on bytewise label order.
func branch(kids ...skid) *stree {
	sort.Slice(kids, func(i, j int) bool { return bytes.Compare(kids[i].label, kids[j].label) < 0 })
	return &stree{kids: kids}
}

// witness reveals the given paths (and everything below their ends) and
// prunes the rest, keeping every label so that a path missing from the
// state is provably absent rather than unknown.
func (t *stree) witness(paths [][][]byte, full bool) hashtree.Node {
	if t.isLeaf {
		// Only reached on a requested path or inside a revealed subtree.
		return hashtree.Leaf(t.value)
	}
	if len(t.kids) == 0 {
		return hashtree.Empty{}
	}
	nodes := make([]hashtree.Node, len(t.kids))
	for i, k := range t.kids {
		var sub [][][]byte
		kidFull := full
		for _, p := range paths {
			if len(p) > 0 && bytes.Equal(p[0], k.label) {
				if len(p) == 1 {
					kidFull = true
				}
				sub = append(sub, p[1:])
			}
		}
		var n hashtree.Node
		if kidFull || len(sub) > 0 {
			n = k.t.witness(sub, kidFull)
		} else {
			n = hashtree.Pruned(k.t.witness(nil, true).Reconstruct())
		}
		nodes[i] = hashtree.Labeled{Label: k.label, Tree: n}
	}
	return forks(nodes)
}

func forks(n []hashtree.Node) hashtree.Node {
	if len(n) == 1 {
		return n[0]
	}
	mid := len(n) / 2
	return hashtree.Fork{LeftTree: forks(n[:mid]), RightTree: forks(n[mid:])}
}
