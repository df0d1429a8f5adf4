package reason

// Code is a reason code as it appears on the wire: `reason.code` of a
// verdict, the code of a reject, `error.code` of a support API answer.
type Code string

// Where a code can appear. A code may appear in several places; its
// meaning is the same in each.
const (
	Invalid    = "invalid"    // a final `invalid` verdict: the intent itself is wrong
	Unreadable = "unreadable" // an `unreadable` verdict, not final: the daemon retries
	Reject     = "reject"     // a message on reconcile.rejects.<intent_id>: no verdict
	API        = "api"        // an error answer of the support API (HTTP field gives the status)
	CLI        = "cli"        // an error the reconciled CLI reports of its own
	Client     = "client"     // an error the TypeScript client (clients/js) raises of its own
)

// Entry is one registered code.
type Entry struct {
	Code Code
	// Where lists the places the code appears (Invalid, Unreadable, Reject,
	// API, CLI, Client).
	Where []string
	// HTTP is the support API's status for the code when Where holds API.
	HTTP int
	// Meaning says what happened, in words a support person can read out.
	Meaning string
	// Action says what a tool layer (or, for API and CLI codes, the caller)
	// does about it: pay again, wait, fix the intent, fix the request.
	Action string
}

// Verdict and reject codes.
const (
	ArchiveUnreachable Code = "E_ARCHIVE_UNREACHABLE"
	ArgsMismatch       Code = "E_ARGS_MISMATCH"
	BadAccount         Code = "E_BAD_ACCOUNT"
	BadAfter           Code = "E_BAD_AFTER"
	BadAllowance       Code = "E_BAD_ALLOWANCE"
	BadAmount          Code = "E_BAD_AMOUNT"
	BadArgHex          Code = "E_BAD_ARG_HEX"
	BadArgs            Code = "E_BAD_ARGS"
	BadCaller          Code = "E_BAD_CALLER"
	BadCanister        Code = "E_BAD_CANISTER"
	BadExpiresAt       Code = "E_BAD_EXPIRES_AT"
	BadExpiry          Code = "E_BAD_EXPIRY"
	BadFee             Code = "E_BAD_FEE"
	BadIntentID        Code = "E_BAD_INTENT_ID"
	BadJSON            Code = "E_BAD_JSON"
	BadMemo            Code = "E_BAD_MEMO"
	BadMethod          Code = "E_BAD_METHOD"
	BadStamp           Code = "E_BAD_STAMP"
	BadSubaccount      Code = "E_BAD_SUBACCOUNT"
	Certificate        Code = "E_CERTIFICATE"
	Chain              Code = "E_CHAIN"
	Decode             Code = "E_DECODE"
	HistoryChanged     Code = "E_HISTORY_CHANGED"
	IntentConflict     Code = "E_INTENT_CONFLICT"
	Internal           Code = "E_INTERNAL"
	Lagging            Code = "E_LAGGING"
	LedgerConfig       Code = "E_LEDGER_CONFIG"
	MintingConflict    Code = "E_MINTING_CONFLICT"
	MintingUncertain   Code = "E_MINTING_UNCERTAIN"
	NoMintingAccount   Code = "E_NO_MINTING_ACCOUNT"
	NoStamp            Code = "E_NO_STAMP"
	NoSuchCanister     Code = "E_NO_SUCH_CANISTER"
	NotALedger         Code = "E_NOT_A_LEDGER"
	RejectCode         Code = "E_REJECT"
	StaleCertificate   Code = "E_STALE_CERTIFICATE"
	SubjectMismatch    Code = "E_SUBJECT_MISMATCH"
	Timeout            Code = "E_TIMEOUT"
	TooLarge           Code = "E_TOO_LARGE"
	Transport          Code = "E_TRANSPORT"
	Uncertified        Code = "E_UNCERTIFIED"
	Unknown            Code = "E_UNKNOWN"
	UnconfiguredWait   Code = "E_UNCONFIGURED_WAIT"
	UnknownCanister    Code = "E_UNKNOWN_CANISTER"
	UnknownField       Code = "E_UNKNOWN_FIELD"
	UnknownLedger      Code = "E_UNKNOWN_LEDGER"
	Unsupported        Code = "E_UNSUPPORTED"
)

