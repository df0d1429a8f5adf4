package support

import (
	"encoding/hex"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/reconciled/reconciled/icp"
	"github.com/reconciled/reconciled/icrc3"
	"github.com/reconciled/reconciled/matcher"
)

// Memo is a memo in hex and, when its bytes are printable UTF-8 text, as
// that text.
type Memo struct {
	Hex  string `json:"hex"`
	Text string `json:"text,omitempty"`
}

// AccountView is an account in ICRC-1 text (what search takes) with the ICP
// ledger's account identifier of it.
type AccountView struct {
	Role string `json:"role"`
	Text string `json:"text"`
	// ICPAccountID is the 64-hex account identifier the ICP ledger and its
	// explorers show.
	ICPAccountID string `json:"icp_account_id"`
	URL          string `json:"url,omitempty"`
}

// payment is what a customer knows of an intent, read from its body.
type payment struct {
	from, to, spender string
	accounts          []AccountView
	amount            *Amount
	memo              *Memo
	stamp             *time.Time
}

func memoView(b []byte) *Memo {
	m := &Memo{Hex: hex.EncodeToString(b)}
	if printable(b) {
		m.Text = string(b)
	}
	return m
}

// printable: valid UTF-8 without control characters, so that showing it as
// text cannot hide or reorder what is there.
func printable(b []byte) bool {
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return false
		}
	}
	return true
}

func accountView(role string, a icrc3.Account) AccountView {
	v := AccountView{Role: role, Text: a.String()}
	if id, err := icp.AccountIDOf(a); err == nil {
		v.ICPAccountID = id.String()
	}
	return v
}

// paymentOf reads a body the matcher accepts; a refused body yields only
// its amount, read loosely by amount().
func (h *handler) paymentOf(canister string, body []byte) payment {
	var p payment
	in, err := matcher.ParseIntent(body)
	if err != nil {
		p.amount = h.amountOf(canister, body)
		return p
	}
	caller := in.CallerAccount()
	switch in.Method {
	case matcher.MethodTransferFrom:
		p.from = in.Args.From.String()
		p.accounts = append(p.accounts, accountView("from", *in.Args.From), accountView("spender (caller)", caller))
	default:
		p.from = caller.String()
		p.accounts = append(p.accounts, accountView("from", caller))
	}
	if in.Args.To != nil {
		p.to = in.Args.To.String()
		p.accounts = append(p.accounts, accountView("to", *in.Args.To))
	}
	if in.Args.Spender != nil {
		p.spender = in.Args.Spender.String()
		p.accounts = append(p.accounts, accountView("spender", *in.Args.Spender))
	}
	p.amount = h.units(canister, in.Args.Amount.String())
	if in.Args.HasMemo {
		p.memo = memoView(in.Args.Memo)
	}
	p.stamp = LedgerTime(in.Stamp())
	return p
}

// units shows raw units in tokens when the ledger is known.
func (h *handler) units(canister, units string) *Amount {
	if units == "" || strings.Trim(units, "0123456789") != "" {
		return nil
	}
	a := &Amount{Units: units, Display: units + " units"}
	if l := h.ledger(canister); l != nil {
		a.Display = FormatAmount(units, l.Decimals, l.Symbol)
	}
	return a
}

// ParseTokens reads a decimal amount in tokens ("40.25") as raw units of a
// ledger with the given decimals; ok is false when it is not a decimal or
// has more fractional digits than the ledger has.
func ParseTokens(s string, decimals uint8) (string, bool) {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || strings.Trim(whole+frac, "0123456789") != "" || strings.Contains(frac, ".") {
		return "", false
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > int(decimals) {
		return "", false
	}
	u := strings.TrimLeft(whole+frac+strings.Repeat("0", int(decimals)-len(frac)), "0")
	if u == "" {
		u = "0"
	}
	return u, true
}
