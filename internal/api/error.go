// Package api holds the OpenAI-compatible wire types of the buyer API, their validation, and
// OpenAI-style errors. It imports only the standard library, money and protocol.
package api

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error types and codes, as OpenAI names them where OpenAI has a name.
const (
	TypeInvalidRequest    = "invalid_request_error"
	TypeAuthentication    = "authentication_error"
	TypeNotFound          = "not_found_error"
	TypeUnavailable       = "service_unavailable_error"
	TypeServer            = "server_error"
	TypeUpstream          = "upstream_error"
	TypeInsufficientQuota = "insufficient_quota"
	TypePermission        = "permission_error"
	// A 429's type names the limit reached, as OpenAI's do.
	TypeRequests = "requests"
	TypeTokens   = "tokens"

	CodeMissingAPIKey       = "missing_api_key"
	CodeInvalidAPIKey       = "invalid_api_key"
	CodeModelNotFound       = "model_not_found"
	CodeNoProviderAvailable = "no_provider_available"
	CodeRequestTooLarge     = "request_too_large"
	CodeRequestTimeout      = "request_timeout"
	CodeUnknownParameter    = "unknown_parameter"
	CodeInvalidJSON         = "invalid_json"
	CodeUnsupported         = "unsupported_parameter"
	CodeInvalidValue        = "invalid_value"
	CodeProviderError       = "provider_error"
	CodeInsufficientCredits = "insufficient_credits"
	CodeSpendLimitExceeded  = "spend_limit_exceeded"
	CodeModelNotAllowed     = "model_not_allowed"
	CodeNotFound            = "not_found"
	CodeRateLimitExceeded   = "rate_limit_exceeded"
)

// Error is an error the buyer sees, in OpenAI's shape:
//
//	{"error": {"message": "...", "type": "...", "param": "...", "code": "..."}}
//
// Param and Code are null when empty.
type Error struct {
	Status  int
	Message string
	Type    string
	Param   string
	Code    string
	// RetryAfter is the Retry-After of a 503 or 429 in seconds: 0 means 1, negative means none.
	RetryAfter int
	// Cause is the underlying error, for the log and errors.Is: never shown to the buyer,
	// who gets Message (a node engine's own error text, for one, is a stranger's words).
	Cause error
}

// Error is the status, code and message: what a buyer may read (a stream's error event quotes
// it). The cause is not in it: a log shows it apart (errors.Unwrap).
func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// MarshalJSON writes the error's body.
func (e *Error) MarshalJSON() ([]byte, error) {
	type body struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	b := body{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		b.Param = &e.Param
	}
	if e.Code != "" {
		b.Code = &e.Code
	}
	return json.Marshal(struct {
		Error body `json:"error"`
	}{b})
}

// Write sends the error as the HTTP response.
func (e *Error) Write(w http.ResponseWriter) {
	b, _ := json.Marshal(e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(e.Status)
	w.Write(b)
}

// BadRequest is a 400 about one parameter.
func BadRequest(param, code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Code: code,
		Message: fmt.Sprintf(format, args...)}
}

// Unsupported is a 400 for a parameter value ShareAI does not support.
func Unsupported(param, format string, args ...any) *Error {
	return BadRequest(param, CodeUnsupported, format, args...)
}
