package icrc3

import (
	"fmt"

	"github.com/aviate-labs/agent-go/principal"
)

// BlockError reports a block that cannot be read: a known block type with a
// malformed or missing field, or a malformed field every block relies on
// (phash, ts). The matcher must treat it as unreadable, never as absent.
type BlockError struct {
	Index  uint64
	Field  string // e.g. "tx.amt"
	Reason string
}

func (e *BlockError) Error() string {
	return fmt.Sprintf("icrc3: block %d: %s: %s", e.Index, e.Field, e.Reason)
}

// blockParts holds everything a Block points to, so a parsed block costs one
// allocation instead of one per optional field.
type blockParts struct {
	phash              Hash
	from, to           Account
	amt, fee, blockFee Nat
	createdAt          uint64
	// The fields only approvals and transfers from an allowance have: kept
	// apart, they do not cost every block of a page their room.
	more *moreParts
}

type moreParts struct {
	spender   Account
	ea        Nat
	expiresAt uint64
}

// extra returns p's moreParts, carved from s (nil: allocated).
func (p *blockParts) extra(s *moreSlab) *moreParts {
	if p.more != nil {
		return p.more
	}
	if s == nil {
		p.more = new(moreParts)
		return p.more
	}
	if s.used == len(s.parts) {
		s.parts, s.used = make([]moreParts, 64), 0
	}
	s.used++
	p.more = &s.parts[s.used-1]
	return p.more
}

type moreSlab struct {
	parts []moreParts
	used  int
}

// ParseBlock reads the typed fields of block index from its Value; h is the
// Value's hash (decoders compute it while reading). The kind comes from
// `btype` when present, else from `tx.op`. Any other type is BlockUnknown,
// returned without error so the chain can still be verified through it.
//
// Parsing is strict: a known block whose field has the wrong shape, or lacks
// a required field, or repeats a key, is an error and never a guess. Extra
// keys are allowed. phash and ts are checked on every block, since chain
// verification and time windows rely on them; on a BlockUnknown without ts,
// TS is 0. The block's Raw is MarshalValue(v); ParseRawBlock parses an
// encoding without the tree.
func ParseBlock(index uint64, v Value, h Hash) (Block, error) {
	b, err := parseTree(index, v, h)
	if err != nil {
		return Block{}, err
	}
	b.Raw = MarshalValue(v)
	return b, nil
}

