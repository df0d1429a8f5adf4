package icagent

import (
	"errors"
	"fmt"

	"github.com/aviate-labs/agent-go/certification"
	"github.com/aviate-labs/agent-go/certification/hashtree"
	"github.com/aviate-labs/agent-go/principal"
)

// A strict reader for the two CBOR documents of a tip certificate: the hash
// tree and the certificate around it. agent-go's hashtree.Deserialize
// panics on an empty array and maps a CBOR null to an empty byte string;
// both blobs come from a single, possibly lying, node, so they are parsed
// here with definite lengths only, exact node arities, 32-byte pruned
// hashes, a depth limit and no trailing bytes.

const (
	maxTreeDepth = 64
	selfDescribe = 55799
)

var errCBOR = errors.New("malformed CBOR")

type cborReader struct {
	b   []byte
	off int
}

// head reads an item head, skipping any self-describe tags in front of it.
func (r *cborReader) head() (major byte, arg uint64, err error) {
	for {
		if r.off >= len(r.b) {
			return 0, 0, fmt.Errorf("%w: unexpected end at offset %d", errCBOR, r.off)
		}
		ib := r.b[r.off]
		r.off++
		major, ai := ib>>5, ib&0x1f
		switch {
		case ai < 24:
			arg = uint64(ai)
		case ai <= 27:
			n := 1 << (ai - 24)
			if len(r.b)-r.off < n {
				return 0, 0, fmt.Errorf("%w: truncated head at offset %d", errCBOR, r.off)
			}
			for _, c := range r.b[r.off : r.off+n] {
				arg = arg<<8 | uint64(c)
			}
			r.off += n
		default:
			return 0, 0, fmt.Errorf("%w: indefinite or reserved length at offset %d", errCBOR, r.off-1)
		}
		if major == 6 {
			if arg != selfDescribe {
				return 0, 0, fmt.Errorf("%w: unexpected tag %d", errCBOR, arg)
			}
			continue
		}
		return major, arg, nil
	}
}

func (r *cborReader) bytes() ([]byte, error) {
	major, n, err := r.head()
	if err != nil {
		return nil, err
	}
	if major != 2 {
		return nil, fmt.Errorf("%w: want a byte string, got major type %d", errCBOR, major)
	}
	if n > uint64(len(r.b)-r.off) {
		return nil, fmt.Errorf("%w: byte string of %d bytes overruns the input", errCBOR, n)
	}
	// Capped capacity: agent-go's Reconstruct appends to labels, which
	// must not write into the bytes that follow them in the input.
	v := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return v, nil
}

func (r *cborReader) text() (string, error) {
	major, n, err := r.head()
	if err != nil {
		return "", err
	}
	if major != 3 {
		return "", fmt.Errorf("%w: want a text string, got major type %d", errCBOR, major)
	}
	if n > uint64(len(r.b)-r.off) {
		return "", fmt.Errorf("%w: text of %d bytes overruns the input", errCBOR, n)
	}
	v := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return v, nil
}

func (r *cborReader) end() error {
	if r.off != len(r.b) {
		return fmt.Errorf("%w: %d trailing bytes", errCBOR, len(r.b)-r.off)
	}
	return nil
}

