// Package queue carries intents and verdicts over NATS JetStream: an
// embedded server for single-process deployments (supervised: a JetStream
// store that failed is reopened by a restart), the two streams of the
// design, the shared intake consumer, verdict publishing and reading.
//
// It imports reconcile for its message types only; it knows nothing of the
// store or the matcher.
package queue
