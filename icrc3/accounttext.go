package icrc3

import (
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/aviate-labs/agent-go/principal"
)

// maxPrincipalLen is the longest principal the IC issues (29 bytes:
// self-authenticating ids); anything longer is not a principal.
const maxPrincipalLen = 29

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// ParsePrincipal parses the textual form of a principal and accepts only the
// canonical spelling (lower case, dashes every five characters, valid CRC).
// agent-go's decoder also accepts upper case and other groupings; refusing them
// keeps one identity per principal in stored intents and their hashes.
func ParsePrincipal(s string) (principal.Principal, error) {
	p, err := principal.Decode(s)
	if err != nil {
		return principal.Principal{}, fmt.Errorf("icrc3: principal %q: %w", s, err)
	}
	if len(p.Raw) > maxPrincipalLen {
		return principal.Principal{}, fmt.Errorf("icrc3: principal %q: %d bytes, at most %d", s, len(p.Raw), maxPrincipalLen)
	}
	if p.Encode() != s {
		return principal.Principal{}, fmt.Errorf("icrc3: principal %q is not in canonical form", s)
	}
	return p, nil
}

// ParseAccount parses the ICRC-1 textual encoding of an account:
// `principal` for the default subaccount, else
// `principal-checksum.subaccounthex` with the hex's leading zeros stripped.
// Only the canonical form is accepted: an explicit all-zero subaccount, a
// leading zero, upper case or a wrong checksum are refused, so that String
// reproduces the input exactly. The default subaccount is returned as nil.
func ParseAccount(s string) (Account, error) {
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		p, err := ParsePrincipal(s)
		if err != nil {
			return Account{}, fmt.Errorf("icrc3: account %q: %w", s, err)
		}
		return Account{Owner: p}, nil
	}
	head, subHex := s[:dot], s[dot+1:]
	if strings.IndexByte(subHex, '.') >= 0 {
		return Account{}, fmt.Errorf("icrc3: account %q: more than one '.'", s)
	}
	dash := strings.LastIndexByte(head, '-')
	if dash < 0 {
		return Account{}, fmt.Errorf("icrc3: account %q: no checksum before '.'", s)
	}
	ownerText, checksum := head[:dash], head[dash+1:]
	owner, err := ParsePrincipal(ownerText)
	if err != nil {
		return Account{}, fmt.Errorf("icrc3: account %q: %w", s, err)
	}
	sub, err := parseSubaccountHex(subHex)
	if err != nil {
		return Account{}, fmt.Errorf("icrc3: account %q: %w", s, err)
	}
	if want := accountChecksum(owner.Raw, sub); checksum != want {
		return Account{}, fmt.Errorf("icrc3: account %q: checksum %q, want %q", s, checksum, want)
	}
	return Account{Owner: owner, Subaccount: sub}, nil
}

// parseSubaccountHex decodes the stripped subaccount hex into 32 bytes. The
// empty string and a leading zero are refused: the first means the default
// subaccount, which has no suffix, and the second is not canonical.
func parseSubaccountHex(h string) ([]byte, error) {
	switch {
	case h == "":
		return nil, errors.New("empty subaccount")
	case h[0] == '0':
		return nil, errors.New("subaccount hex has a leading zero")
	case len(h) > 64:
		return nil, fmt.Errorf("subaccount hex has %d digits, at most 64", len(h))
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, fmt.Errorf("subaccount hex has %q at %d: only 0-9a-f", c, i)
		}
	}
	padded := strings.Repeat("0", 64-len(h)) + h
	sub, err := hex.DecodeString(padded)
	if err != nil {
		return nil, fmt.Errorf("subaccount hex: %w", err)
	}
	return sub, nil
}

func accountChecksum(owner, sub []byte) string {
	crc := crc32.NewIEEE()
	crc.Write(owner)
	crc.Write(sub)
	var cs [4]byte
	binary.BigEndian.PutUint32(cs[:], crc.Sum32())
	return strings.ToLower(b32.EncodeToString(cs[:]))
}

// String returns the canonical ICRC-1 textual form. An absent or all-zero
// subaccount both print as the bare principal, so two accounts that are Equal
// print the same. Subaccount is expected to be 32 bytes (every account a
// ledger accepts); other lengths are printed as held and will not parse back.
func (a Account) String() string {
	if a.IsDefaultSubaccount() {
		return a.Owner.Encode()
	}
	h := strings.TrimLeft(hex.EncodeToString(a.Subaccount), "0")
	return a.Owner.Encode() + "-" + accountChecksum(a.Owner.Raw, a.Subaccount) + "." + h
}
