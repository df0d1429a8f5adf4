package icrc3history

import (
	"context"

	"github.com/reconciled/reconciled/icrc3"
)

// What the ICP ledger's history family takes from an ICRC client: the
// ICP ledger serves ICRC-1's minting account, and its pages are read as
// concurrently as ICRC pages.

// MintingAccount reads icrc1_minting_account as Detect does (a replicated
// call whose certificate is verified, falling back to a signed query whose
// answer is then uncertain: certified false).
func (c *Client) MintingAccount(ctx context.Context) (acc *icrc3.Account, certified bool, err error) {
	var f icrc3.Features
	if err := c.readMinting(ctx, &f); err != nil {
		return nil, false, err
	}
	return f.MintingAccount, f.MintingCertified, nil
}

// Concurrency bounds the requests in flight.
func (c *Client) Concurrency() int { return c.conc }
