// Package deptest fences the layering of the project's packages: its test
// lists what each package compiles and fails when a package reaches one it
// must not (docs/layout.md). It has no code of its own.
package deptest
