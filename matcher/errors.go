package matcher

import "fmt"

// Refusal codes. They are part of the wire contract (an `invalid` verdict's
// reason.code), so they never change meaning.
const (
	CodeBadJSON       = "E_BAD_JSON"
	CodeTooLarge      = "E_TOO_LARGE"
	CodeUnknownField  = "E_UNKNOWN_FIELD"
	CodeBadIntentID   = "E_BAD_INTENT_ID"
	CodeBadCanister   = "E_BAD_CANISTER"
	CodeBadMethod     = "E_BAD_METHOD"
	CodeBadCaller     = "E_BAD_CALLER"
	CodeBadArgs       = "E_BAD_ARGS"
	CodeBadAccount    = "E_BAD_ACCOUNT"
	CodeBadSubaccount = "E_BAD_SUBACCOUNT"
	CodeBadAmount     = "E_BAD_AMOUNT"
	CodeBadFee        = "E_BAD_FEE"
	CodeBadMemo       = "E_BAD_MEMO"
	CodeBadAllowance  = "E_BAD_ALLOWANCE"
	CodeBadExpiresAt  = "E_BAD_EXPIRES_AT"
	CodeNoStamp       = "E_NO_STAMP"
	CodeBadStamp      = "E_BAD_STAMP"
	CodeBadAfter      = "E_BAD_AFTER"
	CodeBadExpiry     = "E_BAD_EXPIRY"
	CodeBadArgHex     = "E_BAD_ARG_HEX"
	CodeArgsMismatch  = "E_ARGS_MISMATCH"
)

// Error is why an intent was refused. Field is the JSON path of the offending
// value (`args.to`), empty when the refusal concerns the whole body.
type Error struct {
	Code    string
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("matcher: %s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("matcher: %s at %s: %s", e.Code, e.Field, e.Message)
}

func refuse(code, field, format string, a ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, a...)}
}