// Support API, CLI and client codes.
const (
	BadCursor         Code = "E_BAD_CURSOR"
	BadFormat         Code = "E_BAD_FORMAT"
	BadLimit          Code = "E_BAD_LIMIT"
	BadOpen           Code = "E_BAD_OPEN"
	BadOrder          Code = "E_BAD_ORDER"
	BadQuery          Code = "E_BAD_QUERY"
	BadRequest        Code = "E_BAD_REQUEST"
	BadSince          Code = "E_BAD_SINCE"
	BadSort           Code = "E_BAD_SORT"
	BadStatus         Code = "E_BAD_STATUS"
	BadTime           Code = "E_BAD_TIME"
	BadVerdict        Code = "E_BAD_VERDICT"
	HTTP              Code = "E_HTTP"
	InvalidVerdict    Code = "E_INVALID"
	Method            Code = "E_METHOD"
	NoRoute           Code = "E_NO_ROUTE"
	NoTokenConfigured Code = "E_NO_TOKEN_CONFIGURED"
	NotFound          Code = "E_NOT_FOUND"
	RepeatedParam     Code = "E_REPEATED_PARAM"
	TokenMissing      Code = "E_TOKEN_MISSING"
	TokenWrong        Code = "E_TOKEN_WRONG"
	UnknownParam      Code = "E_UNKNOWN_PARAM"
)

// Pending lists registered codes that no code publishes yet: they are part
// of the contract being added, and the test that every registered code is
// used allows exactly these.
var Pending = map[Code]bool{}

const (
	fixIntent  = "Fix the intent and publish it under a new `intent_id`. Nothing was checked: do not pay again on this answer; settle the original call with a corrected intent."
	waitRetry  = "Wait: the daemon retries with backoff and publishes a later verdict itself. Never treat it as `absent`; do not pay again."
	fixRequest = "Fix the request; nothing about any payment is said."
)

