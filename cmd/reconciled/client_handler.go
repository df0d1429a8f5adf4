package main

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled/store"
	"github.com/reconciled/reconciled/support"
)

// newSupportHandler builds the support API and page over st. ledgers names
// each ledger's decimals and symbol; nil shows amounts in raw units.
// blockURL and accountURL are the explorer link templates ("" for none).
func newSupportHandler(st *store.Store, token string, ledgers func(string) (uint8, string, bool), log *zap.Logger,
	blockURL, accountURL string) http.Handler {
	return support.NewHandler(support.Config{Store: st, Token: []byte(token), Ledgers: ledgers, Logger: log,
		ExplorerBlockURL: blockURL, ExplorerAccountURL: accountURL})
}
