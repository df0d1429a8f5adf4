// Package icagent is the IC transport of the ledger clients, over agent-go:
// a Conn sends one ledger's queries (signed-query verification on or off)
// and replicated calls, read back through read_state, and verifies what it
// gets against the subnet's certificates (BLS signature under the root key,
// the delegation and its canister range, the age of /time). Every request
// ends by its envelope's ingress expiry, and a call is given up once it is
// past its expiry unexecuted; only a reject read from the certified state
// is Certified. Shared lets concurrent callers wait on one read without a
// lock held across the network. It parses
// certificates and hash trees strictly, since they come from a single node,
// reads tip and data certificates, and classifies agent-go's errors into
// icrc3 error kinds. CanisterExistence tells from the certified state
// whether a canister id exists and has code, taking absence only from a
// fresh certificate of the subnet responsible for the id. It knows no
// ledger's methods.
package icagent
