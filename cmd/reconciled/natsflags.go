package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/reconciled/reconciled/queue"
)

// natsFlags adds the connection flags of the commands that talk to NATS
// directly; the returned function checks them once fs is parsed and builds
// the connection's configuration.
func natsFlags(fs *flag.FlagSet, name string) func() (queue.ConnConfig, error) {
	natsURL := fs.String("nats-url", os.Getenv(envName("nats-url")), "NATS server URL (env RECONCILED_NATS_URL)")
	prefix := fs.String("subject-prefix", "reconcile", "first token of every subject")
	creds := fs.String("nats-creds", "", "NATS credentials file")
	token := fs.String("nats-token", "", "NATS token")
	tokenFile := fs.String("nats-token-file", "", "file holding the NATS token")
	return func() (queue.ConnConfig, error) {
		if *natsURL == "" {
			return queue.ConnConfig{}, fmt.Errorf("%w: --nats-url is required", errUsage)
		}
		if *token != "" && *tokenFile != "" {
			return queue.ConnConfig{}, fmt.Errorf("%w: give --nats-token or --nats-token-file, not both", errUsage)
		}
		return queue.ConnConfig{URL: *natsURL, Prefix: *prefix, CredsFile: *creds, Token: *token, TokenFile: *tokenFile, Name: name}, nil
	}
}
