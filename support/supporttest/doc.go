// Package supporttest seeds a store with intents and verdicts of every
// status, for tests of the support API, page and CLI.
package supporttest