// Registry is every reason code (docs/reasons.md lists them sorted).
var Registry = []Entry{
	{Code: ArchiveUnreachable, Where: []string{Unreadable},
		Meaning: "An archive canister holding part of the window's blocks could not be read.",
		Action:  waitRetry},
	{Code: ArgsMismatch, Where: []string{Invalid},
		Meaning: "`arg_hex` does not decode to the call `args` describe: the intent does not say which call was sent.",
		Action:  fixIntent},
	{Code: BadAccount, Where: []string{Invalid, API}, HTTP: 400,
		Meaning: "An account is not in ICRC-1 textual form (in an intent's `args`, or a support API filter).",
		Action:  fixIntent + " From the support API: fix the filter."},
	{Code: BadAfter, Where: []string{Invalid},
		Meaning: "`after` is present and not a string.",
		Action:  fixIntent},
	{Code: BadAllowance, Where: []string{Invalid},
		Meaning: "`expected_allowance` of an `icrc2_approve` is not a decimal nat.",
		Action:  fixIntent},
	{Code: BadAmount, Where: []string{Invalid},
		Meaning: "`amount` is not a decimal nat.",
		Action:  fixIntent},
	{Code: BadArgHex, Where: []string{Invalid},
		Meaning: "`arg_hex` is not lower-case hex of a Candid message of the method's argument type.",
		Action:  fixIntent},
	{Code: BadArgs, Where: []string{Invalid},
		Meaning: "`args` is missing, not an object, or lacks a field the method requires.",
		Action:  fixIntent},
	{Code: BadCaller, Where: []string{Invalid},
		Meaning: "`caller` is not a principal in textual form.",
		Action:  fixIntent},
	{Code: BadCanister, Where: []string{Invalid, API}, HTTP: 400,
		Meaning: "`canister_id` (or the support API's `canister` filter) is not a principal in textual form.",
		Action:  fixIntent + " From the support API: fix the filter."},
	{Code: BadCursor, Where: []string{API}, HTTP: 400,
		Meaning: "The support API's `cursor` is not one it handed out for this listing.",
		Action:  fixRequest + " Start the listing again without `cursor`."},
	{Code: BadExpiresAt, Where: []string{Invalid},
		Meaning: "`expires_at` of an `icrc2_approve` is not a decimal nat64.",
		Action:  fixIntent},
	{Code: BadExpiry, Where: []string{Invalid},
		Meaning: "`ingress_expiry` is 0 or earlier than `created_at_time` minus the ledger's drift: no envelope expiring then can have executed the call, and as the window's end it would turn into a wrong `absent`.",
		Action:  fixIntent + " Give the latest expiry of every envelope sent with these bytes, or leave it out."},
	{Code: BadFee, Where: []string{Invalid},
		Meaning: "`fee` is not a decimal nat.",
		Action:  fixIntent},
	{Code: BadFormat, Where: []string{API}, HTTP: 400,
		Meaning: "The support API's export `format` is neither `csv` nor `json`.",
		Action:  fixRequest},
	{Code: BadIntentID, Where: []string{Invalid, API}, HTTP: 400,
		Meaning: "`intent_id` is not `[A-Za-z0-9_-]{1,128}`.",
		Action:  fixIntent + " From the support API: fix the id asked for."},
	{Code: BadJSON, Where: []string{Invalid},
		Meaning: "The intent is not one JSON object in UTF-8 (syntax, a duplicate key, trailing data).",
		Action:  fixIntent},
	{Code: BadLimit, Where: []string{API}, HTTP: 400,
		Meaning: "The support API's `limit` is not an integer in 1..1000.",
		Action:  fixRequest},
	{Code: BadMemo, Where: []string{Invalid},
		Meaning: "`memo` is not lower-case hex of at most the ledger's memo length.",
		Action:  fixIntent},
	{Code: BadMethod, Where: []string{Invalid},
		Meaning: "`method` is not `icrc1_transfer`, `icrc2_transfer_from` or `icrc2_approve`.",
		Action:  fixIntent},
	{Code: BadOpen, Where: []string{API}, HTTP: 400,
		Meaning: "The support API's `open` is not a boolean.",
		Action:  fixRequest},
	{Code: BadOrder, Where: []string{API}, HTTP: 400,
		Meaning: "The support API's `order` is neither `asc` nor `desc`.",
		Action:  fixRequest},
	{Code: BadQuery, Where: []string{API}, HTTP: 400,
		Meaning: "The support API's query string is malformed, or the search `q` is empty or cannot be read as anything it searches by (intent id, account, amount, memo, block index).",
		Action:  fixRequest},
	{Code: BadRequest, Where: []string{API}, HTTP: 400,
		Meaning: "Any other bad input to the support API.",
		Action:  fixRequest},
	{Code: BadSince, Where: []string{API}, HTTP: 400,
		Meaning: "The support API's `since` is neither an RFC 3339 time nor a duration.",
		Action:  fixRequest},
	{Code: BadSort, Where: []string{API}, HTTP: 400,
		Meaning: "The support API's `sort` names no sortable column.",
		Action:  fixRequest},
	{Code: BadStamp, Where: []string{Invalid},
		Meaning: "`created_at_time` is not a decimal nat64.",
		Action:  fixIntent},
	{Code: BadStatus, Where: []string{API}, HTTP: 400,
		Meaning: "The support API's `status` names no status.",
		Action:  fixRequest},
	{Code: BadSubaccount, Where: []string{Invalid},
		Meaning: "A subaccount is not 32 bytes of lower-case hex.",
		Action:  fixIntent},
	{Code: BadTime, Where: []string{API}, HTTP: 400,
		Meaning: "A time parameter of the support API (`until`, `from`, `to`) is not an RFC 3339 time.",
		Action:  fixRequest},
	{Code: BadVerdict, Where: []string{Client},
		Meaning: "The TypeScript client received a verdict that breaks the contract (a `found` without a block, a final verdict of a non-final status).",
		Action:  "Treat the intent as unsettled (do not pay again) and report it: a daemon or something on the subject is misbehaving."},
	{Code: Certificate, Where: []string{Unreadable},
		Meaning: "A certificate did not verify (BLS signature, root key, delegation, canister range), or its certified data does not match the tree.",
		Action:  waitRetry},
	{Code: Chain, Where: []string{Unreadable},
		Meaning: "The blocks do not form the hash chain the certified tip names: a block is missing or a replica altered one.",
		Action:  waitRetry},
	{Code: Decode, Where: []string{Unreadable},
		Meaning: "A reply or a block could not be decoded.",
		Action:  waitRetry},
	{Code: HTTP, Where: []string{CLI},
		Meaning: "The reconciled CLI got an HTTP error from the server that is not a support API error (a proxy's page, a wrong URL).",
		Action:  "Check `--server` and what stands between the CLI and the daemon."},
	{Code: HistoryChanged, Where: []string{Unreadable},
		Meaning: "The ledger's certified state contradicts the chain the daemon had verified (the canister was reinstalled, a test replica was reset), and the cached chain could not yet be discarded.",
		Action:  waitRetry + " Verdicts already final stay as published."},
	{Code: IntentConflict, Where: []string{Reject, Client},
		Meaning: "This `intent_id` already belongs to another body; the intent was refused and nothing changed.",
		Action:  "Choose a new `intent_id` and publish again. Verdicts on the subject with another `intent_hash` answer the other body, not yours."},
	{Code: Internal, Where: []string{Unreadable, API}, HTTP: 500,
		Meaning: "A failure the daemon has no more precise code for (in a verdict: it is still unreadable and retried; in the support API: details in the server's log).",
		Action:  waitRetry},
	{Code: InvalidVerdict, Where: []string{Client},
		Meaning: "The TypeScript client's error for an `invalid` verdict that carries no reason code.",
		Action:  fixIntent},
	{Code: Lagging, Where: []string{Unreadable},
		Meaning: "A replica answered from a state older than one already seen.",
		Action:  waitRetry},
	{Code: LedgerConfig, Where: []string{Unreadable},
		Meaning: "The ledger's configured window (`tw`, `drift`) is narrower than the ledger family's own, without `allow_narrow_window`: it could close windows early.",
		Action:  waitRetry + " The operator fixes the ledger's configuration."},
	{Code: Method, Where: []string{API}, HTTP: 405,
		Meaning: "The support API takes only GET and HEAD.",
		Action:  fixRequest},
	{Code: MintingConflict, Where: []string{Unreadable},
		Meaning: "The ledger's configured `minting=` contradicts the minting account the ledger certifies.",
		Action:  waitRetry + " The operator fixes or removes `minting=`."},
	{Code: MintingUncertain, Where: []string{Unreadable},
		Meaning: "A block matches the intent in every field but its kind (transfer, mint or burn), which the minting account decides, and that account could not be read with a certified call.",
		Action:  waitRetry + " The operator can configure `minting=` for the ledger to settle it at once."},
	{Code: NoMintingAccount, Where: []string{Unreadable},
		Meaning: "A mint or burn with the intent's stamp exists and the ledger has no minting account the daemon could use.",
		Action:  waitRetry + " The operator configures `minting=`."},
	{Code: NoRoute, Where: []string{API}, HTTP: 404,
		Meaning: "No such support API endpoint.",
		Action:  fixRequest},
	{Code: NoStamp, Where: []string{Invalid},
		Meaning: "The intent has no `created_at_time`: the ledger cannot deduplicate such a call and nothing identifies its block.",
		Action:  fixIntent + " A call sent without a stamp cannot be settled by reconciled."},
	{Code: NoSuchCanister, Where: []string{Invalid},
		Meaning: "Final: the IC certifies that no canister with the intent's `canister_id` exists, so the payment cannot have happened there.",
		Action:  "Check the ledger id; publish the intent under a new `intent_id` with the right one."},
	{Code: NotALedger, Where: []string{Invalid},
		Meaning: "Final: the IC certifies that the canister exists but has no code installed, so no transfer can have executed there and its history cannot be read.",
		Action:  "Check the ledger id; publish the intent under a new `intent_id` with the right one."},
	{Code: NoTokenConfigured, Where: []string{API}, HTTP: 503,
		Meaning: "The daemon runs without a support token, so the support API stays closed.",
		Action:  "The operator sets `--support-token-file` (or `--support-token`)."},
	{Code: NotFound, Where: []string{API}, HTTP: 404,
		Meaning: "No intent with that id is in this store.",
		Action:  "Check the id; a just-published intent may not have reached this instance's store yet."},
	{Code: RejectCode, Where: []string{Unreadable},
		Meaning: "The IC rejected a read (the canister stopped, out of cycles, a subnet refusal). A reject never says a call did not execute.",
		Action:  waitRetry},
	{Code: RepeatedParam, Where: []string{API}, HTTP: 400,
		Meaning: "A support API parameter was given twice.",
		Action:  fixRequest},
	{Code: StaleCertificate, Where: []string{Unreadable},
		Meaning: "A certificate's `/time` is older than the allowed age.",
		Action:  waitRetry},
	{Code: SubjectMismatch, Where: []string{Invalid},
		Meaning: "Final: the intake subject names another canister than the intent's `canister_id`.",
		Action:  "Fix the publishing: publish on `reconcile.intents.<canister_id>` of the intent's own canister, under a new `intent_id`."},
	{Code: Timeout, Where: []string{Unreadable, Client},
		Meaning: "A read did not finish within its deadline (in the client: no final verdict within the time it was given).",
		Action:  waitRetry + " The client's caller asks again later; the daemon keeps watching."},
	{Code: TokenMissing, Where: []string{API}, HTTP: 401,
		Meaning: "The support API call carried no bearer token.",
		Action:  fixRequest + " Send `Authorization: Bearer <token>`."},
	{Code: TokenWrong, Where: []string{API}, HTTP: 401,
		Meaning: "The support API call's bearer token is not the configured one.",
		Action:  fixRequest + " Use the current token."},
	{Code: TooLarge, Where: []string{Reject, Invalid, Client},
		Meaning: "The intent is larger than 32,768 bytes (or `--max-message-bytes`).",
		Action:  "Fix the intent (shorter `after`, no stray fields) and publish it under a new `intent_id`."},
	{Code: Transport, Where: []string{Unreadable, Client},
		Meaning: "A request to the IC (or, in the client, to NATS) failed: connection, HTTP status, deadline of one request.",
		Action:  waitRetry},
	{Code: Uncertified, Where: []string{Unreadable},
		Meaning: "The ledger offers no tip certificate, and it is not configured `verify: queries`.",
		Action:  waitRetry + " The operator decides whether that ledger may be read on queries."},
	{Code: Unknown, Where: []string{Unreadable},
		Meaning: "A history error of a kind without a code of its own (a programming error).",
		Action:  waitRetry + " Report it."},
	{Code: UnconfiguredWait, Where: []string{Unreadable},
		Meaning: "The canister is not configured and the daemon already follows as many unconfigured canisters (or open intents of this one) as its caps allow: the intent is stored and read once a slot frees.",
		Action:  waitRetry + " Do not republish; the operator may configure the ledger or raise `--max-unconfigured-ledgers`."},
	{Code: UnknownCanister, Where: []string{Unreadable},
		Meaning: "No canister with that id exists on the network the daemon reads (a mistyped `canister_id`, or a ledger of another network).",
		Action:  "It stays unreadable until the id is fixed: publish the intent again under a new `intent_id` with the right id."},
	{Code: UnknownField, Where: []string{Invalid},
		Meaning: "The intent has a key the contract does not define (a misspelt field would otherwise be ignored).",
		Action:  fixIntent},
	{Code: UnknownLedger, Where: []string{Invalid},
		Meaning: "Final: the daemon runs with `--strict-ledgers` and the intent's ledger is not configured; nothing was read.",
		Action:  "Nothing was checked: do not pay again on this answer. The operator configures the ledger (then publish the intent again under a new `intent_id`), or the payment is settled another way."},
	{Code: UnknownParam, Where: []string{API}, HTTP: 400,
		Meaning: "A support API parameter it does not know: a misspelt filter fails rather than listing everything.",
		Action:  fixRequest},
	{Code: Unsupported, Where: []string{Unreadable},
		Meaning: "The ledger serves no block endpoint the daemon can read.",
		Action:  waitRetry},
}

// Lookup returns the entry of code c.
func Lookup(c Code) (Entry, bool) {
	for _, e := range Registry {
		if e.Code == c {
			return e, true
		}
	}
	return Entry{}, false
}
