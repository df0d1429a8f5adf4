// Package queue carries intents and verdicts over NATS JetStream: an
// embedded server for single-process deployments (supervised: a JetStream
// store that failed is reopened by a restart), the two streams of the
// design, the shared intake consumer, verdict publishing and reading.
//
// It speaks the project's vocabulary (package reconciled) and knows nothing
// of the engine, the store or the matcher: what it needs of them (an
// intent's hash) its callers pass in.
package queue
