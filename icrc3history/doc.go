// Package icrc3history is the ICRC ledger family's history behind the
// engine's History: a Client detects what a ledger serves, reads the
// certified tip (icrc3_get_tip_certificate or get_data_certificate), and
// pages through icrc3_get_blocks or legacy get_blocks, following the
// ledger's archives, with bounded concurrency. Queries and certificate
// checks are an icagent.Conn's; the blocks it returns are icrc3's, to be
// verified by an icrc3.Verifier against the certified tip.
package icrc3history
