// Package testutil is what tests across the project share that belongs to
// no package under test: polling for a state nothing announces
// (Eventually) and the process's CPU time for benchmarks on a shared
// machine (CPUTime). Tests only: production code must not import it
// (internal/deptest).
package testutil
