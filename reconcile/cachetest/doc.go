// Package cachetest holds reference answers of reconcile.BlockCache's
// queries, written as plainly as the contract reads, for the tests of its
// implementations (the store, the chain's reads of pages not yet cached)
// to check against.
package cachetest
