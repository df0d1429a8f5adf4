// Package reason is the registry of the project's reason codes: every
// `E_*` code a verdict, a reject, the support API, the CLI or the
// TypeScript client can carry, with the statuses it comes with, what it
// means, and what a tool layer does about it.
//
// The codes are part of the wire contract: once published, a code never
// changes meaning. The package imports nothing of the project, so every
// package can name its codes through it. docs/reasons.md is generated from
// Registry (`go generate ./reason`), and the package's tests hold the
// registry and the code to each other: every `"E_…"` literal in non-test Go
// code and in clients/js/src is registered, and every registered code is
// used somewhere (or listed in Pending).
package reason

//go:generate go test -run TestReasonsDocIsGenerated -update .
