// Package group runs the work of concurrent callers in groups, each group
// by one of its callers: a SQLite transaction for many verdict writes (one
// fsync), a JetStream atomic batch for many verdicts (one fsync on the
// server). Nobody waits for a group to fill: a caller that finds no group
// running runs one at once, of itself and whatever else is queued, and the
// callers that queue meanwhile form the next group.
package group
