// Package testtool is what the project's tests that drive outside programs
// (node, npm, Chromium) share: one rule for a missing program — a failure
// under CI=true, where the CI script installs everything, and a skip with the
// reason elsewhere — the check that a committed npm lockfile pins every
// package exactly and names no registry, and installing such a lockfile.
package testtool