// parseTree is ParseBlock but for Raw.
func parseTree(index uint64, v Value, h Hash) (Block, error) {
	bad := func(field, format string, args ...any) (Block, error) {
		return Block{}, &BlockError{Index: index, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if v.Kind != KindMap {
		return bad("block", "is a %s, not a Map", v.Kind)
	}
	var phash, btype, ts, fee, tx *Value
	for i := range v.Map {
		f := &v.Map[i]
		var slot **Value
		switch f.Key {
		case "phash":
			slot = &phash
		case "btype":
			slot = &btype
		case "ts":
			slot = &ts
		case "fee":
			slot = &fee
		case "tx":
			slot = &tx
		default:
			continue
		}
		if *slot != nil {
			return bad(f.Key, "duplicate key")
		}
		*slot = &f.Value
	}

	b := Block{Index: index, Hash: h}
	p := new(blockParts)
	if phash != nil {
		if phash.Kind != KindBlob || len(phash.Bytes) != 32 {
			return bad("phash", "want a 32-byte Blob, got %s", describe(*phash))
		}
		copy(p.phash[:], phash.Bytes)
		b.PHash = &p.phash
	}
	if ts != nil {
		t, err := natU64(*ts)
		if err != nil {
			return bad("ts", "%v", err)
		}
		b.TS = t
	}
	if btype != nil {
		if btype.Kind != KindText {
			return bad("btype", "want Text, got %s", describe(*btype))
		}
		b.BType = btype.Text()
	}
	var op *Value
	if tx != nil {
		if tx.Kind != KindMap {
			if btype == nil {
				return bad("tx", "want Map, got %s", describe(*tx))
			}
		} else {
			// The kind depends on tx.op and tx.spender: a repeated one would
			// make the kind a guess, whatever the block turns out to be.
			for _, k := range []string{"op", "spender"} {
				if countKey(tx.Map, k) > 1 {
					return bad("tx."+k, "duplicate key")
				}
			}
			if o, ok := tx.Get("op"); ok {
				if o.Kind != KindText {
					return bad("tx.op", "want Text, got %s", describe(o))
				}
				b.Op = o.Text()
				op = &o
			}
		}
	}

	switch {
	case btype != nil:
		switch b.BType {
		case string(BlockTransfer), string(BlockTransferFrom), string(BlockMint), string(BlockBurn), string(BlockApprove):
			b.Kind = BlockKind(b.BType)
		}
	case op != nil:
		switch b.Op {
		case "xfer":
			b.Kind = BlockTransfer
			if _, ok := tx.Get("spender"); ok {
				b.Kind = BlockTransferFrom
			}
		case "mint":
			b.Kind = BlockMint
		case "burn":
			b.Kind = BlockBurn
		case "approve":
			b.Kind = BlockApprove
		}
	}
	if b.Kind == BlockUnknown {
		return b, nil
	}

	if k, dup := duplicateKey(v.Map); dup {
		return bad(k, "duplicate key")
	}
	if tx != nil && tx.Kind == KindMap {
		if k, dup := duplicateKey(tx.Map); dup {
			return bad("tx."+k, "duplicate key")
		}
	}
	if ts == nil {
		return bad("ts", "missing")
	}
	if fee != nil {
		n, err := natOf(*fee)
		if err != nil {
			return bad("fee", "%v", err)
		}
		p.blockFee = n
		b.BlockFee = &p.blockFee
	}
	if tx == nil {
		return bad("tx", "missing")
	}
	if tx.Kind != KindMap {
		return bad("tx", "want Map, got %s", describe(*tx))
	}
	for i := range tx.Map {
		f := &tx.Map[i]
		var err error
		switch f.Key {
		case "from":
			err = parseAccount(f.Value, &p.from)
			b.From = &p.from
		case "to":
			err = parseAccount(f.Value, &p.to)
			b.To = &p.to
		case "spender":
			m := p.extra(nil)
			err = parseAccount(f.Value, &m.spender)
			b.Spender = &m.spender
		case "amt":
			p.amt, err = natOf(f.Value)
			b.Amount = &p.amt
		case "fee":
			p.fee, err = natOf(f.Value)
			b.Fee = &p.fee
		case "expected_allowance":
			m := p.extra(nil)
			m.ea, err = natOf(f.Value)
			b.ExpectedAllowance = &m.ea
		case "memo":
			if f.Value.Kind != KindBlob {
				err = fmt.Errorf("want Blob, got %s", describe(f.Value))
			}
			b.Memo, b.HasMemo = f.Value.Bytes, true
		case "ts":
			p.createdAt, err = natU64(f.Value)
			b.CreatedAt = &p.createdAt
		case "expires_at":
			m := p.extra(nil)
			m.expiresAt, err = natU64(f.Value)
			b.ExpiresAt = &m.expiresAt
		}
		if err != nil {
			return bad("tx."+f.Key, "%v", err)
		}
	}
	if b.Amount == nil {
		return bad("tx.amt", "missing")
	}
	var required []string
	switch b.Kind {
	case BlockTransfer, BlockTransferFrom:
		required = []string{"from", "to"}
	case BlockMint:
		required = []string{"to"}
	case BlockBurn:
		required = []string{"from"}
	case BlockApprove:
		required = []string{"from", "spender"}
	}
	for _, k := range required {
		if _, ok := tx.Get(k); !ok {
			return bad("tx."+k, "missing")
		}
	}
	return b, nil
}

// parseAccount reads Array[Blob owner] or Array[Blob owner, Blob subaccount].
func parseAccount(v Value, a *Account) error {
	if v.Kind != KindArray || len(v.Array) < 1 || len(v.Array) > 2 {
		return fmt.Errorf("want an account (Array of 1 or 2 Blobs), got %s", describe(v))
	}
	owner := v.Array[0]
	if owner.Kind != KindBlob {
		return fmt.Errorf("account owner: want Blob, got %s", describe(owner))
	}
	if len(owner.Bytes) > 29 {
		return fmt.Errorf("account owner of %d bytes exceeds 29", len(owner.Bytes))
	}
	a.Owner = principal.Principal{Raw: owner.Bytes}
	a.Subaccount = nil
	if len(v.Array) == 2 {
		sub := v.Array[1]
		if sub.Kind != KindBlob || len(sub.Bytes) != 32 {
			return fmt.Errorf("account subaccount: want a 32-byte Blob, got %s", describe(sub))
		}
		a.Subaccount = sub.Bytes
	}
	return nil
}

func natOf(v Value) (Nat, error) {
	if v.Kind != KindNat {
		return Nat{}, fmt.Errorf("want Nat, got %s", describe(v))
	}
	return v.Nat, nil
}

func natU64(v Value) (uint64, error) {
	n, err := natOf(v)
	if err != nil {
		return 0, err
	}
	u, ok := n.Uint64()
	if !ok {
		return 0, fmt.Errorf("Nat %s does not fit in 64 bits", n)
	}
	return u, nil
}

// describe names a value's shape for error messages without dumping it.
func describe(v Value) string {
	switch v.Kind {
	case KindBlob:
		return fmt.Sprintf("Blob of %d bytes", len(v.Bytes))
	case KindArray:
		return fmt.Sprintf("Array of %d", len(v.Array))
	case KindMap:
		return fmt.Sprintf("Map of %d", len(v.Map))
	}
	return v.Kind.String()
}

func duplicateKey(fs []Field) (string, bool) {
	if len(fs) <= 16 {
		for i := 1; i < len(fs); i++ {
			for j := 0; j < i; j++ {
				if fs[i].Key == fs[j].Key {
					return fs[i].Key, true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(fs))
	for i := range fs {
		if _, ok := seen[fs[i].Key]; ok {
			return fs[i].Key, true
		}
		seen[fs[i].Key] = struct{}{}
	}
	return "", false
}

func countKey(fs []Field, key string) int {
	n := 0
	for i := range fs {
		if fs[i].Key == key {
			n++
		}
	}
	return n
}
