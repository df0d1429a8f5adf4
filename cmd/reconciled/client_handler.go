package main

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/reconciled/reconciled/store"
	"github.com/reconciled/reconciled/support"
)

// The daemon serves the same API the get, list and watch commands read.
func init() {
	supportHandler = func(st *store.Store, token string, log *zap.Logger) http.Handler {
		return support.NewHandler(support.Config{Store: st, Token: []byte(token), Logger: log})
	}
}
