// Package daemontest runs daemons for tests: a test replica of the IC
// (ledgertest), an embedded NATS server with JetStream, the tool
// layer's connection, and daemons wired exactly as `reconciled serve`
// wires them, all on loopback and temp dirs, stopped when the test ends.
//
//	r := daemontest.New(t, daemontest.Options{})
//	r.Publish(ledger, id, body)
//	v := r.Wait(id, func(v reconciled.Verdict) bool { return v.Final })
package daemontest