// ParseHashTree parses a CBOR-encoded IC hash tree strictly.
func ParseHashTree(b []byte) (hashtree.Node, error) {
	r := &cborReader{b: b}
	n, err := r.tree(0)
	if err != nil {
		return nil, err
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return n, nil
}

func (r *cborReader) tree(depth int) (hashtree.Node, error) {
	if depth > maxTreeDepth {
		return nil, fmt.Errorf("%w: hash tree deeper than %d", errCBOR, maxTreeDepth)
	}
	major, n, err := r.head()
	if err != nil {
		return nil, err
	}
	if major != 4 || n == 0 || n > 3 {
		return nil, fmt.Errorf("%w: hash tree node must be an array of 1..3 items (major %d, %d items)", errCBOR, major, n)
	}
	major, tag, err := r.head()
	if err != nil {
		return nil, err
	}
	if major != 0 {
		return nil, fmt.Errorf("%w: hash tree node tag must be an unsigned integer", errCBOR)
	}
	want := map[uint64]uint64{0: 1, 1: 3, 2: 3, 3: 2, 4: 2}
	if arity, ok := want[tag]; !ok || arity != n {
		return nil, fmt.Errorf("%w: hash tree node tag %d with %d items", errCBOR, tag, n)
	}
	switch tag {
	case 0:
		return hashtree.Empty{}, nil
	case 1:
		l, err := r.tree(depth + 1)
		if err != nil {
			return nil, err
		}
		rt, err := r.tree(depth + 1)
		if err != nil {
			return nil, err
		}
		return hashtree.Fork{LeftTree: l, RightTree: rt}, nil
	case 2:
		label, err := r.bytes()
		if err != nil {
			return nil, err
		}
		t, err := r.tree(depth + 1)
		if err != nil {
			return nil, err
		}
		return hashtree.Labeled{Label: hashtree.Label(label), Tree: t}, nil
	case 3:
		v, err := r.bytes()
		if err != nil {
			return nil, err
		}
		return hashtree.Leaf(v), nil
	default:
		h, err := r.bytes()
		if err != nil {
			return nil, err
		}
		if len(h) != 32 {
			return nil, fmt.Errorf("%w: pruned hash of %d bytes", errCBOR, len(h))
		}
		var p hashtree.Pruned
		copy(p[:], h)
		return p, nil
	}
}

// ParseCertificate parses a CBOR-encoded IC certificate strictly, with at
// most one level of delegation (the only depth the IC uses, and the only one
// agent-go verifies).
func ParseCertificate(b []byte) (*certification.Certificate, error) {
	return parseCertificate(b, true)
}

func parseCertificate(b []byte, allowDelegation bool) (*certification.Certificate, error) {
	r := &cborReader{b: b}
	major, n, err := r.head()
	if err != nil {
		return nil, err
	}
	if major != 5 {
		return nil, fmt.Errorf("%w: certificate must be a map", errCBOR)
	}
	var c certification.Certificate
	var haveTree, haveSig bool
	for i := uint64(0); i < n; i++ {
		k, err := r.text()
		if err != nil {
			return nil, err
		}
		switch k {
		case "tree":
			if haveTree {
				return nil, fmt.Errorf("%w: duplicate key %q", errCBOR, k)
			}
			t, err := r.tree(0)
			if err != nil {
				return nil, fmt.Errorf("certificate tree: %w", err)
			}
			c.Tree, haveTree = hashtree.NewHashTree(t), true
		case "signature":
			if haveSig {
				return nil, fmt.Errorf("%w: duplicate key %q", errCBOR, k)
			}
			if c.Signature, err = r.bytes(); err != nil {
				return nil, fmt.Errorf("certificate signature: %w", err)
			}
			haveSig = true
		case "delegation":
			if !allowDelegation {
				return nil, fmt.Errorf("%w: nested delegation", errCBOR)
			}
			if c.Delegation != nil {
				return nil, fmt.Errorf("%w: duplicate key %q", errCBOR, k)
			}
			d, err := r.delegation()
			if err != nil {
				return nil, fmt.Errorf("certificate delegation: %w", err)
			}
			c.Delegation = d
		default:
			return nil, fmt.Errorf("%w: unknown certificate key %q", errCBOR, k)
		}
	}
	if !haveTree || !haveSig {
		return nil, fmt.Errorf("%w: certificate without tree or signature", errCBOR)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (r *cborReader) delegation() (*certification.Delegation, error) {
	major, n, err := r.head()
	if err != nil {
		return nil, err
	}
	if major != 5 || n != 2 {
		return nil, fmt.Errorf("%w: delegation must be a map of 2 entries", errCBOR)
	}
	var d certification.Delegation
	var haveSubnet, haveCert bool
	for i := 0; i < 2; i++ {
		k, err := r.text()
		if err != nil {
			return nil, err
		}
		v, err := r.bytes()
		if err != nil {
			return nil, err
		}
		switch {
		case k == "subnet_id" && !haveSubnet:
			d.SubnetId, haveSubnet = principal.Principal{Raw: v}, true
		case k == "certificate" && !haveCert:
			c, err := parseCertificate(v, false)
			if err != nil {
				return nil, fmt.Errorf("delegation certificate: %w", err)
			}
			d.Certificate, haveCert = *c, true
		default:
			return nil, fmt.Errorf("%w: unexpected delegation key %q", errCBOR, k)
		}
	}
	return &d, nil
}
